package host

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// TestMain builds the test modules of testdata/ all at once and compiles them into the shared
// compilation cache, with New's runtime configuration, before any test runs: the builds overlap
// and no test's time includes one. A failed build fails the tests that load the module
// (testbuild keeps the error), not the others.
func TestMain(m *testing.M) {
	var wg sync.WaitGroup
	for _, name := range []string{"probe", "allocrestricted", "fsimport"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wasm, err := testbuild.ModuleBytes("./internal/host/testdata/" + name)
			if err == nil {
				ctx := context.Background()
				r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
				_, err = r.CompileModule(ctx, wasm)
				r.Close(ctx)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}()
	}
	wg.Wait()
	os.Exit(m.Run())
}
