package wasmbin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
)

// Header is the first 8 bytes of a module of the format's version 1: the magic number and the
// version.
const Header = "\x00asm\x01\x00\x00\x00"

// Section ids (the specification's section 5.5.2).
const (
	CustomSection   = 0
	TypeSection     = 1
	ImportSection   = 2
	FunctionSection = 3
	ExportSection   = 7
	CodeSection     = 10
	DataSection     = 11
)

// Opcodes of the instructions the build's tools read or write (the specification's section
// 5.4), named after the instructions.
const (
	OpBlock         = 0x02 // block
	OpLoop          = 0x03 // loop
	OpIf            = 0x04 // if
	OpEnd           = 0x0b // end
	OpBr            = 0x0c // br
	OpBrIf          = 0x0d // br_if
	OpBrTable       = 0x0e // br_table
	OpCall          = 0x10 // call
	OpLocalGet      = 0x20 // local.get
	OpLocalSet      = 0x21 // local.set
	OpLocalTee      = 0x22 // local.tee
	OpGlobalGet     = 0x23 // global.get
	OpI32Load8U     = 0x2d // i32.load8_u
	OpMemorySize    = 0x3f // memory.size
	OpI32Const      = 0x41 // i32.const
	OpI64Const      = 0x42 // i64.const
	OpI32Eqz        = 0x45 // i32.eqz
	OpI32GeU        = 0x4f // i32.ge_u
	OpI64Eqz        = 0x50 // i64.eqz
	OpI32Add        = 0x6a // i32.add
	OpI32Sub        = 0x6b // i32.sub
	OpI32And        = 0x71 // i32.and
	OpI32Or         = 0x72 // i32.or
	OpI32Shl        = 0x74 // i32.shl
	OpI64Add        = 0x7c // i64.add
	OpI32WrapI64    = 0xa7 // i32.wrap_i64
	OpI64ExtendI32S = 0xac // i64.extend_i32_s
	OpI64ExtendI32U = 0xad // i64.extend_i32_u
	OpPrefix        = 0xfc // the prefix of the saturating conversions, bulk memory and table instructions

	// BlockEmpty is the block type of a block, loop or if without parameters or results.
	BlockEmpty = 0x40
	// TypeI32 is the value type i32.
	TypeI32 = 0x7f
)

// Reader reads b from off; an error sticks (Err), and every read after it returns zero.
type Reader struct {
	b   []byte
	off int
	err error
}

// NewReader reads b from its start; errors name offsets in b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Sections checks a module's header and returns a reader of its sections (Section); errors name
// offsets in the module.
func Sections(module []byte) (*Reader, error) {
	if len(module) < len(Header) || string(module[:len(Header)]) != Header {
		return nil, errors.New("not a Wasm module (version 1): it does not start with \\0asm 01 00 00 00")
	}
	return &Reader{b: module, off: len(Header)}, nil
}

// Err is the first error of a read, or nil.
func (r *Reader) Err() error { return r.err }

// Offset is where the next read starts.
func (r *Reader) Offset() int { return r.off }

// More reports whether there are bytes left to read and no read has failed.
func (r *Reader) More() bool { return r.err == nil && r.off < len(r.b) }

// Fail makes what, at the current offset, the reader's error (unless it has one already), and
// leaves nothing to read.
func (r *Reader) Fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("byte %d: %s", r.off, what)
	}
	r.off = len(r.b)
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.off >= len(r.b) {
		r.Fail("ends early")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

// Unread steps back over the byte just read, so that an error names it.
func (r *Reader) Unread() {
	if r.err == nil && r.off > 0 {
		r.off--
	}
}

// LEB reads a LEB128 number of at most bits bits, returning its bits as read and the shift past
// its last byte (for sign extension); the format caps its length at ceil(bits/7) bytes.
func (r *Reader) LEB(bits int) (v uint64, shift int, last byte) {
	start := r.off
	for shift < bits {
		c := r.Byte()
		if r.err != nil {
			return 0, 0, 0
		}
		v |= uint64(c&0x7f) << shift
		shift += 7
		if c < 0x80 {
			return v, shift, c
		}
	}
	return r.failAt(start, fmt.Sprintf("a number longer than %d bytes", (bits+6)/7)), 0, 0
}

// U32 reads an unsigned LEB128 number of at most 32 bits.
func (r *Reader) U32() uint32 {
	start := r.off
	v, _, _ := r.LEB(32)
	if v > 1<<32-1 {
		return uint32(r.failAt(start, "a number beyond 32 bits"))
	}
	return uint32(v)
}

// S32 reads a signed LEB128 number of at most 32 bits (an i32.const's immediate).
func (r *Reader) S32() int32 {
	start := r.off
	v := signExtend(r.LEB(32))
	if int64(v) != int64(int32(v)) {
		return int32(r.failAt(start, "a number beyond 32 bits"))
	}
	return int32(v)
}

// S64 reads a signed LEB128 number of at most 64 bits (an i64.const's immediate).
func (r *Reader) S64() int64 {
	start := r.off
	v, shift, last := r.LEB(64)
	// A tenth byte holds the 64th bit only: the rest of it must repeat the sign.
	if shift == 70 && last != 0 && last != 0x7f {
		return int64(r.failAt(start, "a number beyond 64 bits"))
	}
	return int64(signExtend(v, shift, last))
}

// signExtend extends a signed LEB128 number's bits, as LEB read them, from its last byte's sign.
func signExtend(v uint64, shift int, last byte) uint64 {
	if shift < 64 && last&0x40 != 0 {
		v |= ^uint64(0) << shift
	}
	return v
}

// failAt fails the read of a number that starts at start, naming that byte, and returns 0.
func (r *Reader) failAt(start int, what string) uint64 {
	r.off = start
	r.Fail(what)
	return 0
}

// Bytes reads n bytes, a slice of the reader's own.
func (r *Reader) Bytes(n uint32) []byte {
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.Fail(fmt.Sprintf("%d bytes announced, %d left", n, len(r.b)-r.off))
		return nil
	}
	r.off += int(n)
	return r.b[r.off-int(n) : r.off : r.off] // appending to it cannot write over what follows
}

