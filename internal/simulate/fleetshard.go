package simulate

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate-proxy/tollgate/config"
)

// Where envoyproxy/ratelimit's counters live in a Redis Cluster. A counter's Redis key is the
// domain and the descriptor's entries, each followed by "_", then the window's start in Unix
// seconds (CACHE_KEY_PREFIX, empty by default, before it all: src/limiter/cache_key.go), so each
// window of a key is its own Redis key; Redis Cluster puts it in hash slot CRC16(key) mod 16384
// (of the part between the first "{" and the next "}", when not empty), and
// `redis-cli --cluster create` gives each of S masters an equal run of slots, in order.

// ClusterSlots is Redis Cluster's number of hash slots: at most that many masters.
const ClusterSlots = 16384

// counterPrefix is the Redis key of a rule's counters up to the partition key.
func counterPrefix(r *config.Rule) string {
	g := r.Global
	var b strings.Builder
	b.WriteString(g.Domain + "_")
	for _, e := range g.Entries {
		b.WriteString(e.Key + "_" + e.Value + "_")
	}
	b.WriteString(g.RuleEntry + "_" + r.Name + "_" + g.KeyEntry + "_")
	return b.String()
}

// clusterShards are the masters of a Redis Cluster as `redis-cli --cluster create` divides the
// slots among them (redis-cli.c, clusterManagerCommandCreate): master i's slots end at
// lround((i+1) × 16384/S − 1), the last master's at 16383.
type clusterShards []int // the last slot of each master

func newClusterShards(masters int) clusterShards {
	per := float64(ClusterSlots) / float64(masters)
	last := make(clusterShards, masters)
	first := 0
	for i := range last {
		end := int(math.Round(float64(i)*per + per - 1))
		if i == masters-1 {
			end = ClusterSlots - 1
		}
		end = max(end, first)
		last[i], first = end, end+1
	}
	return last
}

// of is the master holding the counter of a rule's key (after prefix) in the window starting at
// window.
func (c clusterShards) of(prefix, key string, window int64) int {
	slot := keySlot(prefix + key + "_" + strconv.FormatInt(window, 10))
	i, _ := slices.BinarySearch(c, slot)
	return i
}

// keySlot is Redis Cluster's hash slot of a key (CLUSTER KEYSLOT), hash tags included.
func keySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return int(crc16(key)) % ClusterSlots
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), Redis Cluster's.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
