#!/bin/sh
# Builds the Wasm image Istio and Envoy Gateway pull with Docker or Podman: `make image-docker`
# runs it. `make image` builds the same image without either (cmd/tollgate-image).
#
#   deploy/image/build.sh IMAGE WASM
#
# IMAGE is the name to tag it with (registry.example.com/tollgate:0.1.0), WASM the module
# (build/tollgate.wasm). It uses CONTAINER_TOOL when set, else docker, else podman. Without a
# container tool, or with docker but no daemon, it says what is missing and exits with 1.
set -eu

fail() {
	echo "make image-docker: $*" >&2
	exit 1
}

[ $# -eq 2 ] || fail "usage: deploy/image/build.sh IMAGE WASM"
image=$1
wasm=$2
here=$(cd "$(dirname "$0")" && pwd)

[ -f "$wasm" ] || fail "$wasm does not exist: build the module first (make build)"

tool=${CONTAINER_TOOL:-}
if [ -z "$tool" ]; then
	if command -v docker >/dev/null 2>&1; then
		tool=docker
	elif command -v podman >/dev/null 2>&1; then
		tool=podman
	else
		fail "no container tool found: install Docker (with its daemon running) or Podman, or name one in CONTAINER_TOOL"
	fi
fi
command -v "$tool" >/dev/null 2>&1 || fail "CONTAINER_TOOL=$tool is not on PATH"
if [ "$(basename "$tool")" = docker ] && ! out=$("$tool" info --format '{{.ServerVersion}}' 2>&1); then
	fail "docker is installed but no Docker daemon answers ($(echo "$out" | sed '/^[[:space:]]*$/d' | head -n 1)): start Docker, set DOCKER_HOST, or use CONTAINER_TOOL=podman"
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp "$wasm" "$context/plugin.wasm"
# Istio picks linux/amd64 out of a multi-platform index (what BuildKit pushes with attestations);
# the module runs anywhere, so say that platform whatever the build machine is.
"$tool" build --platform linux/amd64 --file "$here/Dockerfile" --tag "$image" "$context"
echo "built $image: one layer holding plugin.wasm ($(wc -c <"$wasm" | tr -d ' ') bytes)"
echo "push it with: $tool push $image"
echo "and set the WasmPlugin's url to oci://$image (deploy/istio/wasmplugin.yaml)"
