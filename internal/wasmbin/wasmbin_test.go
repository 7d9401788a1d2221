package wasmbin_test

import (
	"bytes"
	"errors"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
)

// Each malformed input is an error naming the byte it was found at, and every read after it
// returns zero.
func TestReaderErrors(t *testing.T) {
	tests := []struct {
		name  string
		input []byte
		read  func(r *wasmbin.Reader)
		want  string
	}{
		{"a byte past the end", nil, func(r *wasmbin.Reader) { r.Byte() }, "byte 0: ends early"},
		{"a number cut short", []byte{0x80, 0x80}, func(r *wasmbin.Reader) { r.U32() }, "byte 2: ends early"},
		{"a number of six bytes", []byte{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0}, func(r *wasmbin.Reader) { r.Byte(); r.U32() }, "byte 1: a number longer than 5 bytes"},
		{"a number beyond 32 bits", []byte{0x80, 0x80, 0x80, 0x80, 0x10}, func(r *wasmbin.Reader) { r.U32() }, "byte 0: a number beyond 32 bits"},
		{"an i64 of eleven bytes", bytes.Repeat([]byte{0xff}, 11), func(r *wasmbin.Reader) { r.S64() }, "byte 0: a number longer than 10 bytes"},
		{"an i64 beyond 64 bits", append(bytes.Repeat([]byte{0xff}, 9), 0x01), func(r *wasmbin.Reader) { r.S64() }, "byte 0: a number beyond 64 bits"},
		{"an i32 of six bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0}, func(r *wasmbin.Reader) { r.S32() }, "byte 0: a number longer than 5 bytes"},
		{"an i32 beyond 32 bits", []byte{0x80, 0x80, 0x80, 0x80, 0x40}, func(r *wasmbin.Reader) { r.S32() }, "byte 0: a number beyond 32 bits"},
		{"bytes beyond the end", []byte{5, 'a'}, func(r *wasmbin.Reader) { r.Name() }, "byte 1: 5 bytes announced, 1 left"},
		{"a section beyond the end", []byte{1, 10, 0}, func(r *wasmbin.Reader) { r.Section() }, "byte 2: 10 bytes announced, 1 left"},
		{"bytes left over", []byte{0, 7, 7}, func(r *wasmbin.Reader) { r.Byte(); r.End() }, "byte 1: 2 bytes left over"},
		{"a byte stepped back over", []byte{0x40}, func(r *wasmbin.Reader) { r.Byte(); r.Unread(); r.Fail("refused") }, "byte 0: refused"},
		{"the first error sticks", []byte{0x80}, func(r *wasmbin.Reader) { r.U32(); r.Fail("later") }, "byte 1: ends early"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := wasmbin.NewReader(tt.input)
			tt.read(r)
			if err := r.Err(); err == nil || err.Error() != tt.want {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if r.More() || r.Byte() != 0 || r.U32() != 0 || r.S64() != 0 || r.Name() != "" || len(r.Left()) != 0 {
				t.Fatalf("a read after the error returned something")
			}
		})
	}
}

// What the Append functions write, a Reader reads back, in the fewest bytes the format allows.
func TestNumbersRoundTrip(t *testing.T) {
	for _, v := range []uint32{0, 1, 63, 64, 127, 128, 16383, 16384, 1<<28 - 1, 1 << 28, math.MaxUint32} {
		b := wasmbin.AppendU32(nil, v)
		r := wasmbin.NewReader(b)
		if got := r.U32(); got != v || r.Err() != nil || r.More() {
			t.Errorf("U32 of %x (from %d) = %d, %v", b, v, got, r.Err())
		}
		if want := max(1, (bits.Len64(uint64(v))+6)/7); len(b) != want {
			t.Errorf("AppendU32(%d) took %d bytes, want %d", v, len(b), want)
		}
	}
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 8191, 8192, -8192, -8193, math.MaxInt32, math.MinInt32,
		1 << 31, -1<<31 - 1, 1<<62 + 5, math.MaxInt64, math.MinInt64} {
		b := wasmbin.AppendS64(nil, v)
		r := wasmbin.NewReader(b)
		if got := r.S64(); got != v || r.Err() != nil || r.More() {
			t.Errorf("S64 of %x (from %d) = %d, %v", b, v, got, r.Err())
		}
		// The shortest form: the value's bits and its sign bit, seven a byte.
		magnitude := uint64(v)
		if v < 0 {
			magnitude = uint64(^v)
		}
		if want := (bits.Len64(magnitude) + 1 + 6) / 7; len(b) != want {
			t.Errorf("AppendS64(%d) took %d bytes, want %d", v, len(b), want)
		}
		if v != int64(int32(v)) {
			continue
		}
		// An i32's immediate is the same number: the same bytes, which S32 reads back.
		if b32 := wasmbin.AppendS32(nil, int32(v)); !bytes.Equal(b32, b) {
			t.Errorf("AppendS32(%d) = %x, AppendS64 %x", v, b32, b)
		}
		r = wasmbin.NewReader(b)
		if got := r.S32(); int64(got) != v || r.Err() != nil || r.More() {
			t.Errorf("S32 of %x (from %d) = %d, %v", b, v, got, r.Err())
		}
	}
}

