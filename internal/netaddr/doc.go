// Package netaddr parses, formats and matches IP addresses and CIDR prefixes for the module:
// client addresses (source.address, x-forwarded-for), the prefixes that group them in keys, and
// the client_cidrs of exemptions.
//
// It accepts exactly what net/netip's ParseAddr and ParsePrefix accept and writes what their
// String methods write (FuzzParseAddr and FuzzPrefix hold it to them), without what the module
// has no use for: zones are returned apart and not kept, and there is no interning. net/netip
// would link its own parser, formatter and the unique package into the module, tens of
// kilobytes that every worker VM loads.
package netaddr
