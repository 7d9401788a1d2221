package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

var (
	moduleOnce  sync.Once
	moduleFile  string
	moduleBytes []byte
	moduleErr   error
)

// module is the filter built as `make build` does (internal/testbuild), once per test binary,
// and written to a file: the image must carry the real module. A build failure fails the test.
func module(t *testing.T) (string, []byte) {
	t.Helper()
	moduleOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tollgate-image-test")
		if err != nil {
			moduleErr = err
			return
		}
		moduleFile = filepath.Join(dir, "tollgate.wasm")
		if moduleBytes, moduleErr = testbuild.ModuleBytes("./filter"); moduleErr == nil {
			moduleErr = os.WriteFile(moduleFile, moduleBytes, 0o644)
		}
	})
	if moduleErr != nil {
		t.Fatal(moduleErr)
	}
	return moduleFile, moduleBytes
}

func TestMain(m *testing.M) {
	code := m.Run()
	if moduleFile != "" {
		os.RemoveAll(filepath.Dir(moduleFile))
	}
	os.Exit(code)
}

func runImage(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// printedDigest is the digest a build or push printed on its "digest" line.
func printedDigest(t *testing.T, stdout string) string {
	t.Helper()
	for _, line := range strings.Split(stdout, "\n") {
		if rest, ok := strings.CutPrefix(line, "digest "); ok {
			return strings.TrimSuffix(strings.Fields(rest)[0], ":")
		}
	}
	t.Fatalf("no digest line in %q", stdout)
	return ""
}

// istioModule extracts the module from an image the way Istio's and Envoy Gateway's fetchers
// read an OCI manifest (istio/istio pkg/wasm/imagefetcher.go, PrepareFetch and
// extractOCIStandardImage; envoyproxy/gateway internal/wasm/imagefetcher.go is the same): a
// Docker manifest would take another path, so the manifest must be OCI; then the last layer,
// which must be an OCI tar+gzip layer, read as compressed bytes, gunzipped, and the file whose
// base name is plugin.wasm taken out of the tar. Unlike them it also refuses anything else in
// the layer, since the image must hold the module only.
func istioModule(img v1.Image) ([]byte, error) {
	manifest, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if manifest.MediaType == types.DockerManifestSchema2 {
		return nil, fmt.Errorf("a Docker manifest")
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) == 0 {
		return nil, fmt.Errorf("no layers")
	}
	last := layers[len(layers)-1]
	if mt, err := last.MediaType(); err != nil || mt != types.OCILayer {
		return nil, fmt.Errorf("last layer has media type %q (%v), want %s", mt, err, types.OCILayer)
	}
	compressed, err := last.Compressed()
	if err != nil {
		return nil, err
	}
	defer compressed.Close()
	gz, err := gzip.NewReader(compressed)
	if err != nil {
		return nil, fmt.Errorf("the layer is not gzip: %v", err)
	}
	tr := tar.NewReader(gz)
	var found []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if h.Name != pluginFile || h.Typeflag != tar.TypeReg || found != nil {
			return nil, fmt.Errorf("the layer holds %q (type %c) besides the module", h.Name, h.Typeflag)
		}
		if found, err = io.ReadAll(tr); err != nil {
			return nil, err
		}
	}
	if found == nil {
		return nil, fmt.Errorf("no %s in the layer", pluginFile)
	}
	return found, nil
}

