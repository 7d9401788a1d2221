package wasmnames_test

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/tollgate-proxy/tollgate/internal/testbuild"
	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

func mapOf(fns ...fn) wasmnames.Map {
	var m wasmnames.Map
	for _, f := range fns {
		m = append(m, wasmnames.Name{Index: f.index, Name: f.name})
	}
	return m
}

// The reduced module names its exported function only, the map names them all, and every other
// byte of the module stays as it was: the sections, their order, the module's name.
func TestSplitKeepsTheExportedNamesAndMapsAll(t *testing.T) {
	module := tiny()
	reduced, names, err := wasmnames.Split(module)
	if err != nil {
		t.Fatal(err)
	}
	if want := mapOf(tinyFunctions...); !reflect.DeepEqual(names, want) {
		t.Errorf("map %v, want %v", names, want)
	}
	kept, err := wasmnames.FunctionNames(reduced)
	if err != nil {
		t.Fatal(err)
	}
	if want := mapOf(fn{2, "run"}); !reflect.DeepEqual(kept, want) {
		t.Errorf("the reduced module names %v, want %v", kept, want)
	}
	reducedNames := custom("name", section(0, str("tiny")), section(1, leb(1), leb(2), str("run")))
	if want := tinyModule(reducedNames); !bytes.Equal(reduced, want) {
		t.Errorf("reduced module\n% x\nwant\n% x", reduced, want)
	}
	if reflect.DeepEqual(reduced, module) || len(reduced) >= len(module) {
		t.Error("nothing was cut")
	}
}

// The name section keeps its place among the sections wherever it is, and a module without a
// module name gets none.
func TestSplitKeepsTheNameSectionsPlace(t *testing.T) {
	names := nameSection("", tinyFunctions...)
	reducedNames := custom("name", section(1, leb(1), leb(2), str("run")))
	for at := 0; at <= len(tinySections); at++ {
		parts := [][]byte{[]byte(header)}
		parts = append(parts, tinySections[:at]...)
		want := cat(append(append(append([][]byte{}, parts...), reducedNames), tinySections[at:]...)...)
		module := cat(append(append(parts, names), tinySections[at:]...)...)
		reduced, _, err := wasmnames.Split(module)
		if err != nil {
			t.Fatalf("name section after %d sections: %v", at, err)
		}
		if !bytes.Equal(reduced, want) {
			t.Errorf("name section after %d sections: got\n% x\nwant\n% x", at, reduced, want)
		}
	}
}

// The reduced module is valid: wazero compiles and runs it, reads the exported function's name
// from it, and its trap names the entry point while the map names the frame the module no longer
// does.
func TestReducedModuleRunsAndItsTrapNamesTheEntryPoint(t *testing.T) {
	ctx := context.Background()
	reduced, names, err := wasmnames.Split(tiny())
	if err != nil {
		t.Fatal(err)
	}
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	if _, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().WithFunc(func() {}).Export("note").Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := r.Instantiate(ctx, reduced)
	if err != nil {
		t.Fatalf("the reduced module does not load: %v", err)
	}
	if m.Name() != "tiny" {
		t.Errorf("module name %q, want tiny (kept)", m.Name())
	}
	_, err = m.ExportedFunction("run").Call(ctx)
	if err == nil {
		t.Fatal("run did not trap")
	}
	trace := err.Error()
	if !strings.Contains(trace, "tiny.run(") || strings.Contains(trace, "inner") || !strings.Contains(trace, "tiny.$3(") {
		t.Errorf("trap %q: want run named and function 3 unnamed", trace)
	}
	if name, ok := names.Lookup(3); !ok || name != "inner" {
		t.Errorf("the map names function 3 %q, %v; want inner", name, ok)
	}
}