// A module's sections read back as they were appended, and a module whose header is not
// version 1's is refused.
func TestSections(t *testing.T) {
	module := []byte(wasmbin.Header)
	module = wasmbin.AppendSection(module, wasmbin.CustomSection, wasmbin.AppendName(nil, "name"))
	module = wasmbin.AppendSection(module, wasmbin.CodeSection, bytes.Repeat([]byte{0x0b}, 200))
	r, err := wasmbin.Sections(module)
	if err != nil {
		t.Fatal(err)
	}
	id, content := r.Section()
	if id != wasmbin.CustomSection || content.Name() != "name" || content.More() {
		t.Fatalf("first section: %d", id)
	}
	id, content = r.Section()
	if id != wasmbin.CodeSection || !bytes.Equal(content.Left(), bytes.Repeat([]byte{0x0b}, 200)) || r.More() || r.Err() != nil {
		t.Fatalf("second section: %d, %v", id, r.Err())
	}
	for _, header := range []string{"", "\x00asm", "\x00asm\x02\x00\x00\x00", "\x7fELF\x01\x00\x00\x00"} {
		if _, err := wasmbin.Sections([]byte(header)); err == nil || !strings.Contains(err.Error(), "not a Wasm module") {
			t.Errorf("Sections(%q): %v", header, err)
		}
	}
}

// FuzzSections reads any bytes as a module's sections: no read panics, an error stops the walk,
// and every section read without one is appended again as the same bytes when the input wrote
// its size in the shortest form.
func FuzzSections(f *testing.F) {
	f.Add([]byte{0, 5, 4, 'n', 'a', 'm', 'e'})
	f.Add([]byte{10, 0x82, 0, 0, 0})
	f.Add([]byte{1, 10, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := wasmbin.Sections(append([]byte(wasmbin.Header), data...))
		if err != nil {
			t.Fatal(err)
		}
		for r.More() {
			start := r.Offset()
			id, content := r.Section()
			if r.Err() != nil {
				if content.More() || content.Err() == nil {
					t.Fatalf("a section that could not be read has content")
				}
				return
			}
			whole := data[start-len(wasmbin.Header) : r.Offset()-len(wasmbin.Header)]
			again := wasmbin.AppendSection(nil, id, content.Left())
			if len(again) > len(whole) || len(again) == len(whole) && !bytes.Equal(again, whole) {
				t.Fatalf("section %x appended again as %x", whole, again)
			}
		}
	})
}

