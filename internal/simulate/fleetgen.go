package simulate

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"time"
)

// FleetLogOptions shape a generated fleet log: Poisson arrivals at Rate requests per second for
// Duration, each from one of Keys API keys drawn by a Zipf law of exponent ZipfS (key k, from 0,
// with probability proportional to 1/(1+k)^ZipfS). Each key has its own client address, so that
// a balancer hashing the address keeps a key on one replica.
type FleetLogOptions struct {
	Start    time.Time
	Rate     float64
	Duration time.Duration
	Keys     uint64
	ZipfS    float64
	Seed     uint64
	// Path is every request's path, Header the header carrying the key (x-api-key).
	Path, Header string
}

// WriteFleetLog writes a generated log in the envoy-json format, one request a line, in time
// order, and returns how many requests it wrote.
func WriteFleetLog(w io.Writer, o FleetLogOptions) (int, error) {
	if o.Rate <= 0 || o.Duration <= 0 || o.Keys < 1 || o.ZipfS <= 1 {
		return 0, errors.New("a fleet log needs a positive rate and duration, at least one key and a Zipf exponent above 1")
	}
	rng := rand.New(rand.NewPCG(o.Seed, 27))
	zipf := rand.NewZipf(rng, o.ZipfS, 1, o.Keys-1)
	out := bufio.NewWriter(w)
	start, end := o.Start.UnixNano(), o.Start.Add(o.Duration).UnixNano()
	n := 0
	for t := float64(start); ; t += rng.ExpFloat64() / o.Rate * float64(time.Second) {
		at := int64(t)
		if at >= end {
			break
		}
		k := zipf.Uint64()
		line := fleetLine(at, "GET", o.Path, fleetClient(k), o.Header, fleetKey(k))
		if err := writeLine(out, line); err != nil {
			return n, err
		}
		n++
	}
	return n, out.Flush()
}

// fleetKey and fleetClient are key k's API key and client address.
func fleetKey(k uint64) string { return "key-" + itoa(k) }

func fleetClient(k uint64) string {
	return "10." + itoa(k>>16&0xff) + "." + itoa(k>>8&0xff) + "." + itoa(k&0xff) + ":40000"
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// fleetLine is one request as an envoy-json line.
func fleetLine(at int64, method, path, client, header, key string) map[string]string {
	return map[string]string{
		"start_time": time.Unix(0, at).UTC().Format(time.RFC3339Nano), "method": method, "path": path,
		"downstream_remote_address": client, "req." + header: key,
	}
}

func writeLine(w io.Writer, fields map[string]string) error {
	line, err := json.Marshal(fields)
	if err == nil {
		_, err = w.Write(append(line, '\n'))
	}
	return err
}
