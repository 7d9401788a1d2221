package main

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The modules and request types BenchmarkAlone runs, in the tables' order, and the modules whose
// compiled code the tables show by function.
var (
	modules      = []string{"tollgate", "direct", "glue", "surface", "floor+clock"}
	requestTypes = []string{"admitted-known", "rejected"}
	byFunction   = []string{"tollgate", "direct"}
)

// The kinds of code a sample can fall in: the indices of a recording's counts, and their names.
const (
	kindModule = iota // the module's own compiled code
	kindWazero        // wazero's other compiled code
	kindHost          // the host's Go code (and the C library's, the vDSO's)
	kindKernel
	kindCount
)

var kinds = [kindCount]string{"module", "wazero", "host", "kernel"}

// profile is a profile's samples: what the command recorded, or read back from its text.
type profile struct {
	started    string // when the profile began (RFC 3339 when the command recorded it)
	cpu        string // the cpu line of go test
	tree       string // the tree profiled (git describe --tags --always --dirty when the command recorded it)
	frequency  int    // samples a second
	short      int    // requests of the shorter recording of each pair
	long       int    // and of the longer
	note       string // anything else the tables' reader must know of how the samples were made
	recordings []*recording
}

// recording is the samples of one module and request type, in one round, at one length.
type recording struct {
	round       int
	requestType string
	module      string
	requests    int
	nsPerOp     string         // BenchmarkAlone's ns/op, as go test printed it
	kinds       [kindCount]int // samples by kind, in the order of kinds
	functions   map[string]int // samples in the module's code, by function name
}

// find is the recording of a round, module, request type and length, or nil.
func (p *profile) find(round int, requestType, module string, requests int) *recording {
	for _, r := range p.recordings {
		if r.round == round && r.requestType == requestType && r.module == module && r.requests == requests {
			return r
		}
	}
	return nil
}

// rounds is the number of rounds in the profile: its highest round number.
func (p *profile) rounds() int {
	n := 0
	for _, r := range p.recordings {
		n = max(n, r.round)
	}
	return n
}

// text is the samples as parseSamples reads them: the profile's settings, then for each
// recording a line of its counts and a line per function, the functions by name.
//
//	profile started 2026-12-03T05:28:00Z
//	profile cpu Oxide Virtual Turin-like Processor
//	profile tree 3a8bf42
//	profile frequency 4000
//	profile requests 200000 1000000
//	counts 1 admitted-known tollgate 200000 ns/op 5312 module 1480 wazero 20 host 3011 kernel 1207
//	function 1 admitted-known tollgate 200000 364 github.com_tollgate_proxy_tollgate_internal_admission.__Gate_.admitLean
func (p *profile) text() []byte {
	var b bytes.Buffer
	b.WriteString("# BenchmarkAlone's samples, by kind and by function: go run ./bench/profile -parse FILE\n")
	b.WriteString("# writes the tables from them.\n")
	fmt.Fprintf(&b, "profile started %s\nprofile cpu %s\nprofile tree %s\nprofile frequency %d\nprofile requests %d %d\n",
		p.started, p.cpu, p.tree, p.frequency, p.short, p.long)
	if p.note != "" {
		fmt.Fprintf(&b, "profile note %s\n", p.note)
	}
	for _, r := range p.recordings {
		id := fmt.Sprintf("%d %s %s %d", r.round, r.requestType, r.module, r.requests)
		fmt.Fprintf(&b, "counts %s ns/op %s", id, r.nsPerOp)
		for i, k := range kinds {
			fmt.Fprintf(&b, " %s %d", k, r.kinds[i])
		}
		b.WriteByte('\n')
		names := make([]string, 0, len(r.functions))
		for name := range r.functions {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			fmt.Fprintf(&b, "function %s %d %s\n", id, r.functions[name], name)
		}
	}
	return b.Bytes()
}

// parseSamples reads what text writes. Anything else is an error naming its line: a line of an
// unknown kind, a number that is not one, a recording of a module, request type or length the
// tables do not know, a function before its recording's counts, a recording or function twice, a
// setting twice or missing.
func parseSamples(text []byte) (*profile, error) {
	p := &profile{}
	settings := map[string]bool{}
	for i, line := range strings.Split(string(text), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := p.parseLine(line, settings); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
	}
	for _, s := range []string{"started", "cpu", "tree", "frequency", "requests"} {
		if !settings[s] {
			return nil, fmt.Errorf(`no "profile %s" line`, s)
		}
	}
	if len(p.recordings) == 0 {
		return nil, fmt.Errorf("no counts lines")
	}
	return p, nil
}

