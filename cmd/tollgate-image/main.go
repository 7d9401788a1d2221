// Command tollgate-image builds and pushes the Wasm OCI image of Tollgate without a container
// engine: `make image` and `make push` run it.
//
//	tollgate-image build --wasm build/tollgate.wasm --version V --out build/image
//	tollgate-image push --layout build/image --image REGISTRY/REPOSITORY:TAG [--insecure]
//
// build writes the image as an OCI image layout (a directory: oci-layout, index.json, blobs/)
// and prints its digest; the same module and version always give the same digest. push sends
// that image to a registry, with the credentials of `docker login` (~/.docker/config.json and
// its credential helpers) when there are any, and prints the pushed reference by digest. The
// image format and why it is that one: image.go.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/tollgate-proxy/tollgate/internal/subcommand"
)

const usage = `usage:
  tollgate-image build --wasm FILE --version V --out DIR
                       write the Wasm image holding FILE as plugin.wasm to DIR, an OCI image layout
  tollgate-image push --layout DIR --image REGISTRY/REPOSITORY:TAG [--insecure]
                       push the image in DIR (--insecure: the registry speaks plain HTTP)
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is the whole command; it returns the exit code: 0 success, 1 the work failed, 2 bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "build":
			return build(args[1:], stdout, stderr)
		case "push":
			return push(args[1:], stdout, stderr)
		}
	}
	return subcommand.Unmatched("tollgate-image", usage, args, stdout, stderr)
}

// flags parses args, reporting a usage error under the command's name.
func flags(cmd string, args []string, stderr io.Writer, define func(*flag.FlagSet)) bool {
	fs := flag.NewFlagSet("tollgate-image "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	define(fs)
	if err := fs.Parse(args); err != nil {
		return false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tollgate-image %s: unexpected arguments %q\n", cmd, fs.Args())
		return false
	}
	return true
}

func build(args []string, stdout, stderr io.Writer) int {
	var wasm, version, out string
	if !flags("build", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&wasm, "wasm", "", "the module")
		fs.StringVar(&version, "version", "", "the version, recorded in the image's annotations and labels")
		fs.StringVar(&out, "out", "", "the directory to write the OCI image layout to (replaced)")
	}) {
		return 2
	}
	for _, required := range []struct{ flag, value string }{{"--wasm", wasm}, {"--version", version}, {"--out", out}} {
		if required.value == "" {
			fmt.Fprintf(stderr, "tollgate-image build: %s is required\n", required.flag)
			return 2
		}
	}
	module, err := os.ReadFile(wasm)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate-image build: %v (build the module first: make build)\n", err)
		return 1
	}
	img, err := newImage(module, version)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate-image build: %s: %v\n", wasm, err)
		return 1
	}
	digest, err := img.Digest()
	if err == nil {
		err = writeLayout(out, img, version)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate-image build: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "built the Wasm image of %s %s in %s: one layer holding plugin.wasm (%d bytes)\n", wasm, version, out, len(module))
	fmt.Fprintf(stdout, "digest %s\n", digest)
	return 0
}

func push(args []string, stdout, stderr io.Writer) int {
	var dir, image string
	var insecure bool
	if !flags("push", args, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&dir, "layout", "", "the OCI image layout make image wrote")
		fs.StringVar(&image, "image", "", "where to push, REGISTRY/REPOSITORY:TAG")
		fs.BoolVar(&insecure, "insecure", false, "the registry speaks plain HTTP")
	}) {
		return 2
	}
	if dir == "" {
		fmt.Fprintln(stderr, "tollgate-image push: --layout is required")
		return 2
	}
	if image == "" {
		fmt.Fprintln(stderr, "tollgate-image push: --image is required: say where to push, as in IMAGE=registry.example.com/tollgate:0.1.0 make push")
		return 2
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.NewTag(image, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate-image push: --image %q: %v; want REGISTRY/REPOSITORY:TAG\n", image, err)
		return 2
	}
	if tag.TagStr() == "latest" && !strings.HasSuffix(image, ":latest") {
		fmt.Fprintf(stderr, "tollgate-image push: --image %q has no tag; name one (REGISTRY/REPOSITORY:TAG), so that what runs can be pinned\n", image)
		return 2
	}
	img, err := readLayout(dir)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate-image push: %v\n", err)
		return 1
	}
	digest, err := img.Digest()
	if err == nil {
		err = remote.Write(tag, img, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate-image push: %s: %v\n", tag, err)
		return 1
	}
	fmt.Fprintf(stdout, "pushed %s\n", tag)
	fmt.Fprintf(stdout, "digest %s: pin it as %s@%s\n", digest, tag.Context(), digest)
	return 0
}
