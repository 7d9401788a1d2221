package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/internal/wasmnames"
)

// The module names only its entry points (internal/wasmnames), so Envoy prints the other frames
// of a trap's in-VM backtrace as "unknown(function index:N)" (proxy-wasm-cpp-host,
// src/v8/v8.cc, V8::getFailMessage); backtrace names them from the map `make build` writes.
var unknownFrame = regexp.MustCompile(`unknown\(function index:([0-9]+)\)`)

// wazeroFrame is an unnamed frame of a trap's stack trace in the embedded host (tollgate serve,
// simulate): wazero writes ".$N(" for a function the name section does not name (wazero,
// internal/wasmdebug, FuncName); backtrace names it ".NAME(".
var wazeroFrame = regexp.MustCompile(`\.\$([0-9]+)\(`)

// maxLogLine bounds a line of the log: a line longer is an error, not all the memory there is.
const maxLogLine = 1 << 20

// backtrace copies an Envoy log from stdin to stdout with every unnamed frame named.
func backtrace(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	flags := commandFlags("backtrace", stderr)
	namesPath := flags.String("names", "build/tollgate.wasm.names", "the function name map `FILE` of the module Envoy runs, written by make build beside it")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "tollgate backtrace: unexpected argument %q: the log is read from stdin\n", flags.Arg(0))
		return 2
	}
	names, err := readNames(*namesPath)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate backtrace: %v\n", err)
		return 1
	}

	out := bufio.NewWriter(stdout)
	in := bufio.NewScanner(stdin)
	in.Buffer(make([]byte, 0, 64<<10), maxLogLine)
	in.Split(linesWithEndings)
	resolved, missing := 0, map[string]bool{}
	// resolve replaces an unnamed frame by what named(name, index) makes of it.
	resolve := func(frames *regexp.Regexp, named func(name string, index []byte) []byte) func([]byte) []byte {
		return func(frame []byte) []byte {
			digits := frames.FindSubmatch(frame)[1]
			index, err := strconv.ParseUint(string(digits), 10, 32)
			name, ok := names.Lookup(uint32(index))
			if err != nil || !ok {
				missing[string(digits)] = true
				return frame
			}
			resolved++
			return named(name, digits)
		}
	}
	envoyName := resolve(unknownFrame, func(name string, index []byte) []byte {
		return fmt.Appendf(nil, "%s (function index %s)", name, index)
	})
	wazeroName := resolve(wazeroFrame, func(name string, _ []byte) []byte { return fmt.Appendf(nil, ".%s(", name) })
	for in.Scan() {
		line := unknownFrame.ReplaceAllFunc(in.Bytes(), envoyName)
		out.Write(wazeroFrame.ReplaceAllFunc(line, wazeroName))
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(stderr, "tollgate backtrace: %v\n", err)
		return 1
	}
	if err := in.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("a line of the log is longer than %d bytes", maxLogLine)
		}
		fmt.Fprintf(stderr, "tollgate backtrace: reading the log: %v\n", err)
		return 1
	}
	for _, index := range slices.SortedFunc(maps.Keys(missing), byNumber) {
		fmt.Fprintf(stderr, "tollgate backtrace: %s names no function %s: is it the map of the module Envoy ran?\n", *namesPath, index)
	}
	if resolved == 0 && len(missing) == 0 {
		fmt.Fprintln(stderr, "tollgate backtrace: the log has no unknown(function index:N) frame (Envoy prints them under \"Proxy-Wasm plugin in-VM backtrace:\")")
	}
	return 0
}

// readNames reads a function name map, saying how to get one when it is missing or is none.
func readNames(path string) (wasmnames.Map, error) {
	text, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such file: the function name map is written by make build beside the module (build/tollgate.wasm.names); give the map of the build Envoy runs with --names FILE", path)
	}
	if err != nil {
		return nil, err
	}
	names, err := wasmnames.ParseMap(text)
	if err == nil && len(names) == 0 {
		err = errors.New("it names no function")
	}
	if err != nil {
		return nil, fmt.Errorf("%s is not a function name map: %v (make build writes the map beside the module, as build/tollgate.wasm.names)", path, err)
	}
	return names, nil
}

// linesWithEndings splits a stream into lines that keep their line ending, so that the log is
// copied byte for byte where nothing is named.
func linesWithEndings(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i+1], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// byNumber orders strings of decimal digits by their value.
func byNumber(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}