// A rewritten file keeps its mode, and one whose rewrite fails is left as it was, its error
// naming the file.
func TestRewriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "module.wasm")
	if err := os.WriteFile(path, []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := wasmbin.RewriteFile(path, func(b []byte) ([]byte, error) { return append(b, " new"...), nil }); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != "old new" {
		t.Fatalf("rewritten: %q", data)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v, want 0755", info.Mode().Perm())
	}
	err := wasmbin.RewriteFile(path, func([]byte) ([]byte, error) { return nil, errors.New("refused") })
	if data, _ := os.ReadFile(path); err == nil || err.Error() != path+": refused" || string(data) != "old new" {
		t.Fatalf("a refused rewrite: %v, the file %q", err, data)
	}
}

// RewriteModules runs its step on every module, failing or not, and its exit status says
// whether one failed, or whether none was named.
func TestRewriteModulesStatus(t *testing.T) {
	var ran []string
	step := func(path string) (string, error) {
		ran = append(ran, path)
		if path == "bad" {
			return "", errors.New("refused")
		}
		return path + ": done", nil
	}
	for _, c := range []struct {
		paths  []string
		status int
	}{{nil, 2}, {[]string{"a", "b"}, 0}, {[]string{"bad", "b"}, 1}} {
		ran = nil
		if got := wasmbin.RewriteModules("tool", c.paths, step); got != c.status || len(ran) != len(c.paths) {
			t.Fatalf("%q: status %d after %q, want %d after every module", c.paths, got, ran, c.status)
		}
	}
}

