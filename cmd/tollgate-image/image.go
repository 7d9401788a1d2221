package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image is the "compat" variant of the Wasm image specification that Istio and Envoy Gateway
// both fetch (solo-io/wasm spec/spec-compat.md): an OCI image manifest whose one layer is a
// standard gzipped tar holding the module as plugin.wasm, marked with the compat annotation.
//
// Both fetchers (istio/istio pkg/wasm/imagefetcher.go, and envoyproxy/gateway
// internal/wasm/imagefetcher.go, which is derived from it) read an OCI manifest by taking its
// last layer, requiring the media type application/vnd.oci.image.layer.v1.tar+gzip, and reading
// the file named plugin.wasm from the tar. Their other OCI path, the "oci" variant with the
// custom layer type application/vnd.module.wasm.content.layer.v1+wasm, demands exactly two
// layers (the module and a runtime-config.json), so a one-layer image of that type is refused by
// both; and only standard media types are stored by every registry and understood by docker,
// crane and skopeo. The Docker variant (a Docker manifest and layer type) is accepted too, but
// it is the legacy format of one tool, where OCI is the standard.
const (
	manifestMediaType = types.OCIManifestSchema1 // application/vnd.oci.image.manifest.v1+json
	configMediaType   = types.OCIConfigJSON      // application/vnd.oci.image.config.v1+json
	layerMediaType    = types.OCILayer           // application/vnd.oci.image.layer.v1.tar+gzip

	// variantAnnotation marks the manifest as the compat variant, as the specification asks
	// of an image whose layer has the standard OCI type.
	variantAnnotation = "module.wasm.image/variant"
	variantCompat     = "compat"
	versionAnnotation = "org.opencontainers.image.version"
	titleAnnotation   = "org.opencontainers.image.title"
	refNameAnnotation = "org.opencontainers.image.ref.name"

	// pluginFile is the name both fetchers look for in the layer.
	pluginFile = "plugin.wasm"
)

// wasmMagic starts every WebAssembly binary module: "\0asm" and version 1.
var wasmMagic = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// epoch is the modification time of plugin.wasm in the layer: fixed, so that the same module and
// version always make the same image, digest included.
var epoch = time.Unix(0, 0).UTC()

// newImage makes the image holding module as plugin.wasm. The platform in its configuration is
// wasip1/wasm, what the module is; neither fetcher looks at it, and the image is pushed as a
// single manifest, never inside an index where a platform would be chosen.
func newImage(module []byte, version string) (v1.Image, error) {
	if !bytes.HasPrefix(module, wasmMagic) {
		return nil, errors.New("not a WebAssembly module (it does not start with \\0asm and version 1)")
	}
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	header := &tar.Header{
		Typeflag: tar.TypeReg, Name: pluginFile, Size: int64(len(module)), Mode: 0o644,
		ModTime: epoch, Format: tar.FormatPAX,
	}
	if err := tw.WriteHeader(header); err != nil {
		return nil, err
	}
	if _, err := tw.Write(module); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	tarBytes := archive.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithMediaType(layerMediaType), tarball.WithCompressionLevel(gzip.BestCompression))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, manifestMediaType)
	img = mutate.ConfigMediaType(img, configMediaType)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: layerMediaType})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "wasip1", "wasm"
	cfg.Created = v1.Time{Time: epoch}
	for i := range cfg.History {
		cfg.History[i].Created = v1.Time{Time: epoch}
	}
	cfg.Config.Labels = map[string]string{titleAnnotation: "tollgate", versionAnnotation: version}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	annotated, ok := mutate.Annotations(img, map[string]string{
		variantAnnotation: variantCompat, titleAnnotation: "tollgate", versionAnnotation: version,
	}).(v1.Image)
	if !ok {
		return nil, errors.New("annotating the manifest did not give an image")
	}
	return annotated, nil
}

// writeLayout writes img as the only image of an OCI image layout in dir, replacing the layout
// dir held, with its version as the reference name (what `skopeo copy oci:DIR:VERSION` names).
// A dir that holds anything else is left alone: a mistyped --out must not delete a directory.
func writeLayout(dir string, img v1.Image, version string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); len(entries) > 0 && err != nil {
		return fmt.Errorf("%s exists and is not an OCI image layout: refusing to replace it; name a new or empty directory", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{refNameAnnotation: version}))
}

// readLayout reads the one image of the OCI image layout in dir.
func readLayout(dir string) (v1.Image, error) {
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		return nil, fmt.Errorf("%s holds no OCI image layout (build the image first: make image): %w", dir, err)
	}
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(manifest.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d images, want the one make image writes", dir, len(manifest.Manifests))
	}
	return index.Image(manifest.Manifests[0].Digest)
}
