package wasmdata

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
)

// segment is a data segment of a hand-made module: bytes written at an address.
type segment struct {
	at    uint32
	bytes []byte
}

// moduleWith is a module of one memory of pages pages, exported as "memory", whose data
// segments are segments, in their order; with a function (not the start function) when
// function is set, so that the unpacker's index follows one.
func moduleWith(pages uint32, segments []segment, function bool) []byte {
	m := []byte(wasmbin.Header)
	if function {
		m = wasmbin.AppendSection(m, wasmbin.TypeSection, []byte{1, 0x60, 1, 0x7f, 0}) // (i32) -> ()
		m = wasmbin.AppendSection(m, wasmbin.FunctionSection, []byte{1, 0})            // one function
	}
	m = wasmbin.AppendSection(m, memorySection, wasmbin.AppendU32([]byte{1, 0}, pages))
	m = wasmbin.AppendSection(m, wasmbin.ExportSection, append(wasmbin.AppendName([]byte{1}, "memory"), 2, 0))
	if function {
		m = wasmbin.AppendSection(m, wasmbin.CodeSection, []byte{1, 2, 0, wasmbin.OpEnd})
	}
	data := wasmbin.AppendU32(nil, uint32(len(segments)))
	for _, s := range segments {
		data = wasmbin.AppendS32(append(data, 0, wasmbin.OpI32Const), int32(s.at))
		data = wasmbin.AppendU32(append(data, wasmbin.OpEnd), uint32(len(s.bytes)))
		data = append(data, s.bytes...)
	}
	return wasmbin.AppendSection(m, wasmbin.DataSection, data)
}

// memoryAfterInstantiation instantiates a module of no imports and returns its whole memory.
func memoryAfterInstantiation(t *testing.T, module []byte) []byte {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	m, err := r.Instantiate(ctx, module)
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	memory, ok := m.Memory().Read(0, m.Memory().Size())
	if !ok {
		t.Fatal("memory unreadable")
	}
	return bytes.Clone(memory)
}

// randomSegments are segments as Go's linker writes them, between runs of zeros, of an image
// with runs of zeros, repeats near and far, and noise.
func randomSegments(rng *rand.Rand, base uint32, size int) []segment {
	image := make([]byte, 0, size)
	for len(image) < size {
		n := 1 + rng.IntN(300)
		switch rng.IntN(4) {
		case 0: // zeros
			image = append(image, make([]byte, n)...)
		case 1: // a repeat of earlier bytes, maybe overlapping where it is written
			if len(image) > 0 {
				from := rng.IntN(len(image))
				for k := 0; k < n; k++ {
					image = append(image, image[from+k])
				}
			}
		case 2: // a few symbols, a record-like pattern
			for k := 0; k < n; k++ {
				image = append(image, byte(rng.IntN(3)))
			}
		default:
			for k := 0; k < n; k++ {
				image = append(image, byte(rng.Uint32()))
			}
		}
	}
	image = image[:size]
	var segments []segment
	for i := 0; i < len(image); {
		for i < len(image) && image[i] == 0 {
			i++
		}
		j := i
		for j < len(image) && !(j+8 <= len(image) && bytes.Equal(image[j:j+8], make([]byte, 8))) {
			j++
		}
		if j > i {
			segments = append(segments, segment{base + uint32(i), image[i:j]})
		}
		i = j
	}
	return segments
}

// A packed module's memory after instantiation is, byte for byte, the unpacked module's: the
// segments' bytes where they were written, zeros everywhere else, the stream's copy at the end
// of memory included.
func TestPackedMemoryIsTheSegments(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name     string
		pages    uint32
		segments []segment
		function bool
	}{
		{"one segment", 1, []segment{{4096, []byte("hello, memory")}}, false},
		{"segments that overlap, the later winning", 1, []segment{{100, []byte("aaaaaaaaaa")}, {104, []byte("BB")}, {90, []byte("cccc")}}, true},
		{"a zero-filled segment and one at address 0", 1, []segment{{0, []byte{7}}, {5000, make([]byte, 300)}, {6000, []byte{1}}}, false},
		{"long zero runs and lengths past one LEB128 byte", 4, []segment{{4096, bytes.Repeat([]byte("x"), 200)}, {70000, bytes.Repeat([]byte{1, 2, 3}, 9000)}, {200000, []byte{9}}}, true},
		{"random, no room left: the memory grows", 3, randomSegments(rng, 4096, 3*pageSize-4096), false},
		{"random, a megabyte", 40, randomSegments(rng, 12288, 1<<20), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			module := moduleWith(tt.pages, tt.segments, tt.function)
			packed, stats, err := Pack(module)
			if err != nil {
				t.Fatal(err)
			}
			if stats.Segments != len(tt.segments) {
				t.Errorf("%d segments packed, want %d", stats.Segments, len(tt.segments))
			}
			want, got := memoryAfterInstantiation(t, module), memoryAfterInstantiation(t, packed)
			if len(got) < len(want) {
				t.Fatalf("packed memory %d bytes, want at least %d", len(got), len(want))
			}
			if extra := got[len(want):]; !bytes.Equal(extra, make([]byte, len(extra))) || !bytes.Equal(got[:len(want)], want) {
				t.Fatalf("packed module's memory differs from the segments'")
			}
		})
	}
}