// RewriteCode rewrites each function body and nothing else, sums the counts, and names the body
// a rewrite refuses; RewriteCodeFile writes the result in place and leaves a module it cannot
// read as it was.
func TestRewriteCode(t *testing.T) {
	custom := wasmbin.AppendSection([]byte(wasmbin.Header), wasmbin.CustomSection, wasmbin.AppendName(nil, "x"))
	// Two bodies, no locals: `nop; end` and `nop; nop; end`.
	module := wasmbin.AppendSection(custom, wasmbin.CodeSection, []byte{2, 3, 0, 0x01, 0x0b, 4, 0, 0x01, 0x01, 0x0b})
	dropNops := func(body []byte) ([]byte, int, error) {
		kept := bytes.ReplaceAll(body[1:], []byte{0x01}, nil)
		return append(body[:1:1], kept...), len(body) - 1 - len(kept), nil
	}
	want := wasmbin.AppendSection(custom, wasmbin.CodeSection, []byte{2, 2, 0, 0x0b, 2, 0, 0x0b})
	got, count, err := wasmbin.RewriteCode(module, dropNops)
	if err != nil || count != 3 || !bytes.Equal(got, want) {
		t.Fatalf("RewriteCode: %x, %d, %v; want %x, 3", got, count, err, want)
	}
	refuseSecond := func(body []byte) ([]byte, int, error) {
		if len(body) == 4 {
			return nil, 0, errors.New("refused")
		}
		return body, 0, nil
	}
	if _, _, err := wasmbin.RewriteCode(module, refuseSecond); err == nil || !strings.Contains(err.Error(), "function body 1: refused") {
		t.Fatalf("a refused body: %v", err)
	}

	path := filepath.Join(t.TempDir(), "m.wasm")
	if err := os.WriteFile(path, module, 0o644); err != nil {
		t.Fatal(err)
	}
	if count, err := wasmbin.RewriteCodeFile(path, dropNops); err != nil || count != 3 {
		t.Fatalf("RewriteCodeFile: %d, %v; want 3", count, err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the file holds %x (%v), want %x", got, err, want)
	}
	broken := module[:len(module)-1]
	if err := os.WriteFile(path, broken, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := wasmbin.RewriteCodeFile(path, dropNops); err == nil {
		t.Fatal("a module cut short was rewritten")
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, broken) {
		t.Fatal("a module that could not be read was changed")
	}
}

// What a body's walk with SkipImmediates cannot read, and a module RewriteCode cannot, is an error
// naming where, never a guess.
func TestRewriteCodeRefusesWhatItCannotRead(t *testing.T) {
	walk := func(body []byte) ([]byte, int, error) {
		r := wasmbin.NewReader(body)
		r.SkipLocals()
		for r.More() {
			r.SkipImmediates(r.Byte())
		}
		return body, 0, r.Err()
	}
	withBody := func(body []byte) []byte {
		return wasmbin.AppendSection([]byte(wasmbin.Header), wasmbin.CodeSection, append([]byte{1, byte(len(body))}, body...))
	}
	tests := []struct {
		name   string
		module []byte
		want   string
	}{
		{"not a module", []byte("\x00elf\x01\x00\x00\x00"), "not a Wasm module"},
		{"a section longer than the module", []byte("\x00asm\x01\x00\x00\x00\x0a\x05\x01"), "section 10 at byte 8: byte 10: 5 bytes announced, 1 left"},
		{"a SIMD instruction", withBody([]byte{0, 0xfd, 0x0c, 0x0b}), "function body 0: byte 1: opcode 0xfd is not one the rewrite knows"},
		{"an unknown prefixed instruction", withBody([]byte{0, 0xfc, 0x20, 0x0b}), "0xfc 32"},
		{"a load of a second memory", withBody([]byte{0, 0x41, 0, 0x28, 0x42, 0, 0, 0x1a, 0x0b}), "another memory"},
		{"an immediate cut short", withBody([]byte{0, 0x44, 1, 2}), "8 bytes announced"},
		{"a block of a vector type", withBody([]byte{0, 0x02, 0x7b, 0x0b, 0x0b}), "byte 2: a block type that is neither"},
		{"a block of a later proposal's reference type", withBody([]byte{0, 0x02, 0x63, 0x70, 0x0b, 0x0b}), "byte 2: a block type that is neither"},
	}
	// The block types it reads: empty, each value type, a type index (0 and 2^32, five bytes).
	valid := withBody([]byte{0, 0x02, 0x40, 0x0b, 0x02, 0x7f, 0x41, 0, 0x0b, 0x1a, 0x02, 0x7c, 0x44, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b, 0x1a,
		0x02, 0x70, 0xd0, 0x70, 0x0b, 0x1a, 0x02, 0x00, 0x0b, 0x02, 0x80, 0x80, 0x80, 0x80, 0x10, 0x0b, 0x0b})
	if _, _, err := wasmbin.RewriteCode(valid, walk); err != nil {
		t.Fatalf("block types: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := wasmbin.RewriteCode(tt.module, walk); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("RewriteCode: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// AppendToVector writes the count again, in its shortest form, and the items after the vector's
// own; a count that does not read, or has no room for them, is an error.
func TestAppendToVector(t *testing.T) {
	many := append(wasmbin.AppendU32(nil, 127), bytes.Repeat([]byte{7}, 127)...)
	tests := []struct {
		name    string
		content []byte
		items   [][]byte
		want    []byte
		err     string
	}{
		{"a section the module lacks", nil, [][]byte{{1}, {2, 3}}, []byte{2, 1, 2, 3}, ""},
		{"an empty vector", []byte{0}, [][]byte{{9}}, []byte{1, 9}, ""},
		{"items after the vector's", []byte{2, 4, 5}, [][]byte{{6}}, []byte{3, 4, 5, 6}, ""},
		{"nothing to add", []byte{1, 4}, nil, []byte{1, 4}, ""},
		{"a count one byte longer", many, [][]byte{{8}}, append(append([]byte{0x80, 1}, many[1:]...), 8), ""},
		{"a count cut short", []byte{0x80}, [][]byte{{1}}, nil, "the vector's count: byte 1: ends early"},
		{"no room", wasmbin.AppendU32(nil, math.MaxUint32), [][]byte{{1}}, nil, "a vector of 4294967295 items has no room for 1 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wasmbin.AppendToVector(tt.content, tt.items...)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("got %x, %v; want the error %q", got, err, tt.err)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("got %x, %v; want %x", got, err, tt.want)
			}
		})
	}
}
