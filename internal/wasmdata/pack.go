package wasmdata

import (
	"errors"
	"fmt"

	"github.com/tollgate-proxy/tollgate/internal/wasmbin"
)

// Section ids this package reads or writes besides wasmbin's (the specification's section
// 5.5.2), and their order in a module (5.5.16): each section comes after those before it here.
const (
	memorySection    = 5
	startSection     = 8
	dataCountSection = 12
)

var sectionOrder = map[byte]int{wasmbin.TypeSection: 1, wasmbin.ImportSection: 2, wasmbin.FunctionSection: 3, 4: 4, memorySection: 5, 6: 6,
	wasmbin.ExportSection: 7, startSection: 8, 9: 9, dataCountSection: 10, wasmbin.CodeSection: 11, wasmbin.DataSection: 12}

// UnpackName is the name the unpacking function gets in the module's name section, which
// `tollgate backtrace` prints for its frames.
const UnpackName = "wasmdata.unpack"

// Stats are what Pack did: the data segments it found, the size of the data section before and
// after, and of the memory the segments fill.
type Stats struct {
	Segments             int
	Before, After, Image int
}

// Pack returns the module with its data segments packed into one passive segment, compressed,
// and a start function that unpacks it into memory when the module is instantiated; nothing else
// changes, and every function keeps its index. A module without data segments comes back as it
// is, and so does one whose segments write nothing. Pack refuses what it was not made for: a
// segment that is not active in memory 0 at a constant offset, a start function already there,
// data past the memory's initial size, a memory of 4 GiB, or a memory the module imports. It does
// not read the code: a module whose code uses its data segments (memory.init, data.drop; Go's
// does not) would be invalid once packed, which its instantiation then says.
func Pack(module []byte) ([]byte, Stats, error) {
	m, err := parse(module)
	if err != nil {
		return nil, Stats{}, err
	}
	data, ok := m.sections[wasmbin.DataSection]
	if !ok {
		return module, Stats{}, nil
	}
	if _, ok := m.sections[startSection]; ok {
		return nil, Stats{}, errors.New("the module has a start function already")
	}
	written, limit, segments, err := readSegments(data)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("data section: %v", err)
	}
	memory, err := m.readMemory()
	if err != nil {
		return nil, Stats{}, err
	}
	// Segments past the memory's initial size: instantiation refuses them, where the packed
	// module's start function would trap instead.
	if limit > uint64(memory.minimum)*pageSize {
		return nil, Stats{}, fmt.Errorf("the data segments end at byte %d, past the memory's initial size (%d pages of 64 KiB): instantiation would fail", limit, memory.minimum)
	}
	if len(written) == 0 {
		return module, Stats{}, nil
	}
	image, base, err := memoryImage(written)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("data section: %v", err)
	}
	stream := compress(image)
	if back, err := expand(stream, len(image)); err != nil || string(back) != string(image) {
		return nil, Stats{}, errors.New("the packed data does not unpack to the segments' bytes")
	}
	memorySectionContent, err := scratchMemory(memory, base+uint64(len(image)), uint64(len(stream)))
	if err != nil {
		return nil, Stats{}, err
	}

	// The unpacker: one function more, after the module's own (parse checked the counts read and
	// leave room for it).
	function := m.importedFunctions + m.definedFunctions
	functions, err := wasmbin.AppendToVector(m.sections[wasmbin.FunctionSection], wasmbin.AppendU32(nil, m.unpackType))
	if err != nil {
		return nil, Stats{}, fmt.Errorf("function section: %v", err)
	}
	body := unpackBody(uint32(base), uint32(len(stream)))
	code, err := wasmbin.AppendToVector(m.sections[wasmbin.CodeSection], wasmbin.AppendBody(nil, body))
	if err != nil {
		return nil, Stats{}, fmt.Errorf("code section: %v", err)
	}
	replaced := map[byte][]byte{
		wasmbin.TypeSection:     m.types,
		wasmbin.FunctionSection: functions,
		memorySection:           memorySectionContent,
		startSection:            wasmbin.AppendU32(nil, function),
		dataCountSection:        wasmbin.AppendU32(nil, 1),
		wasmbin.CodeSection:     code,
		wasmbin.DataSection:     passiveSegment(stream),
	}
	// The sections the module lacks go before the first one that comes after them.
	var missing []byte
	for _, id := range []byte{wasmbin.TypeSection, wasmbin.FunctionSection, startSection, dataCountSection, wasmbin.CodeSection} {
		if _, ok := m.sections[id]; !ok {
			missing = append(missing, id)
		}
	}
	out := []byte(wasmbin.Header)
	for _, s := range m.order {
		if s.id == wasmbin.CustomSection {
			content := s.content
			if s.name == "name" {
				content = withFunctionName(content, function, UnpackName)
			}
			out = wasmbin.AppendSection(out, s.id, content)
			continue
		}
		for len(missing) > 0 && sectionOrder[missing[0]] < sectionOrder[s.id] {
			out = wasmbin.AppendSection(out, missing[0], replaced[missing[0]])
			missing = missing[1:]
		}
		content, ok := replaced[s.id]
		if !ok {
			content = s.content
		}
		out = wasmbin.AppendSection(out, s.id, content)
	}
	return out, Stats{Segments: segments, Before: m.dataSize, After: wasmbin.SectionSize(replaced[wasmbin.DataSection]),
		Image: len(image)}, nil
}

