// Command tollgate validates Tollgate configurations and runs the module locally.
//
//	tollgate check FILE
//	tollgate serve --config FILE --listen ADDR --upstream URL [--wasm FILE] [--workers N] [--upstream-timeout D] [--drain-timeout D]
//	tollgate simulate --config FILE --log ACCESS_LOG|- [--format envoy-json|combined] --out DIR [--compare FILE] [--show-keys] [--seed N]
//	                  [--phases N] [--suggest [--suggest-percent P]]
//	                  [--replicas N [--global-limit RULE=N/UNIT ...] [--ratelimit-config FILE] [--workers W] [--balance round-robin|hash]]
//	tollgate demo-upstream --listen ADDR
//	tollgate backtrace [--names FILE] < envoy.log
//	tollgate top|inspect|reset --url URL --token-file FILE [--key K] [--rule R] [--level N] [--json]
//	tollgate version
//
// check parses a plugin configuration with the same code the module runs, so a file it accepts
// is a file the module accepts. serve runs build/tollgate.wasm in the embedded Envoy-faithful
// host behind a real HTTP listener and proxies admitted requests to the upstream. simulate
// replays an access log through the module on a virtual clock and reports what the configuration
// would have done (docs/simulate.md). backtrace names the frames of a trap's backtrace in Envoy's
// log that the module leaves unnamed, from the function name map make build writes beside it.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tollgate-proxy/tollgate/internal/subcommand"
	"github.com/tollgate-proxy/tollgate/internal/version"
)

const usage = `usage:
  tollgate check FILE                 validate a plugin configuration (FILE "-" reads stdin)
  tollgate serve --config FILE --upstream URL [--listen ADDR] [--admin ADDR] [--wasm FILE] [--workers N] [--envoy 1.33|1.39]
                 [--grpc-cluster NAME=HOST:PORT ...] [--upstream-timeout D] [--drain-timeout D]
                                      run the module in the embedded host in front of URL (FILE
                                      "-" reads stdin); the upstream gets D (15s) to answer, else
                                      504; SIGTERM lets requests in flight finish within the
                                      drain timeout (20s)
  tollgate serve --no-filter --upstream URL [--listen ADDR] [--upstream-timeout D] [--drain-timeout D]
                                      the same proxy without the module, a baseline for load tests
  tollgate simulate --config FILE --log ACCESS_LOG|- [--format envoy-json|combined] --out DIR
                    [--compare OTHER_CONFIG] [--show-keys] [--wasm FILE] [--top N] [--seed N] [--phases N]
                    [--suggest [--suggest-percent P]]
                    [--replicas N [--global-limit RULE=N/UNIT ...] [--ratelimit-config FILE] [--workers W]
                     [--balance round-robin|hash] [--service-latency D] [--redis-shards S]]
                                      replay an access log through the module, write summary.json and report.html;
                                      with --replicas, also what global limits cost a fleet of N replicas
  tollgate demo-upstream [--listen ADDR]
                                      a small upstream that answers 200, or the status ?status=N
                                      asks for (200 to 599), with a line naming the request;
                                      POST /v1/chat/completions and /v1/messages answer as
                                      OpenAI's and Anthropic's APIs would (JSON, or events with
                                      "stream": true), with the token usage x-demo-* headers choose
  tollgate backtrace [--names FILE]   copy an Envoy log from stdin to stdout, naming the
                                      unknown(function index:N) frames of the module's trap
                                      backtraces (and the .$N( frames of the embedded host's)
                                      from FILE (build/tollgate.wasm.names)
  tollgate top --url URL --token-file F [--json]
                                      each rule's top offenders, from the operator endpoint of
                                      the filter behind Envoy's listener URL
  tollgate inspect --url URL --token-file F --key K [--rule R] [--json]
                                      the key's buckets in every rule (or rule R)
  tollgate reset --url URL --token-file F --key K [--rule R] [--level N] [--json]
                                      the key's buckets whole again (or with N units left)
  tollgate version                    print the version of this build
`

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// commandFlags is the flag set of a command: its problems and -h go to stderr, and the command,
// not package flag, decides how to exit.
func commandFlags(command string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("tollgate "+command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// moduleFlag defines --wasm, the module that serve and simulate run.
func moduleFlag(fs *flag.FlagSet) *string {
	return fs.String("wasm", "build/tollgate.wasm", "the module `FILE`")
}

// run is the whole command, with its streams passed in for tests; it returns the exit code:
// 0 success, 1 the work failed (an invalid config, a server error), 2 bad usage.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return check(args[1:], stdin, stdout, stderr)
		case "serve":
			return serve(args[1:], stdin, stdout, stderr)
		case "simulate":
			return simulateCmd(args[1:], stdin, stdout, stderr)
		case "demo-upstream":
			return demoUpstream(args[1:], stdout, stderr)
		case "backtrace":
			return backtrace(args[1:], stdin, stdout, stderr)
		case "inspect", "top", "reset":
			return operatorCommand(args[0], args[1:], stdout, stderr)
		case "version", "--version":
			if len(args) > 1 {
				fmt.Fprintf(stderr, "tollgate version: takes no arguments, got %q\n", args[1:])
				return 2
			}
			fmt.Fprintln(stdout, "tollgate "+version.Version)
			return 0
		}
	}
	return subcommand.Unmatched("tollgate", usage, args, stdout, stderr)
}