// Every malformed module is an error that says what is wrong, never a panic.
func TestSplitRejectsMalformedModules(t *testing.T) {
	names := nameSection("tiny", tinyFunctions...)
	for _, tt := range []struct {
		name   string
		module []byte
		want   string
	}{
		{"empty", nil, "not a Wasm module"},
		{"text", []byte("(module)"), "not a Wasm module"},
		{"version 2", []byte("\x00asm\x02\x00\x00\x00"), "not a Wasm module"},
		{"header only", []byte(header), "no name section"},
		{"no name section", withoutNameSection(tiny(), names), "no name section"},
		{"section beyond the end", cat([]byte(header), []byte{1, 10, 0}), "10 bytes announced, 1 left"},
		{"section size cut", cat([]byte(header), []byte{1, 0x80}), "ends early"},
		{"number of 6 bytes", cat([]byte(header), []byte{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0}), "longer than 5 bytes"},
		{"number beyond 32 bits", cat([]byte(header), []byte{1, 0x80, 0x80, 0x80, 0x80, 0x10}), "beyond 32 bits"},
		{"custom section without a name", cat([]byte(header), []byte{0, 0}), "custom section at byte 8"},
		{"name section without function names", tinyModule(custom("name", section(0, str("tiny")))), "names no function"},
		{"no export named", tinyModule(nameSection("tiny", fn{0, "env.note"}, fn{3, "inner"})), "names none of the module's 1 exported functions"},
		{"a name twice", tinyModule(nameSection("tiny", fn{2, "run"}, fn{2, "again"})), "function 2 is named twice"},
		{"a line break in a name", tinyModule(nameSection("tiny", fn{2, "run\nfake"})), "has a line break"},
		{"function names cut", tinyModule(custom("name", section(1, leb(3), leb(2), str("run")))), "ends early"},
		{"function names with bytes left", tinyModule(custom("name", section(1, leb(1), leb(2), str("run"), []byte{9}))), "function names: byte"},
		{"subsection beyond the section", tinyModule(custom("name", []byte{1, 20, 0})), "20 bytes announced"},
		{"two function name subsections", tinyModule(custom("name", section(1, leb(1), leb(2), str("run")), section(1, leb(0)))), "a second subsection 1"},
		{"bad module name", tinyModule(custom("name", section(0, leb(9)), section(1, leb(1), leb(2), str("run")))), "module name"},
		{"two name sections", tinyModule(cat(names, names)), "a second name section"},
		{"two export sections", tinyModule(cat(section(7, leb(0)), names)), "a second export section"},
		{"export cut", cat([]byte(header), section(7, leb(1), str("run"), []byte{0})), "export section: byte"},
		{"export section with bytes left", cat([]byte(header), section(7, leb(0), []byte{0})), "1 bytes left over"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reduced, m, err := wasmnames.Split(tt.module)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if reduced != nil || m != nil {
				t.Errorf("an error with results: %d bytes, %d names", len(reduced), len(m))
			}
		})
	}
}

// Every prefix of a module and every byte of it changed is an error or a module split as the
// properties of the fuzz target say, never a panic.
func TestSplitSurvivesEveryCutAndEveryChangedByte(t *testing.T) {
	for _, m := range testbuild.Mutations(tiny()) {
		checkSplit(t, m)
	}
}

// checkSplit splits a module and, when that succeeds, checks what Split promises: the map is
// the module's names, sorted; the reduced module names only functions it exports, as the map
// does; the module is unchanged but for the name section; splitting the reduced module again
// gives the same module.
func checkSplit(t *testing.T, module []byte) {
	t.Helper()
	reduced, names, err := wasmnames.Split(module)
	if err != nil {
		if reduced != nil || names != nil {
			t.Fatalf("an error with results: %v", err)
		}
		return
	}
	all, err := wasmnames.FunctionNames(module)
	if err != nil || !reflect.DeepEqual(all, names) {
		t.Fatalf("the map %v is not the module's names %v (%v)", names, all, err)
	}
	for i := 1; i < len(names); i++ {
		if names[i].Index <= names[i-1].Index {
			t.Fatalf("the map is not sorted: %v", names)
		}
	}
	kept, err := wasmnames.FunctionNames(reduced)
	if err != nil || len(kept) == 0 {
		t.Fatalf("the reduced module's names: %v, %v", kept, err)
	}
	for _, n := range kept {
		if name, ok := names.Lookup(n.Index); !ok || name != n.Name {
			t.Fatalf("the reduced module names function %d %q, the map %q", n.Index, n.Name, name)
		}
	}
	again, keptAgain, err := wasmnames.Split(reduced)
	if err != nil || !bytes.Equal(again, reduced) || !reflect.DeepEqual(keptAgain, kept) {
		t.Fatalf("splitting the reduced module again: %v", err)
	}
	if len(reduced) > len(module)+6 {
		t.Fatalf("the reduced module (%d bytes) is larger than the module (%d)", len(reduced), len(module))
	}
}

func FuzzSplit(f *testing.F) {
	f.Add(tiny())
	f.Add(tinyModule(nameSection("", tinyFunctions...)))
	f.Fuzz(checkSplit)
}

