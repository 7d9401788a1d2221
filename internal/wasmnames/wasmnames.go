package wasmnames

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// Name is one function's name: Index is the function's index in the module's function index
// space (its imported functions first, then the ones it defines), the number Envoy prints in
// "unknown(function index:N)".
type Name struct {
	Index uint32
	Name  string
}

// Map is a module's function names, sorted by index, each index at most once.
type Map []Name

// Lookup returns the name of the function at index, if the map names it.
func (m Map) Lookup(index uint32) (string, bool) {
	i := sort.Search(len(m), func(i int) bool { return m[i].Index >= index })
	if i < len(m) && m[i].Index == index {
		return m[i].Name, true
	}
	return "", false
}

// WriteTo writes the map as text, a line per function, "INDEX NAME" with the index in decimal:
// what ParseMap reads.
func (m Map) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	for _, n := range m {
		b.WriteString(strconv.FormatUint(uint64(n.Index), 10))
		b.WriteByte(' ')
		b.WriteString(n.Name)
		b.WriteByte('\n')
	}
	return b.WriteTo(w)
}

// ParseMap reads a map Map.WriteTo wrote. A line that is not "INDEX NAME" with the index in
// decimal as WriteTo writes it, or an index not greater than the line's before, is an error naming
// the line.
func ParseMap(text []byte) (Map, error) {
	var m Map
	for lineNo, line := range strings.SplitAfter(string(text), "\n") {
		if line == "" { // after the final newline
			break
		}
		line, ok := strings.CutSuffix(line, "\n")
		if !ok {
			return nil, fmt.Errorf("line %d: the map ends without a newline (truncated?)", lineNo+1)
		}
		digits, name, ok := strings.Cut(line, " ")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not a function index and a name", lineNo+1, truncate(line))
		}
		index, err := strconv.ParseUint(digits, 10, 32)
		if err != nil || strconv.FormatUint(index, 10) != digits { // as WriteTo writes it: no sign, no leading zero
			return nil, fmt.Errorf("line %d: %q is not a function index", lineNo+1, truncate(digits))
		}
		if len(m) > 0 && uint32(index) <= m[len(m)-1].Index {
			return nil, fmt.Errorf("line %d: function index %d after %d: the indices must increase", lineNo+1, index, m[len(m)-1].Index)
		}
		m = append(m, Name{uint32(index), name})
	}
	return m, nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// FunctionNames returns the function names of a module's name section, all of them.
func FunctionNames(module []byte) (Map, error) {
	p, err := parse(module)
	if err != nil {
		return nil, err
	}
	return p.functions, nil
}

// Split returns the module with its name section reduced to the names of the functions it
// exports, and every name the section had. Nothing else changes: the other sections are copied
// byte for byte, in their order, so every function keeps its index. A module whose name section
// names no exported function is an error: without a name Envoy prints no backtrace at all.
func Split(module []byte) (reduced []byte, names Map, err error) {
	p, err := parse(module)
	if err != nil {
		return nil, nil, err
	}
	var kept Map
	for _, n := range p.functions {
		if p.exported[n.Index] {
			kept = append(kept, n)
		}
	}
	if len(kept) == 0 {
		return nil, nil, fmt.Errorf("the name section names none of the module's %d exported functions: Envoy would print no backtrace", len(p.exported))
	}
	var content []byte
	content = appendName(content, "name")
	if p.moduleName != nil {
		content = appendSubsection(content, 0, p.moduleName)
	}
	var namemap []byte
	namemap = appendU32(namemap, uint32(len(kept)))
	for _, n := range kept {
		namemap = appendU32(namemap, n.Index)
		namemap = appendName(namemap, n.Name)
	}
	content = appendSubsection(content, 1, namemap)

	reduced = make([]byte, 0, len(module)-(p.nameEnd-p.nameStart)+len(content)+6)
	reduced = append(reduced, module[:p.nameStart]...)
	reduced = append(reduced, 0) // a custom section
	reduced = appendU32(reduced, uint32(len(content)))
	reduced = append(reduced, content...)
	reduced = append(reduced, module[p.nameEnd:]...)
	return reduced, p.functions, nil
}