// PackFile packs the module in the file at path, in place (wasmbin.RewriteFile). A module it
// cannot pack is left as it is.
func PackFile(path string) (Stats, error) {
	var stats Stats
	err := wasmbin.RewriteFile(path, func(module []byte) ([]byte, error) {
		packed, s, err := Pack(module)
		stats = s
		return packed, err
	})
	return stats, err
}

// module is what Pack reads of a module.
type module struct {
	order    []section
	sections map[byte][]byte // the content of each section but the custom ones, by id

	types             []byte // the type section's content, with the unpacker's type added if it was missing
	unpackType        uint32
	importedFunctions uint32
	definedFunctions  uint32
	dataSize          int // the data section's size, its id and size included
}

type section struct {
	id      byte
	name    string // a custom section's
	content []byte
}

func parse(b []byte) (*module, error) {
	sections, err := wasmbin.Sections(b)
	if err != nil {
		return nil, err
	}
	m := &module{sections: map[byte][]byte{}}
	var unknown error // refused only in a module with data to pack
	for sections.More() {
		start := sections.Offset()
		id, r := sections.Section()
		if err := sections.Err(); err != nil {
			return nil, fmt.Errorf("section %d at byte %d: %v", id, start, err)
		}
		s := section{id: id, content: r.Left()}
		if id == wasmbin.CustomSection {
			s.name = r.Name()
		} else {
			if _, known := sectionOrder[id]; !known && unknown == nil {
				unknown = fmt.Errorf("section %d at byte %d: a section this packer does not know", id, start)
			}
			if m.sections[id] != nil {
				return nil, fmt.Errorf("a second section %d at byte %d", id, start)
			}
			m.sections[id] = s.content
		}
		if id == wasmbin.DataSection {
			m.dataSize = sections.Offset() - start
		}
		m.order = append(m.order, s)
	}
	if _, ok := m.sections[wasmbin.DataSection]; !ok {
		return m, nil
	}
	if unknown != nil {
		return nil, unknown
	}
	if err := m.readTypes(); err != nil {
		return nil, fmt.Errorf("type section: %v", err)
	}
	if err := m.readImports(); err != nil {
		return nil, fmt.Errorf("import section: %v", err)
	}
	functions, err := vectorLength(m.sections[wasmbin.FunctionSection])
	if err != nil {
		return nil, fmt.Errorf("function section: %v", err)
	}
	bodies, err := vectorLength(m.sections[wasmbin.CodeSection])
	switch {
	case err != nil:
		return nil, fmt.Errorf("code section: %v", err)
	case bodies != functions:
		return nil, fmt.Errorf("%d functions and %d function bodies", functions, bodies)
	case uint64(m.importedFunctions)+uint64(functions) >= 1<<32-1:
		return nil, errors.New("no function index is left for the unpacker")
	}
	m.definedFunctions = functions
	if _, ok := m.sections[memorySection]; !ok {
		return nil, errors.New("the module has data segments and no memory of its own")
	}
	return m, nil
}

