package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// TestMain builds the modules the tests load, all at once, and compiles them into the shared
// compilation cache, before any test runs: the builds overlap, the tests running in parallel do
// not compile the same module twice, and no test's time includes either. A failed
// build fails the tests that need the module (testbuild keeps the error), not the others.
func TestMain(m *testing.M) {
	var wg sync.WaitGroup
	for _, build := range []struct {
		pkg  string
		tags []string
	}{
		{"./filter", nil},
		{"./filter", []string{"tollgate_faults"}},
		{"./internal/host/testdata/fsimport", nil},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wasm, err := testbuild.ModuleBytes(build.pkg, build.tags...)
			if err == nil {
				err = precompile(wasm)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}()
	}
	wg.Wait()
	os.Exit(m.Run())
}

// precompile compiles a module into cache with the hosts' runtime configuration. The compiled
// module stays in the cache after the runtime closes.
func precompile(wasm []byte) error {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	defer r.Close(ctx)
	_, err := r.CompileModule(ctx, wasm)
	return err
}
