package plugin

import (
	"strings"

	"github.com/tetratelabs/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tollgate-proxy/tollgate/internal/abi"
	"github.com/tollgate-proxy/tollgate/internal/admission"
	"github.com/tollgate-proxy/tollgate/internal/wire"
)

// The shadow marker: the header a request a shadow rule would have limited carries to the
// upstream. An upstream must be able to trust it, so a client's own is removed from every request
// that may reach the upstream (OnHttpRequestHeaders says when).

// ShadowHeader is added to requests that a shadow rule would have limited, for the upstream;
// its value lists those rules.
const ShadowHeader = "x-tollgate-shadow-limited"

// hasShadowMarker is whether headers, the request's, carry the shadow marker. Small enough to be
// inlined: a call to wire.PairsValue and no more.
func hasShadowMarker(headers []byte) bool {
	_, marked := wire.PairsValue(headers, ShadowHeader)
	return marked
}

// unmark removes the shadow marker from the request's headers (OnHttpRequestHeaders,
// failRequest). The edit makes the ABI forget the headers it read: what reads them next reads
// them without the marker.
func (h *httpContext) unmark() {
	if err := abi.RemoveHttpRequestHeader(ShadowHeader); err != nil {
		h.plugin.failed("cannot remove " + ShadowHeader + ": " + err.Error())
	}
}

// markShadow sets the shadow header to the rules that would have limited the request (the one
// the client may have sent is gone already).
func (h *httpContext) markShadow(out *admission.Outcome) {
	p := h.plugin
	if len(out.ShadowLimited) == 0 {
		return
	}
	names := make([]string, len(out.ShadowLimited))
	for j, i := range out.ShadowLimited {
		p.rules[i].shadowLimited.add(1)
		names[j] = p.ruleName(i)
	}
	if err := abi.AddHttpRequestHeader(ShadowHeader, strings.Join(names, ",")); err != nil {
		p.failed("cannot mark a shadow-limited request: " + err.Error())
	}
}

// failRequest is failOpenOrDeny in the request headers callback where the shadow marker may not
// have been looked for (the lean shape's clock failed, the decision or the stream's context
// panicked): a request that continues loses a client's marker first.
func (h *httpContext) failRequest() types.Action {
	action := h.failOpenOrDeny()
	if action == types.ActionContinue {
		h.unmark()
	}
	return action
}
