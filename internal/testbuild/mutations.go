package testbuild

import "bytes"

// Mutations are every prefix of module, and module with each of its bytes replaced by a few
// values: malformed modules of every kind a parser of the build's steps meets, the seeds of
// their fuzz targets.
func Mutations(module []byte) [][]byte {
	var all [][]byte
	for i := range module {
		all = append(all, module[:i])
		for _, v := range []byte{0, 0x7f, 0x80, 0xff} {
			changed := bytes.Clone(module)
			changed[i] = v
			all = append(all, changed)
		}
	}
	return all
}
