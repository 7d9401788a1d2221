package main

import (
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/tollgate-proxy/tollgate/config"
)

// grpcClusters is the repeatable --grpc-cluster NAME=HOST:PORT flag: the gRPC clusters the
// module's global limits call, as Envoy's static_resources.clusters would define them.
type grpcClusters map[string]string

func (c grpcClusters) String() string {
	names := make([]string, 0, len(c))
	for name := range c {
		names = append(names, name+"="+c[name])
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func (c grpcClusters) Set(value string) error {
	name, address, ok := strings.Cut(value, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=HOST:PORT, e.g. ratelimit=127.0.0.1:8081")
	}
	if _, port, err := net.SplitHostPort(address); err != nil || port == "" {
		return fmt.Errorf("%q is not HOST:PORT, e.g. ratelimit=127.0.0.1:8081", address)
	}
	if _, dup := c[name]; dup {
		return fmt.Errorf("cluster %q is given twice", name)
	}
	c[name] = address
	return nil
}

// missingClusters lists a problem for every global limit whose cluster has no address.
func (c grpcClusters) missingClusters(cfg *config.Config) []string {
	var problems []string
	for i, r := range cfg.Rules {
		if r.Global == nil {
			continue
		}
		if _, ok := c[r.Global.Cluster]; !ok {
			problems = append(problems, fmt.Sprintf("rules[%d].global.cluster %q has no address: add --grpc-cluster %s=HOST:PORT, "+
				"the rate limit service's gRPC endpoint", i, r.Global.Cluster, r.Global.Cluster))
		}
	}
	return problems
}