// parsed is what Split reads from a module.
type parsed struct {
	nameStart, nameEnd int // the name section, its id byte to its end
	moduleName         []byte
	functions          Map
	exported           map[uint32]bool
}

const header = "\x00asm\x01\x00\x00\x00"

// Section ids (the core specification's binary format, section 5.5).
const (
	customSection = 0
	exportSection = 7
	exportFunc    = 0 // an export's kind: a function
)

// Subsections of the name section (the specification's appendix, "Name Section").
const (
	moduleNameSubsection   = 0
	functionNameSubsection = 1
)

func parse(module []byte) (*parsed, error) {
	if len(module) < len(header) || string(module[:len(header)]) != header {
		return nil, errors.New("not a Wasm module (version 1): it does not start with \\0asm 01 00 00 00")
	}
	p := &parsed{nameStart: -1, exported: map[uint32]bool{}}
	exports := false
	r := &reader{b: module, off: len(header)}
	for r.off < len(module) {
		start := r.off
		id, s, err := r.section()
		if err != nil {
			return nil, fmt.Errorf("section %d at byte %d: %w", id, start, err)
		}
		switch id {
		case exportSection:
			if exports {
				return nil, fmt.Errorf("a second export section at byte %d", start)
			}
			exports = true
			if err := p.readExports(s); err != nil {
				return nil, fmt.Errorf("export section: %w", err)
			}
		case customSection:
			name, err := s.name()
			if err != nil {
				return nil, fmt.Errorf("custom section at byte %d: %w", start, err)
			}
			if name != "name" {
				continue
			}
			if p.nameStart >= 0 {
				return nil, fmt.Errorf("a second name section at byte %d", start)
			}
			p.nameStart, p.nameEnd = start, r.off
			if err := p.readNames(s); err != nil {
				return nil, fmt.Errorf("name section: %w", err)
			}
		}
	}
	switch {
	case p.nameStart < 0:
		return nil, errors.New("the module has no name section: build it with its names (no -ldflags=-s; wasm-opt -g)")
	case p.functions == nil:
		return nil, errors.New("the module's name section names no function")
	}
	return p, nil
}

func (p *parsed) readExports(r *reader) error {
	return r.vector(func() error {
		kind, index, err := r.export()
		if err == nil && kind == exportFunc {
			p.exported[index] = true
		}
		return err
	})
}

func (p *parsed) readNames(r *reader) error {
	seen := map[byte]bool{}
	for r.off < len(r.b) {
		start := r.off
		id, sub, err := r.section()
		if err != nil {
			return err
		}
		if seen[id] {
			return fmt.Errorf("a second subsection %d at byte %d", id, start)
		}
		seen[id] = true
		content := sub.b[sub.off:]
		switch id {
		case moduleNameSubsection:
			if _, err := sub.name(); err != nil {
				return fmt.Errorf("module name: %w", err)
			}
			if err := sub.end(); err != nil {
				return fmt.Errorf("module name: %w", err)
			}
			p.moduleName = content
		case functionNameSubsection:
			if err := p.readFunctionNames(sub); err != nil {
				return fmt.Errorf("function names: %w", err)
			}
		}
	}
	return nil
}

func (p *parsed) readFunctionNames(r *reader) error {
	p.functions = Map{}
	err := r.vector(func() error {
		index, name, err := r.nameAssoc()
		if err != nil {
			return err
		}
		if strings.ContainsAny(name, "\n\r") {
			return fmt.Errorf("function %d's name %q has a line break, which the map's lines cannot hold", index, truncate(name))
		}
		p.functions = append(p.functions, Name{index, name})
		return nil
	})
	if err != nil {
		return err
	}
	sort.SliceStable(p.functions, func(i, j int) bool { return p.functions[i].Index < p.functions[j].Index })
	for i := 1; i < len(p.functions); i++ {
		if p.functions[i].Index == p.functions[i-1].Index {
			return fmt.Errorf("function %d is named twice", p.functions[i].Index)
		}
	}
	return nil
}

