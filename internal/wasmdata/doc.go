// Package wasmdata packs a module's data segments into one compressed passive segment, and adds
// a start function that unpacks it into memory when the module is instantiated.
//
// Go's linker writes the module's read-only data (its function tables, type descriptors,
// strings) as one data segment per run of bytes between runs of at least 8 zeros: about 37,000
// segments, whose headers (offset and size) are nearly a quarter of the section, and most of the
// rest a few kinds of records repeated thousands of times (the function tables' entries, the
// lookup table from code positions to functions, names sharing long prefixes). Pack writes
// the same bytes as one stream of literal runs, copies of earlier bytes and skipped zeros (see
// stream.go): for Tollgate's module, a little under half the section's size.
//
// The start function runs before anything else in the module, Go's runtime included: it copies
// the stream to the end of memory (memory.init), unpacks it from the lowest address a segment
// wrote, zeroes the copy again (that memory is the Go heap's, which starts zeroed) and drops the
// segment (data.drop). After it, memory holds exactly what the segments would have written.
// Its instructions are the bulk memory operations upstream Go's modules already use; the module
// needs nothing its host did not support already.
//
// The parser reads bytes it cannot trust: every length is checked, and what it was not made for
// (a segment that is not active in memory 0 at a constant offset, an existing start function,
// data past the memory, a 4 GiB or an imported memory) is an error, never a guess or a panic.
package wasmdata
