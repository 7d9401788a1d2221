package wasmnames_test

import (
	"bytes"
	"strings"
)

// Hand-made modules: the binary format written out by the tests, independently of the package.

func leb(v uint32) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func str(s string) []byte { return cat(leb(uint32(len(s))), []byte(s)) }

func section(id byte, content ...[]byte) []byte {
	c := cat(content...)
	return cat([]byte{id}, leb(uint32(len(c))), c)
}

func custom(name string, content ...[]byte) []byte {
	return section(0, append([][]byte{str(name)}, content...)...)
}

type fn struct {
	index uint32
	name  string
}

// nameSection is a name section: a module name (when not empty), the function names, and a local
// names subsection naming function 2's first local.
func nameSection(module string, fns ...fn) []byte {
	var subs [][]byte
	if module != "" {
		subs = append(subs, section(0, str(module)))
	}
	entries := [][]byte{leb(uint32(len(fns)))}
	for _, f := range fns {
		entries = append(entries, leb(f.index), str(f.name))
	}
	subs = append(subs, section(1, entries...))
	subs = append(subs, section(2, leb(1), leb(2), leb(1), leb(0), str("x")))
	return custom("name", subs...)
}

const header = "\x00asm\x01\x00\x00\x00"

// tinyFunctions name the tiny module's functions: the import env.note (index 0), then helper,
// run (exported as "run") and inner, which traps; run calls inner.
var tinyFunctions = []fn{{0, "env.note"}, {1, "helper"}, {2, "run"}, {3, "inner"}}

// tinySections are the tiny module's sections but its name section, in their order.
var tinySections = [][]byte{
	section(1, leb(1), []byte{0x60, 0, 0}),                                           // type 0: [] -> []
	section(2, leb(1), str("env"), str("note"), []byte{0}, leb(0)),                   // import env.note
	section(3, leb(3), leb(0), leb(0), leb(0)),                                       // three functions of type 0
	section(5, leb(1), []byte{0}, leb(1)),                                            // a memory of one page
	section(7, leb(2), str("run"), []byte{0}, leb(2), str("mem"), []byte{2}, leb(0)), // run, and a memory
	section(10, leb(3),
		leb(2), []byte{0, 0x0b}, // helper: nothing
		leb(6), []byte{1, 1, 0x7f, 0x10, 3, 0x0b}, // run: one local i32; call inner
		leb(3), []byte{0, 0x00, 0x0b}), // inner: unreachable
	custom("producers", str("anything")),
}

// tinyModule is the tiny module with the given name section placed before its last section.
func tinyModule(names []byte) []byte {
	parts := [][]byte{[]byte(header)}
	parts = append(parts, tinySections[:len(tinySections)-1]...)
	parts = append(parts, names, tinySections[len(tinySections)-1])
	return cat(parts...)
}

func tiny() []byte { return tinyModule(nameSection("tiny", tinyFunctions...)) }

// withoutNameSection is a module with its name section (found by its bytes) cut out.
func withoutNameSection(module, names []byte) []byte {
	i := bytes.Index(module, names)
	if i < 0 || strings.Count(string(module), string(names)) != 1 {
		panic("the name section is not in the module once")
	}
	return cat(module[:i], module[i+len(names):])
}
