package wasmdata_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
)

// instantiateInV8 is a Node.js script: it instantiates each module named on its command line in
// V8 with every import a stub (the Go runtime's _initialize does not run, so none is called), 30
// times, and prints the memory each last instance has, as a comparison, and the median time of an
// instantiation, for the log.
const instantiateInV8 = `
const fs = require('fs');
async function instantiate(path) {
  const module = await WebAssembly.compile(fs.readFileSync(path));
  const imports = {};
  for (const i of WebAssembly.Module.imports(module)) {
    imports[i.module] = imports[i.module] || {};
    if (i.kind === 'function') imports[i.module][i.name] = () => 0;
  }
  const times = [];
  let instance;
  for (let n = 0; n < 30; n++) {
    const start = process.hrtime.bigint();
    instance = await WebAssembly.instantiate(module, imports);
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  return { memory: new Uint8Array(instance.exports.memory.buffer), ms: times[15] };
}
(async () => {
  const [segments, packed] = [await instantiate(process.argv[2]), await instantiate(process.argv[3])];
  let differ = 0, first = -1, nonZero = 0;
  for (let i = 0; i < Math.max(segments.memory.length, packed.memory.length); i++) {
    const a = segments.memory[i] || 0, b = packed.memory[i] || 0;
    if (a !== 0) nonZero++;
    if (a !== b) { differ++; if (first < 0) first = i; }
  }
  console.log(JSON.stringify({ v8: process.versions.v8, segmentsBytes: segments.memory.length,
    packedBytes: packed.memory.length, nonZero, differ, first, segmentsMs: segments.ms, packedMs: packed.ms }));
})().catch(e => { console.error(String(e)); process.exit(1); });
`

// Envoy's default runtime is V8: the module as make build builds it instantiates there, and its
// memory after instantiation is, byte for byte, that of the same build before its data was
// packed, whose segments V8 writes itself.
func TestPackedModuleInV8(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is not installed; CI needs it (.ci/run installs Debian's nodejs)")
		}
		t.Skip("node is not installed (Debian: apt-get install nodejs), so the module is not instantiated in V8")
	}
	dir := t.TempDir()
	paths := map[string][]byte{
		"segments.wasm": testbuild.Unpacked(t, "./filter"),
		"packed.wasm":   testbuild.Module(t, "./filter"),
		"check.js":      []byte(instantiateInV8),
	}
	for name, data := range paths {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(node, filepath.Join(dir, "check.js"), filepath.Join(dir, "segments.wasm"), filepath.Join(dir, "packed.wasm")).Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got struct {
		V8                         string
		SegmentsBytes, PackedBytes int
		NonZero, Differ, First     int
		SegmentsMs, PackedMs       float64
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The data is hundreds of kilobytes: equal memories are not two empty ones.
	if got.SegmentsBytes != got.PackedBytes || got.NonZero < 100_000 || got.Differ != 0 {
		t.Fatalf("V8 %s: memories of %d and %d bytes, %d bytes of data, %d bytes differ (the first at %d)",
			got.V8, got.SegmentsBytes, got.PackedBytes, got.NonZero, got.Differ, got.First)
	}
	t.Logf("V8 %s: the same %d bytes of memory (%d of them data); instantiation, median of 30: %.2f ms with the segments, %.2f ms packed",
		got.V8, got.PackedBytes, got.NonZero, got.SegmentsMs, got.PackedMs)
}
