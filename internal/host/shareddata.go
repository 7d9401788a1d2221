package host

import "github.com/tollgate-proxy/tollgate/internal/hostcore"

// SharedData is Envoy's shared key-value store with its CAS rules (hostcore.SharedData, shared
// with the native twin of the module's ABI layer). Share one SharedData between Hosts to model
// several plugins in one Envoy process.
type SharedData = hostcore.SharedData

// SharedDataStats counts the store's operations since it was created, over every vm_id.
type SharedDataStats = hostcore.SharedDataStats

// NewSharedData returns an empty store.
func NewSharedData() *SharedData { return hostcore.NewSharedData() }