// The image goes through a real registry protocol: built as make image builds it, pushed as
// make push pushes it to an in-process registry, pulled back as Istio and Envoy Gateway pull it.
// What comes back is the module byte for byte, in the compat variant's media types.
func TestPushedImagePullsBackAsTheModule(t *testing.T) {
	wasm, want := module(t)
	server := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer server.Close()
	u, err := url.Parse(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	ref := u.Host + "/tollgate/tollgate:v1.2.3"

	out := filepath.Join(t.TempDir(), "image")
	code, stdout, stderr := runImage("build", "--wasm", wasm, "--version", "v1.2.3", "--out", out)
	if code != 0 {
		t.Fatalf("build: exit %d\n%s", code, stderr)
	}
	built := printedDigest(t, stdout)
	code, stdout, stderr = runImage("push", "--layout", out, "--image", ref)
	if code != 0 {
		t.Fatalf("push: exit %d\n%s", code, stderr)
	}
	if pushed := printedDigest(t, stdout); pushed != built {
		t.Errorf("push printed digest %s, build printed %s", pushed, built)
	}
	if !strings.Contains(stdout, "pin it as "+u.Host+"/tollgate/tollgate@"+built) {
		t.Errorf("push does not say how to pin the digest:\n%s", stdout)
	}

	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(tag)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != built {
		t.Errorf("the registry serves %s under the tag, build printed %s", desc.Digest, built)
	}
	if desc.MediaType != types.OCIManifestSchema1 {
		t.Errorf("served as %s, want %s", desc.MediaType, types.OCIManifestSchema1)
	}
	img, err := desc.Image()
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if manifest.MediaType != types.OCIManifestSchema1 || manifest.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("manifest %s with config %s, want %s with %s", manifest.MediaType, manifest.Config.MediaType, types.OCIManifestSchema1, types.OCIConfigJSON)
	}
	if len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != types.OCILayer {
		t.Errorf("layers %+v, want exactly one of %s", manifest.Layers, types.OCILayer)
	}
	for key, value := range map[string]string{"module.wasm.image/variant": "compat", "org.opencontainers.image.version": "v1.2.3"} {
		if got := manifest.Annotations[key]; got != value {
			t.Errorf("annotation %s = %q, want %q", key, got, value)
		}
	}
	got, err := istioModule(img)
	if err != nil {
		t.Fatalf("the pulled image is not one Istio reads: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the pulled plugin.wasm (%d bytes) is not the module (%d bytes)", len(got), len(want))
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	diffID, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := diffID[0].DiffID(); len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != id {
		t.Errorf("config diff_ids %v, want the layer's %v", cfg.RootFS.DiffIDs, id)
	}
}

// The same module and version make the same image: a rebuild does not change the digest that
// manifests pin, and another version does.
func TestImageIsReproducible(t *testing.T) {
	wasm, _ := module(t)
	digest := func(version string) string {
		code, stdout, stderr := runImage("build", "--wasm", wasm, "--version", version, "--out", filepath.Join(t.TempDir(), "image"))
		if code != 0 {
			t.Fatalf("build: exit %d\n%s", code, stderr)
		}
		return printedDigest(t, stdout)
	}
	first, second, other := digest("v1.0.0"), digest("v1.0.0"), digest("v1.0.1")
	if first != second {
		t.Errorf("two builds of the same module and version: %s and %s", first, second)
	}
	if first == other {
		t.Errorf("another version made the same digest %s", first)
	}
}

// A build over an earlier one replaces it: the layout holds exactly the new image.
func TestBuildReplacesTheLayout(t *testing.T) {
	wasm, _ := module(t)
	out := filepath.Join(t.TempDir(), "image")
	for _, version := range []string{"v1.0.0", "v1.0.1"} {
		if code, _, stderr := runImage("build", "--wasm", wasm, "--version", version, "--out", out); code != 0 {
			t.Fatalf("build: exit %d\n%s", code, stderr)
		}
	}
	img, err := readLayout(out)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if v := manifest.Annotations["org.opencontainers.image.version"]; v != "v1.0.1" {
		t.Errorf("the layout holds version %q, want v1.0.1", v)
	}
}

// Mistakes end with an exit code and a message that says what is wrong, before anything is sent.
func TestImageCommandErrors(t *testing.T) {
	wasm, _ := module(t)
	notWasm := filepath.Join(t.TempDir(), "tollgate.wasm")
	if err := os.WriteFile(notWasm, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "image")
	if code, _, stderr := runImage("build", "--wasm", wasm, "--version", "v1", "--out", out); code != 0 {
		t.Fatalf("build: %s", stderr)
	}
	// A registry that was there and is gone: its port refuses connections.
	gone := httptest.NewServer(registry.New())
	gone.Close()
	closedHost := strings.TrimPrefix(gone.URL, "http://")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "usage:"},
		{"unknown command", []string{"bild"}, 2, `unknown command "bild"`},
		{"build without the module", []string{"build", "--version", "v1", "--out", out}, 2, "--wasm is required"},
		{"build without a version", []string{"build", "--wasm", wasm, "--out", out}, 2, "--version is required"},
		{"module missing", []string{"build", "--wasm", filepath.Join(t.TempDir(), "none.wasm"), "--version", "v1", "--out", out}, 1, "build the module first: make build"},
		{"not a module", []string{"build", "--wasm", notWasm, "--version", "v1", "--out", out}, 1, "not a WebAssembly module"},
		{"output over another directory", []string{"build", "--wasm", wasm, "--version", "v1", "--out", filepath.Dir(notWasm)}, 1, "is not an OCI image layout: refusing to replace it"},
		{"push without an image", []string{"push", "--layout", out}, 2, "IMAGE=registry.example.com/tollgate:0.1.0 make push"},
		{"push without a tag", []string{"push", "--layout", out, "--image", "registry.example.com/tollgate"}, 2, "has no tag"},
		{"push a bad reference", []string{"push", "--layout", out, "--image", "Registry Example/tollgate:1"}, 2, "want REGISTRY/REPOSITORY:TAG"},
		{"push before a build", []string{"push", "--layout", filepath.Join(t.TempDir(), "none"), "--image", "registry.example.com/tollgate:1"}, 1, "build the image first: make image"},
		{"registry unreachable", []string{"push", "--layout", out, "--image", closedHost + "/tollgate:1"}, 1, closedHost + "/tollgate:1: "},
		{"stray argument", []string{"push", "--layout", out, "--image", "registry.example.com/tollgate:1", "extra"}, 2, `unexpected arguments ["extra"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runImage(tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}
