package wasmnames

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
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
	content = wasmbin.AppendName(content, "name")
	if p.moduleName != nil {
		content = wasmbin.AppendSection(content, moduleNameSubsection, p.moduleName)
	}
	var namemap []byte
	namemap = wasmbin.AppendU32(namemap, uint32(len(kept)))
	for _, n := range kept {
		namemap = wasmbin.AppendU32(namemap, n.Index)
		namemap = wasmbin.AppendName(namemap, n.Name)
	}
	content = wasmbin.AppendSection(content, functionNameSubsection, namemap)

	reduced = make([]byte, 0, len(module)-(p.nameEnd-p.nameStart)+len(content)+6)
	reduced = append(reduced, module[:p.nameStart]...)
	reduced = wasmbin.AppendSection(reduced, wasmbin.CustomSection, content)
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

// Subsections of the name section (the specification's appendix, "Name Section").
const (
	moduleNameSubsection   = 0
	functionNameSubsection = 1
)

// exportFunc is an export's kind when it exports a function (the specification's section
// 5.5.10).
const exportFunc = 0

func parse(module []byte) (*parsed, error) {
	sections, err := wasmbin.Sections(module)
	if err != nil {
		return nil, err
	}
	p := &parsed{nameStart: -1, exported: map[uint32]bool{}}
	exports := false
	for sections.More() {
		start := sections.Offset()
		id, s := sections.Section()
		if err := sections.Err(); err != nil {
			return nil, fmt.Errorf("section %d at byte %d: %w", id, start, err)
		}
		switch id {
		case wasmbin.ExportSection:
			if exports {
				return nil, fmt.Errorf("a second export section at byte %d", start)
			}
			exports = true
			if err := p.readExports(s); err != nil {
				return nil, fmt.Errorf("export section: %w", err)
			}
		case wasmbin.CustomSection:
			name := s.Name()
			if err := s.Err(); err != nil {
				return nil, fmt.Errorf("custom section at byte %d: %w", start, err)
			}
			if name != "name" {
				continue
			}
			if p.nameStart >= 0 {
				return nil, fmt.Errorf("a second name section at byte %d", start)
			}
			p.nameStart, p.nameEnd = start, sections.Offset()
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

// readExports reads the export section (the specification's section 5.5.10): each export's
// name, which is not kept, its kind and its index.
func (p *parsed) readExports(r *wasmbin.Reader) error {
	for n := r.U32(); n > 0 && r.Err() == nil; n-- {
		r.Name()
		kind, index := r.Byte(), r.U32()
		if r.Err() == nil && kind == exportFunc {
			p.exported[index] = true
		}
	}
	r.End()
	return r.Err()
}

func (p *parsed) readNames(r *wasmbin.Reader) error {
	seen := map[byte]bool{}
	for r.More() {
		start := r.Offset()
		id, sub := r.Section()
		if err := r.Err(); err != nil {
			return err
		}
		if seen[id] {
			return fmt.Errorf("a second subsection %d at byte %d", id, start)
		}
		seen[id] = true
		switch id {
		case moduleNameSubsection:
			p.moduleName = sub.Left()
			sub.Name()
			sub.End()
			if err := sub.Err(); err != nil {
				return fmt.Errorf("module name: %w", err)
			}
		case functionNameSubsection:
			if err := p.readFunctionNames(sub); err != nil {
				return fmt.Errorf("function names: %w", err)
			}
		}
	}
	return nil
}

// readFunctionNames reads the function names' subsection, a name map (the specification's
// appendix, "Name Maps"): each entry an index and its name.
func (p *parsed) readFunctionNames(r *wasmbin.Reader) error {
	p.functions = Map{}
	for n := r.U32(); n > 0 && r.Err() == nil; n-- {
		index, name := r.U32(), r.Name()
		if r.Err() != nil {
			break
		}
		if strings.ContainsAny(name, "\n\r") {
			return fmt.Errorf("function %d's name %q has a line break, which the map's lines cannot hold", index, truncate(name))
		}
		p.functions = append(p.functions, Name{index, name})
	}
	r.End()
	if err := r.Err(); err != nil {
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