// The stream unpacks to the image it was made of, for images of every shape; each copy reads
// only bytes written before it (expand refuses a stream where it would not).
func TestStreamRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	images := [][]byte{nil, {0}, {1}, make([]byte, 1000), bytes.Repeat([]byte{5}, 1000), bytes.Repeat([]byte("abcd"), 5000)}
	for range 200 {
		var image []byte
		for _, s := range randomSegments(rng, 0, 1+rng.IntN(20000)) {
			image = append(image, make([]byte, int(s.at)-len(image))...)
			image = append(image, s.bytes...)
		}
		images = append(images, image)
	}
	for i, image := range images {
		stream := compress(image)
		back, err := expand(stream, len(image))
		if err != nil || !bytes.Equal(back, image) {
			t.Fatalf("image %d (%d bytes): %v", i, len(image), err)
		}
		if len(image) > 1000 && len(stream) > len(image)+len(image)/100+8 {
			t.Errorf("image %d: %d bytes packed into %d", i, len(image), len(stream))
		}
	}
}

// What the packer was not made for is an error naming it, and a module without data comes back
// as it is.
func TestPackRefuses(t *testing.T) {
	plain := moduleWith(1, []segment{{4096, []byte("x")}}, false)
	withStart := bytes.Replace(plain, []byte{wasmbin.DataSection}, []byte{startSection, 1, 0, wasmbin.DataSection}, 1)
	passive := moduleWith(1, nil, false) // its data section, last, is 3 bytes: id, size, no segment
	passive = wasmbin.AppendSection(passive[:len(passive)-3], wasmbin.DataSection, []byte{1, 1, 1, 'x'})
	tests := []struct {
		name   string
		module []byte
		want   string
	}{
		{"not a module", []byte("\x7fELF"), "not a Wasm module"},
		{"a start function already", withStart, "a start function already"},
		{"a passive segment", passive, "segment 0 is not an active segment of memory 0"},
		{"a section cut short", plain[:len(plain)-1], "bytes announced"},
		{"data past the memory", moduleWith(1, []segment{{65535, []byte("xy")}}, false), "past the memory's initial size (1 pages of 64 KiB)"},
		{"data ending at 4 GiB, in a small memory", moduleWith(1, []segment{{0, []byte("a")}, {1<<32 - 16, make([]byte, 16)}}, false), "end at byte 4294967296, past"},
		{"an empty segment past the memory", moduleWith(1, []segment{{100, []byte("x")}, {70000, nil}}, false), "end at byte 70000, past"},
		{"data a 4 GiB memory ends with", moduleWith(65536, []segment{{1<<32 - 16, bytes.Repeat([]byte{1}, 16)}}, false), "works below 4 GiB"},
		{"fewer bodies than functions", bytes.Replace(moduleWith(1, []segment{{0, []byte("x")}}, true), []byte{wasmbin.CodeSection, 4, 1}, []byte{wasmbin.CodeSection, 4, 0}, 1), "1 functions and 0 function bodies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Pack(tt.module)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Pack: %v, want an error with %q", err, tt.want)
			}
		})
	}
	empty := []byte(wasmbin.Header)
	if out, _, err := Pack(empty); err != nil || !bytes.Equal(out, empty) {
		t.Fatalf("a module without data: %v", err)
	}
}

// FuzzPack reads any bytes as a module: Pack never panics, and a module it packs is one it
// reads again, with no data segment left to pack but its own.
func FuzzPack(f *testing.F) {
	f.Add(moduleWith(1, []segment{{4096, []byte("hello")}, {5000, []byte{0, 0, 1}}}, true))
	f.Add(moduleWith(2, []segment{{0, bytes.Repeat([]byte("ab"), 100)}}, false))
	f.Add(moduleWith(1, []segment{{0, []byte("a")}, {1<<32 - 16, make([]byte, 16)}}, false))
	f.Add(moduleWith(65536, []segment{{1<<32 - 16, bytes.Repeat([]byte{1}, 16)}, {1<<32 - 32, []byte{2}}}, false))
	f.Fuzz(func(t *testing.T, module []byte) {
		packed, _, err := Pack(module)
		if err != nil || bytes.Equal(packed, module) {
			return
		}
		if _, _, err := Pack(packed); err == nil || !strings.Contains(err.Error(), "start function already") {
			t.Fatalf("packing a packed module again: %v", err)
		}
	})
}