// Left returns the bytes not read yet, without reading them.
func (r *Reader) Left() []byte { return r.b[r.off:len(r.b):len(r.b)] }

// Name reads a name: its length, then its bytes.
func (r *Reader) Name() string { return string(r.Bytes(r.U32())) }

// The kinds of import (the specification's section 5.5.5), the indices of ImportKinds' counts.
const (
	ImportFunction byte = iota
	ImportTable
	ImportMemory
	ImportGlobal
)

// readImport reads an import (the specification's section 5.5.5): its module's and its own name,
// which are not kept, then its description. It returns the import's kind (ImportFunction, ...).
func (r *Reader) readImport() (kind byte) {
	r.Name()
	r.Name()
	switch kind = r.Byte(); kind {
	case ImportFunction: // its type
		r.U32()
	case ImportTable: // its element type and limits
		r.Byte()
		r.Limits()
	case ImportMemory:
		r.Limits()
	case ImportGlobal: // its type and mutability
		r.Byte()
		r.Byte()
	default:
		r.Unread()
		r.Fail("an import of an unknown kind")
	}
	return kind
}

// ImportKinds reads an import section's content to its end and counts its imports by kind
// (ImportFunction, ...).
func (r *Reader) ImportKinds() (counts [4]uint32) {
	for n := r.U32(); n > 0 && r.Err() == nil; n-- {
		if kind := r.readImport(); r.Err() == nil { // a kind readImport knows, or it failed
			counts[kind]++
		}
	}
	r.End()
	return counts
}

// Limits reads a table's or memory's limits: flags (bit 0: a maximum follows), minimum, maximum.
func (r *Reader) Limits() (flags byte, minimum, maximum uint32) {
	flags = r.Byte()
	minimum = r.U32()
	if flags&1 != 0 {
		maximum = r.U32()
	}
	return flags, minimum, maximum
}

// FollowedBy reports whether the next bytes are want, and if so reads past them.
func (r *Reader) FollowedBy(want ...byte) bool {
	if r.err != nil || len(r.b)-r.off < len(want) || string(r.b[r.off:r.off+len(want)]) != string(want) {
		return false
	}
	r.off += len(want)
	return true
}

// Section reads a section, or a subsection of the name section, which are laid out alike: an id,
// then the content's size and the content, which comes back as a reader of its own whose errors
// name offsets in the whole. On an error, content reads nothing.
func (r *Reader) Section() (id byte, content *Reader) {
	id = r.Byte()
	size := r.U32()
	start := r.off
	r.Bytes(size)
	if r.err != nil {
		return id, &Reader{err: r.err}
	}
	return id, &Reader{b: r.b[:r.off], off: start}
}

// End checks that every byte was read: a section, a subsection or a function body has no
// trailing bytes.
func (r *Reader) End() {
	if r.err == nil && r.off != len(r.b) {
		r.Fail(fmt.Sprintf("%d bytes left over", len(r.b)-r.off))
	}
}

// SkipLocals reads a function body's local declarations (counted groups of one type each), which
// come before its instructions.
func (r *Reader) SkipLocals() {
	for groups := r.U32(); groups > 0 && r.err == nil; groups-- {
		r.U32()
		r.Byte()
	}
}

