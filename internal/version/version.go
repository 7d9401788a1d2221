// Package version holds the version of this build of Tollgate, which the module logs when it
// starts and `tollgate version` prints.
//
// The build sets it: make passes -ldflags "-X github.com/tollgate-proxy/tollgate/internal/version.Version=V"
// with V from `git describe --tags --always --dirty` (the tag on a tagged commit, the tag and the
// commits since it after one, else the abbreviated commit; "-dirty" when the work tree has
// changes). A build without make says "dev". The package has no imports, so the module links it
// at no cost.
package version

// Version is the version of this build. It is a variable, not a constant, so the linker can set it.
var Version = "dev"
