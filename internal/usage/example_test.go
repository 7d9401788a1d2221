package usage_test

import (
	"fmt"

	"github.com/tollgate-proxy/tollgate/internal/usage"
)

// A streamed chat completion arrives in chunks that cut its lines and its JSON anywhere; the
// usage of its last chunk is read once the body ended.
func Example() {
	chunks := []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\nda",
		"ta: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"complet",
		"ion_tokens\":12,\"total_tokens\":21}}\n\ndata: [DONE]\n\n",
	}
	var s usage.Scanner // one per VM, reused for every response
	s.Reset(usage.OpenAI, usage.Total, true)
	for _, chunk := range chunks {
		s.Write([]byte(chunk))
	}
	fmt.Println(s.Tokens())

	s.Reset(usage.Anthropic, usage.Output, false)
	s.Write([]byte(`{"type":"message","usage":{"input_tokens":10,"output_tokens":-1}}`))
	n, ok := s.Tokens()
	fmt.Println(n, ok, s.Reason())
	// Output:
	// 21 true
	// 0 false a usage figure is negative
}