// Alignment reads a load's or store's alignment, which comes before its offset. One that
// announces a memory index (bit 6, multiple memories) is refused: Go uses one memory.
func (r *Reader) Alignment() uint32 {
	align := r.U32()
	if align >= 64 {
		r.Unread()
		r.Fail("a load or store of another memory than the first")
	}
	return align
}

// SkipImmediates reads the immediates of the instruction op starts, for a rewrite that copies them
// as they are (https://webassembly.github.io/spec/core/binary/instructions.html). It knows what
// upstream Go emits: the MVP, sign extension, saturating conversions and bulk memory; any other
// instruction is an error.
func (r *Reader) SkipImmediates(op byte) {
	switch {
	case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, op >= 0x45 && op <= 0xc4:
		// No immediates: unreachable, nop, else, end, return, drop, select, numeric instructions.
	case op >= OpBlock && op <= OpIf: // a block type
		r.blockType()
	case op == OpBr, op == OpBrIf, op == OpCall, op >= 0x20 && op <= 0x26, op == 0xd2:
		// br, br_if, call, local and global get/set/tee, table.get/set, ref.func: an index
		r.U32()
	case op == OpBrTable: // the labels, then the default
		for n := r.U32(); n > 0 && r.err == nil; n-- {
			r.U32()
		}
		r.U32()
	case op == 0x11: // call_indirect: type and table
		r.U32()
		r.U32()
	case op == 0x1c: // select with types
		r.Bytes(r.U32())
	case op >= 0x28 && op <= 0x3e: // loads and stores: alignment and offset
		r.Alignment()
		r.U32()
	case op == 0x3f, op == 0x40, op == 0xd0: // memory.size, memory.grow, ref.null
		r.Byte()
	case op == OpI32Const:
		r.S32()
	case op == OpI64Const:
		r.S64()
	case op == 0x43:
		r.Bytes(4)
	case op == 0x44:
		r.Bytes(8)
	case op == 0xd1: // ref.is_null
	case op == OpPrefix:
		r.skipPrefixed()
	default:
		r.Unread()
		r.Fail(fmt.Sprintf("opcode 0x%02x is not one the rewrite knows", op))
	}
}

// blockType reads a block type: empty, one value type (i32, i64, f32, f64, funcref or externref),
// or the index of a function type, a non-negative signed 33-bit number. Anything else (a vector
// type, a type of a later proposal) is an error.
func (r *Reader) blockType() {
	switch t := r.Byte(); t {
	case BlockEmpty, TypeI32, 0x7e, 0x7d, 0x7c, 0x70, 0x6f:
	default:
		r.Unread()
		start := r.off
		if int64(signExtend(r.LEB(33))) < 0 {
			r.failAt(start, "a block type that is neither a value type nor a type index")
		}
	}
}

// skipPrefixed reads a 0xfc instruction: the saturating conversions, bulk memory and the table
// instructions.
func (r *Reader) skipPrefixed() {
	switch sub := r.U32(); {
	case sub <= 7: // saturating conversions
	case sub == 8: // memory.init: a data segment, then memory 0
		r.U32()
		r.Byte()
	case sub == 9, sub == 13, sub >= 15 && sub <= 17: // data.drop, elem.drop, table.grow/size/fill
		r.U32()
	case sub == 10: // memory.copy: two memories
		r.Byte()
		r.Byte()
	case sub == 11: // memory.fill
		r.Byte()
	case sub == 12, sub == 14: // table.init, table.copy
		r.U32()
		r.U32()
	default:
		r.Fail(fmt.Sprintf("prefixed opcode 0xfc %d is not one the rewrite knows", sub))
	}
}

// RewriteCode returns module with each function body of its code section replaced by what
// rewrite makes of it, and the sum of the counts rewrite returns. The other sections are copied
// as they are (each section's size written again in its shortest form, where Go's linker pads it
// to five bytes), and function indices never change, so a name section and a name map made from
// it still hold. An error names the section and the body.
func RewriteCode(module []byte, rewrite func(body []byte) ([]byte, int, error)) ([]byte, int, error) {
	sections, err := Sections(module)
	if err != nil {
		return nil, 0, err
	}
	out := []byte(Header)
	total := 0
	for sections.More() {
		start := sections.Offset()
		id, s := sections.Section()
		if err := sections.Err(); err != nil {
			return nil, 0, fmt.Errorf("section %d at byte %d: %v", id, start, err)
		}
		content := s.Left()
		if id == CodeSection {
			if content, total, err = RewriteBodies(s, rewrite); err != nil {
				return nil, 0, fmt.Errorf("code section at byte %d: %v", start, err)
			}
		}
		out = AppendSection(out, id, content)
	}
	return out, total, nil
}