// readTypes finds the type of a function without parameters or results, the unpacker's, and
// adds it where the module has none.
func (m *module) readTypes() error {
	content, ok := m.sections[wasmbin.TypeSection]
	if !ok {
		m.types, m.unpackType = []byte{1, 0x60, 0, 0}, 0
		return nil
	}
	r := wasmbin.NewReader(content)
	count := r.U32()
	for i := uint32(0); i < count && r.Err() == nil; i++ {
		if r.FollowedBy(0x60, 0, 0) {
			m.types, m.unpackType = content, i
			return nil
		}
		if r.Byte() != 0x60 {
			r.Unread()
			r.Fail("not a function type")
		}
		for range 2 { // parameters, results: a value type a byte
			r.Bytes(r.U32())
		}
	}
	r.End()
	err := r.Err()
	if err != nil {
		return err
	}
	m.unpackType = count
	m.types, err = wasmbin.AppendToVector(content, []byte{0x60, 0, 0})
	return err
}

// readImports counts the functions the module imports, which come first in the function index
// space, and refuses an imported memory, whose size the packer cannot know.
func (m *module) readImports() error {
	content := m.sections[wasmbin.ImportSection]
	if len(content) == 0 {
		return nil
	}
	r := wasmbin.NewReader(content)
	kinds := r.ImportKinds()
	if err := r.Err(); err != nil {
		return err
	}
	if kinds[wasmbin.ImportMemory] > 0 {
		return errors.New("the module imports its memory")
	}
	m.importedFunctions = kinds[wasmbin.ImportFunction]
	return nil
}

// memoryLimits are the module's memory's limits: their kind (1: with a maximum), and its initial
// and maximum sizes in pages.
type memoryLimits struct {
	flags            byte
	minimum, maximum uint32
}

// readMemory reads the memory section: the module's one memory.
func (m *module) readMemory() (memoryLimits, error) {
	r := wasmbin.NewReader(m.sections[memorySection])
	if n := r.U32(); n != 1 && r.Err() == nil {
		return memoryLimits{}, fmt.Errorf("memory section: %d memories, where the packer writes into one", n)
	}
	var l memoryLimits
	l.flags, l.minimum, l.maximum = r.Limits()
	r.End()
	if err := r.Err(); err != nil {
		return memoryLimits{}, fmt.Errorf("memory section: %v", err)
	}
	if l.flags > 1 {
		return memoryLimits{}, fmt.Errorf("memory section: limits of kind %d, where the packer knows 0 and 1", l.flags)
	}
	return l, nil
}

// scratchMemory is the memory section's content with an initial size that leaves room for the
// packed stream between the end of the data and the end of the memory: the unpacker copies the
// stream there (memory.init), unpacks it below, and zeroes the room again, which Go's runtime
// takes for its heap. The unpacker computes in 32 bits, so the memory stays under 4 GiB.
func scratchMemory(l memoryLimits, dataEnd, streamLen uint64) ([]byte, error) {
	need := max(uint64(l.minimum), (dataEnd+streamLen+pageSize-1)/pageSize)
	switch {
	case need >= maxPages:
		return nil, fmt.Errorf("memory section: the unpacker needs %d pages, and works below 4 GiB (%d pages)", need, maxPages)
	case l.flags == 1 && uint64(l.maximum) < need:
		return nil, fmt.Errorf("memory section: at most %d pages, and the unpacker needs %d", l.maximum, need)
	}
	out := append(wasmbin.AppendU32(nil, 1), l.flags)
	out = wasmbin.AppendU32(out, uint32(need))
	if l.flags == 1 {
		out = wasmbin.AppendU32(out, l.maximum)
	}
	return out, nil
}