// The map's text is a line per function, and ParseMap reads back what WriteTo wrote.
func TestMapText(t *testing.T) {
	m := wasmnames.Map{{Index: 0, Name: "env.note"}, {Index: 7, Name: "type:.eq.struct { a int }"}, {Index: 4_000_000_000, Name: ""}}
	var b bytes.Buffer
	if _, err := m.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if want := "0 env.note\n7 type:.eq.struct { a int }\n4000000000 \n"; b.String() != want {
		t.Fatalf("text %q, want %q", b.String(), want)
	}
	back, err := wasmnames.ParseMap(b.Bytes())
	if err != nil || !reflect.DeepEqual(back, m) {
		t.Fatalf("read back %v, %v; want %v", back, err, m)
	}
	if empty, err := wasmnames.ParseMap(nil); err != nil || len(empty) != 0 {
		t.Fatalf("an empty map: %v, %v", empty, err)
	}
}

func TestParseMapRejectsWhatWriteToNeverWrites(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"1 a\n2 b", "line 2: the map ends without a newline"},
		{"1 a\nname\n", `line 2: "name" is not a function index and a name`},
		{"x a\n", `line 1: "x" is not a function index`},
		{"-1 a\n", `"-1" is not a function index`},
		{"+1 a\n", `"+1" is not a function index`},
		{"01 a\n", `"01" is not a function index`},
		{" a\n", `"" is not a function index`},
		{"4294967296 a\n", `"4294967296" is not a function index`},
		{"2 a\n2 b\n", "line 2: function index 2 after 2"},
		{"3 a\n2 b\n", "line 2: function index 2 after 3: the indices must increase"},
		{"\n", "line 1"},
	} {
		if m, err := wasmnames.ParseMap([]byte(tt.text)); err == nil || !strings.Contains(err.Error(), tt.want) || m != nil {
			t.Errorf("%q: got %v, %v; want an error containing %q", tt.text, m, err, tt.want)
		}
	}
}

func FuzzParseMap(f *testing.F) {
	f.Add([]byte("0 env.note\n7 main.main\n"))
	f.Add([]byte("1 a\n1 b\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		m, err := wasmnames.ParseMap(text)
		if err != nil {
			return
		}
		var b bytes.Buffer
		if _, err := m.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), text) {
			t.Fatalf("%q read and written again is %q", text, b.Bytes())
		}
		for _, n := range m {
			if name, ok := m.Lookup(n.Index); !ok || name != n.Name {
				t.Fatalf("Lookup(%d) = %q, %v; want %q", n.Index, name, ok, n.Name)
			}
		}
	})
}

func TestLookup(t *testing.T) {
	m := wasmnames.Map{{Index: 2, Name: "b"}, {Index: 5, Name: "e"}, {Index: 9, Name: "i"}}
	for index, want := range map[uint32]string{0: "", 2: "b", 3: "", 5: "e", 9: "i", 10: ""} {
		if got, ok := m.Lookup(index); got != want || ok != (want != "") {
			t.Errorf("Lookup(%d) = %q, %v; want %q", index, got, ok, want)
		}
	}
}

// functionNames reads every function name of a module as wazero reads it, by index in the
// function index space: the reader the module's other host sees, independent of this package.
func functionNames(t *testing.T, module []byte) map[uint32]string {
	t.Helper()
	names := map[uint32]string{}
	factory := experimental.FunctionListenerFactoryFunc(func(def api.FunctionDefinition) experimental.FunctionListener {
		if def.Name() != "" {
			names[def.Index()] = def.Name()
		}
		return nil
	})
	ctx := experimental.WithFunctionListenerFactory(context.Background(), factory)
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer r.Close(ctx)
	compiled, err := r.CompileModule(ctx, module)
	if err != nil {
		t.Fatal(err)
	}
	for _, def := range compiled.ImportedFunctions() {
		if def.Name() != "" {
			names[def.Index()] = def.Name()
		}
	}
	return names
}

// wazero reads the tiny module's names as FunctionNames does, and the reduced module's as the
// ones of the exported function alone.
func TestWazeroReadsTheNamesAlike(t *testing.T) {
	module := tiny()
	reduced, names, err := wasmnames.Split(module)
	if err != nil {
		t.Fatal(err)
	}
	all := functionNames(t, module)
	if len(all) != len(names) {
		t.Errorf("wazero reads %v, the map is %v", all, names)
	}
	for _, n := range names {
		if all[n.Index] != n.Name {
			t.Errorf("function %d: wazero reads %q, the map says %q", n.Index, all[n.Index], n.Name)
		}
	}
	if kept := functionNames(t, reduced); !reflect.DeepEqual(kept, map[uint32]string{2: "run"}) {
		t.Errorf("wazero reads the reduced module's names as %v, want run alone", kept)
	}
}