// RewriteCodeFile is RewriteCode on the module in the file at path, in place (RewriteFile): it
// returns the sum of rewrite's counts, and leaves a module it cannot read as it is.
func RewriteCodeFile(path string, rewrite func(body []byte) ([]byte, int, error)) (int, error) {
	total := 0
	err := RewriteFile(path, func(module []byte) ([]byte, error) {
		rewritten, n, err := RewriteCode(module, rewrite)
		total = n
		return rewritten, err
	})
	return total, err
}

// RewriteBodies is RewriteCode's work on one code section: the section's content, which r
// reads, with each function body replaced by what rewrite makes of it, and the sum of rewrite's
// counts.
func RewriteBodies(r *Reader, rewrite func(body []byte) ([]byte, int, error)) ([]byte, int, error) {
	count := r.U32()
	out := AppendU32(nil, count)
	total := 0
	for i := uint32(0); i < count && r.err == nil; i++ {
		body := r.Bytes(r.U32())
		if r.err != nil {
			break
		}
		rewritten, n, err := rewrite(body)
		if err != nil {
			return nil, 0, fmt.Errorf("function body %d: %v", i, err)
		}
		out = AppendBody(out, rewritten)
		total += n
	}
	r.End()
	return out, total, r.err
}

// AppendU32 appends v as an unsigned LEB128 number, in its shortest form.
func AppendU32(b []byte, v uint32) []byte { return binary.AppendUvarint(b, uint64(v)) }

// AppendS32 appends v as a signed LEB128 number (an i32.const's immediate), in its shortest form.
func AppendS32(b []byte, v int32) []byte { return AppendS64(b, int64(v)) }

// AppendS64 appends v as a signed LEB128 number (an i64.const's immediate), in its shortest form.
func AppendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// AppendName appends a name: its length, then its bytes.
func AppendName(b []byte, name string) []byte {
	return append(AppendU32(b, uint32(len(name))), name...)
}

// AppendBody appends a code section's entry: the function body's size, then the body.
func AppendBody(b []byte, body []byte) []byte {
	return append(AppendU32(b, uint32(len(body))), body...)
}

// AppendSection appends a section, or a subsection of the name section: its id, the content's
// size in its shortest form, and the content.
func AppendSection(b []byte, id byte, content []byte) []byte {
	return append(AppendU32(append(b, id), uint32(len(content))), content...)
}

// AppendToVector returns a vector's content (its count, then its items: a type, function or code
// section's content) with items added after its last, as they are. Empty content is an empty
// vector, the content of a section the module lacks. An error says the count does not read, or
// has no room for the items.
func AppendToVector(content []byte, items ...[]byte) ([]byte, error) {
	var count uint32
	var rest []byte
	if len(content) > 0 {
		r := NewReader(content)
		count = r.U32()
		if r.Err() != nil {
			return nil, fmt.Errorf("the vector's count: %v", r.Err())
		}
		rest = r.Left()
	}
	if uint64(count)+uint64(len(items)) > math.MaxUint32 {
		return nil, fmt.Errorf("a vector of %d items has no room for %d more", count, len(items))
	}
	out := append(AppendU32(nil, count+uint32(len(items))), rest...)
	for _, item := range items {
		out = append(out, item...)
	}
	return out, nil
}

// SectionSize is the length of a section with content, as AppendSection writes it.
func SectionSize(content []byte) int {
	var size [5]byte
	return 1 + len(AppendU32(size[:0], uint32(len(content)))) + len(content)
}

// RewriteFile replaces the module in the file at path with what rewrite makes of it
// (ReplaceFile). A module rewrite refuses is left as it is, and its error names the file.
func RewriteFile(path string, rewrite func(module []byte) ([]byte, error)) error {
	module, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	rewritten, err := rewrite(module)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return ReplaceFile(path, rewritten)
}

// RewriteModules is the command-line loop of a build step that rewrites modules in place: it
// runs step on each path, prints the line step reports for it or, prefixed with tool, its error,
// and returns the exit status: 2 with no path (after the usage line), 1 if any step failed, else 0.
func RewriteModules(tool string, paths []string, step func(path string) (string, error)) int {
	if len(paths) == 0 {
		fmt.Fprintln(os.Stderr, "usage:", tool, "MODULE... (rewrites each MODULE in place)")
		return 2
	}
	status := 0
	for _, path := range paths {
		report, err := step(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, tool+":", err)
			status = 1
			continue
		}
		fmt.Println(report)
	}
	return status
}

// ReplaceFile writes data to the file at path whole: readers see the old file or the new one,
// never a part. A file already there keeps its mode; a new one is made readable by all.
func ReplaceFile(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
	}
	if err := os.WriteFile(path+".tmp", data, mode); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}