const (
	pageSize = 65536
	maxPages = 65536 // 4 GiB, all a 32-bit memory has
)

// vectorLength is the count a vector's content starts with: 0 for a section the module lacks.
func vectorLength(content []byte) (uint32, error) {
	if content == nil {
		return 0, nil
	}
	r := wasmbin.NewReader(content)
	n := r.U32()
	return n, r.Err()
}

// activeSegment is a data segment that instantiation writes: bytes at an address.
type activeSegment struct {
	at    uint64
	bytes []byte
}

// readSegments reads the data section's segments, those that write bytes, and limit, the highest
// end of any segment, an empty one's included: the memory instantiation needs.
func readSegments(content []byte) (all []activeSegment, limit uint64, segments int, err error) {
	r := wasmbin.NewReader(content)
	for n := r.U32(); n > 0 && r.Err() == nil; n-- {
		if flags := r.Byte(); flags != 0 {
			r.Unread()
			r.Fail(fmt.Sprintf("segment %d is not an active segment of memory 0 (flags %d)", segments, flags))
			break
		}
		if !r.FollowedBy(0x41) { // i32.const
			r.Fail(fmt.Sprintf("segment %d's offset is not a constant", segments))
			break
		}
		// In 64 bits: a segment may end at 4 GiB, which 32 bits would wrap to 0.
		at := uint64(uint32(r.S32()))
		if !r.FollowedBy(0x0b) { // end
			r.Fail(fmt.Sprintf("segment %d's offset is not a constant", segments))
			break
		}
		b := r.Bytes(r.U32())
		if r.Err() != nil {
			break
		}
		segments++
		limit = max(limit, at+uint64(len(b)))
		if len(b) > 0 {
			all = append(all, activeSegment{at, b})
		}
	}
	r.End()
	return all, limit, segments, r.Err()
}

// memoryImage is the memory the segments fill, from base, the lowest address any of them writes,
// to the end of the highest: later segments overwrite earlier ones, as instantiation writes them
// in order.
func memoryImage(all []activeSegment) (image []byte, base uint64, err error) {
	base, end := uint64(1)<<32, uint64(0)
	for _, s := range all {
		base, end = min(base, s.at), max(end, s.at+uint64(len(s.bytes)))
	}
	if end-base > 1<<30 {
		return nil, 0, fmt.Errorf("the segments span %d bytes, more than the packer unpacks", end-base)
	}
	image = make([]byte, end-base)
	for _, s := range all {
		copy(image[s.at-base:], s.bytes)
	}
	return image, base, nil
}

func passiveSegment(stream []byte) []byte {
	out := append(wasmbin.AppendU32(nil, 1), 1) // one segment, passive
	out = wasmbin.AppendU32(out, uint32(len(stream)))
	return append(out, stream...)
}

// withFunctionName returns a name section's content with name given to function index, the
// highest, at the end of the function names' subsection, which is sorted by index.
func withFunctionName(content []byte, index uint32, name string) []byte {
	r := wasmbin.NewReader(content)
	r.Name()
	out := append([]byte(nil), content[:r.Offset()]...)
	for r.More() {
		start := r.Offset()
		id, sub := r.Section()
		if r.Err() != nil {
			return content // not a name section this packer can read: left as it is
		}
		if id != 1 {
			out = append(out, content[start:r.Offset()]...)
			continue
		}
		count := sub.U32()
		names := append(wasmbin.AppendU32(nil, count+1), sub.Left()...)
		names = wasmbin.AppendName(wasmbin.AppendU32(names, index), name)
		out = wasmbin.AppendSection(out, id, names)
	}
	return out
}
