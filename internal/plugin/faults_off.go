//go:build !tollgate_faults

package plugin

// faultPoint marks a place where the test build (-tags tollgate_faults, faults_on.go) can force a
// panic. In the product build it does nothing and compiles away.
func faultPoint(string) {}

// faultsBuilt is whether this is the test build that forces panics.
const faultsBuilt = false