func (p *profile) parseLine(line string, settings map[string]bool) error {
	kind, rest, _ := strings.Cut(line, " ")
	switch kind {
	case "profile":
		name, value, _ := strings.Cut(rest, " ")
		if settings[name] {
			return fmt.Errorf("profile %s twice", name)
		}
		settings[name] = true
		var err error
		switch name {
		case "started":
			p.started = value
		case "cpu":
			p.cpu = value
		case "tree":
			p.tree = value
		case "note":
			p.note = value
		case "frequency":
			if p.frequency, err = positive(value); err != nil {
				return fmt.Errorf("profile frequency: %w", err)
			}
		case "requests":
			if len(p.recordings) > 0 {
				return fmt.Errorf("profile requests after counts lines: the lengths come first")
			}
			short, long, _ := strings.Cut(value, " ")
			if p.short, err = positive(short); err != nil {
				return fmt.Errorf("profile requests: %w", err)
			}
			if p.long, err = positive(long); err != nil {
				return fmt.Errorf("profile requests: %w", err)
			}
			if p.long <= p.short {
				return fmt.Errorf("profile requests %d %d: the longer recording's length must be the second", p.short, p.long)
			}
		default:
			return fmt.Errorf("unknown setting %q", name)
		}
	case "counts":
		f := strings.Fields(rest)
		if len(f) != 6+2*len(kinds) {
			return fmt.Errorf("a counts line is: counts ROUND TYPE MODULE REQUESTS ns/op N module N wazero N host N kernel N")
		}
		r, err := p.parseID(f[:4])
		if err != nil {
			return err
		}
		if p.find(r.round, r.requestType, r.module, r.requests) != nil {
			return fmt.Errorf("counts %s twice", strings.Join(f[:4], " "))
		}
		if f[4] != "ns/op" {
			return fmt.Errorf("%q where ns/op belongs", f[4])
		}
		if _, err := strconv.ParseFloat(f[5], 64); err != nil {
			return fmt.Errorf("ns/op %q is not a number", f[5])
		}
		r.nsPerOp = f[5]
		for i, k := range kinds {
			if f[6+2*i] != k {
				return fmt.Errorf("%q where %s belongs", f[6+2*i], k)
			}
			if r.kinds[i], err = count(f[7+2*i]); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		r.functions = map[string]int{}
		p.recordings = append(p.recordings, r)
	case "function":
		f := strings.SplitN(rest, " ", 6)
		if len(f) != 6 || f[5] == "" {
			return fmt.Errorf("a function line is: function ROUND TYPE MODULE REQUESTS SAMPLES NAME")
		}
		id, err := p.parseID(f[:4])
		if err != nil {
			return err
		}
		r := p.find(id.round, id.requestType, id.module, id.requests)
		if r == nil {
			return fmt.Errorf("function of %s before its counts line", strings.Join(f[:4], " "))
		}
		if _, twice := r.functions[f[5]]; twice {
			return fmt.Errorf("function %s twice in %s", f[5], strings.Join(f[:4], " "))
		}
		if r.functions[f[5]], err = count(f[4]); err != nil {
			return fmt.Errorf("function %s: %w", f[5], err)
		}
	default:
		return fmt.Errorf("unknown line %q: profile, counts or function", kind)
	}
	return nil
}

// parseID reads a recording's ROUND TYPE MODULE REQUESTS, its length one of the profile's two.
func (p *profile) parseID(f []string) (*recording, error) {
	round, err := positive(f[0])
	if err != nil {
		return nil, fmt.Errorf("round: %w", err)
	}
	if !slices.Contains(requestTypes, f[1]) {
		return nil, fmt.Errorf("request type %q: one of %s", f[1], strings.Join(requestTypes, ", "))
	}
	if !slices.Contains(modules, f[2]) {
		return nil, fmt.Errorf("module %q: one of %s", f[2], strings.Join(modules, ", "))
	}
	requests, err := positive(f[3])
	if err != nil {
		return nil, fmt.Errorf("requests: %w", err)
	}
	if p.short == 0 {
		return nil, fmt.Errorf("a recording before the profile requests line: the lengths come first")
	}
	if requests != p.short && requests != p.long {
		return nil, fmt.Errorf("%d requests: the profile's recordings have %d or %d", requests, p.short, p.long)
	}
	return &recording{round: round, requestType: f[1], module: f[2], requests: requests}, nil
}

// positive reads a decimal number of at least 1, as text writes it.
func positive(s string) (int, error) {
	n, err := count(s)
	if err == nil && n < 1 {
		err = fmt.Errorf("%d: at least 1", n)
	}
	return n, err
}

// count reads a decimal number of at least 0, as text writes it (no sign, no leading zero).
func count(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("%q is not a count", s)
	}
	return n, nil
}