// reader reads the module's bytes up to len(b), from off; errors name the byte offset.
type reader struct {
	b   []byte
	off int
}

func (r *reader) byte() (byte, error) {
	if r.off >= len(r.b) {
		return 0, fmt.Errorf("byte %d: ends early", r.off)
	}
	r.off++
	return r.b[r.off-1], nil
}

// u32 reads an unsigned LEB128 number of at most 32 bits, in at most 5 bytes.
func (r *reader) u32() (uint32, error) {
	start := r.off
	var v uint64
	for shift := 0; shift < 35; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			if v > 1<<32-1 {
				return 0, fmt.Errorf("byte %d: a number beyond 32 bits", start)
			}
			return uint32(v), nil
		}
	}
	return 0, fmt.Errorf("byte %d: a number longer than 5 bytes", start)
}

func (r *reader) bytes(n uint32) ([]byte, error) {
	if uint64(n) > uint64(len(r.b)-r.off) {
		return nil, fmt.Errorf("byte %d: %d bytes announced, %d left", r.off, n, len(r.b)-r.off)
	}
	r.off += int(n)
	return r.b[r.off-int(n) : r.off], nil
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(n)
	return string(b), err
}

// export reads an export (the core specification's binary format, section 5.5.10): its name,
// which is not kept, its kind and its index.
func (r *reader) export() (kind byte, index uint32, err error) {
	if _, err = r.name(); err != nil {
		return 0, 0, err
	}
	if kind, err = r.byte(); err != nil {
		return 0, 0, err
	}
	index, err = r.u32()
	return kind, index, err
}

// nameAssoc reads an entry of a name map (the specification's appendix, "Name Maps"): an index
// and its name.
func (r *reader) nameAssoc() (index uint32, name string, err error) {
	if index, err = r.u32(); err != nil {
		return 0, "", err
	}
	name, err = r.name()
	return index, name, err
}

// section reads a section, or a subsection of the name section, which are laid out alike: an id,
// then the content's size and the content, which comes back as a reader of its own. Callers read
// a section only where a byte is left, so the id's read cannot fail.
func (r *reader) section() (id byte, content *reader, err error) {
	if id, err = r.byte(); err != nil {
		return 0, nil, err
	}
	size, err := r.u32()
	if err != nil {
		return id, nil, err
	}
	start := r.off
	if _, err := r.bytes(size); err != nil {
		return id, nil, err
	}
	return id, &reader{b: r.b[:r.off], off: start}, nil
}

// vector reads a vector of the wasm format that fills the reader: its length, then as many items,
// each read by item, and nothing after them.
func (r *reader) vector(item func() error) error {
	count, err := r.u32()
	if err != nil {
		return err
	}
	for range count {
		if err := item(); err != nil {
			return err
		}
	}
	return r.end()
}

// end checks that the reader read all its bytes: a section or subsection has no trailing bytes.
func (r *reader) end() error {
	if r.off != len(r.b) {
		return fmt.Errorf("byte %d: %d bytes left over", r.off, len(r.b)-r.off)
	}
	return nil
}

// appendU32 appends v as the unsigned LEB128 the wasm format writes numbers in.
func appendU32(b []byte, v uint32) []byte { return binary.AppendUvarint(b, uint64(v)) }

func appendName(b []byte, name string) []byte {
	return append(appendU32(b, uint32(len(name))), name...)
}

func appendSubsection(b []byte, id byte, content []byte) []byte {
	return append(appendU32(append(b, id), uint32(len(content))), content...)
}
