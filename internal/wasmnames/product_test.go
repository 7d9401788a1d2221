package wasmnames_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/host"
	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// The product, as make build writes it: its name section names the ABI's entry points and
// nothing else, the map names every function as the module built before the split did (read by
// wazero, independently of this package), and the module still loads and takes a configuration.
func TestProductKeepsTheEntryPointsNamesAndTheMapHasAll(t *testing.T) {
	unsplit := testbuild.Unsplit(t, "./filter")
	product := testbuild.Product(t)
	names := testbuild.Names(t, "./filter")

	before := functionNames(t, unsplit)
	if len(before) != len(names) || len(names) < 1000 {
		t.Fatalf("the map has %d names, the module before the split %d", len(names), len(before))
	}
	for _, n := range names {
		if before[n.Index] != n.Name {
			t.Fatalf("function %d: the map says %q, the module before the split %q", n.Index, n.Name, before[n.Index])
		}
	}

	kept := functionNames(t, product)
	for _, entry := range []string{"proxy_on_request_headers", "proxy_on_configure", "proxy_on_memory_allocate", "proxy_on_tick"} {
		found := false
		for _, name := range kept {
			found = found || name == entry
		}
		if !found {
			t.Errorf("the module does not name its entry point %s: %v", entry, kept)
		}
	}
	for index, name := range kept {
		if !strings.HasPrefix(name, "proxy_") && name != "_rt0_wasm_wasip1_lib" { // _initialize
			t.Errorf("the module names function %d %q, no entry point", index, name)
		}
		if want, _ := names.Lookup(index); want != name {
			t.Errorf("function %d: the module says %q, the map %q", index, name, want)
		}
	}

	// Only the name section changed, and it is now small.
	prefix := commonPrefix(product, unsplit)
	suffix := commonPrefix(reverse(product[prefix:]), reverse(unsplit[prefix:]))
	if changed := len(product) - prefix - suffix; changed > 1024 {
		t.Errorf("%d bytes of the module differ from the module before the split, want the name section alone, < 1 KB", changed)
	}
	if cut := len(unsplit) - len(product); cut < 50_000 {
		t.Errorf("the split cut %d bytes, want the names (80 KB)", cut)
	}
	t.Logf("module %d bytes, %d before the split; %d names in the map", len(product), len(unsplit), len(names))

	h, err := host.New(context.Background(), product, host.Options{
		PluginName: "tollgate",
		PluginConfig: []byte(`{"rules": [{"name": "per-api-key", "key": [{"header": "x-api-key"}],
		  "limits": [{"capacity": 3, "refill_tokens": 1, "refill_interval": "1s"}]}]}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	if _, err := h.NewVM(context.Background()); err != nil {
		t.Fatalf("the module does not start: %v", err)
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func reverse(b []byte) []byte {
	r := bytes.Clone(b)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return r
}
