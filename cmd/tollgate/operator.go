package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-proxy/tollgate/config"
)

// The operator commands: tollgate inspect, top and reset ask the operator endpoint of a running
// filter (the configuration's "operator" block) through Envoy's listener.

// Exit codes of the operator commands, beyond 0 (done) and 2 (bad usage).
const (
	exitFailed      = 1 // the endpoint could not be reached, or it failed (5xx)
	exitRefused     = 3 // the endpoint refused the address or the token (403, 401)
	exitRateLimited = 4 // the endpoint's own rate limit: retry in a second
	exitNotFound    = 5 // no such rule or operation, or no rule's key takes the key given
	exitNoEndpoint  = 6 // something other than the endpoint answered: it is off, or another prefix
)

// operatorHeader is the header the endpoint's replies carry (internal/plugin.OperatorHeader).
const operatorHeader = "x-tollgate-operator"

// operatorOptions are the checked flags of an operator command.
type operatorOptions struct {
	name    string // inspect, top or reset
	base    *url.URL
	prefix  string
	token   string
	keys    []string
	rule    string
	level   int64 // reset: -1 for whole
	json    bool
	timeout time.Duration
}

// keyList is a repeatable --key.
type keyList []string

func (k *keyList) String() string     { return strings.Join(*k, ",") }
func (k *keyList) Set(v string) error { *k = append(*k, v); return nil }

// operatorCommand runs tollgate inspect, top or reset.
func operatorCommand(name string, args []string, stdout, stderr io.Writer) int {
	opts, ok := parseOperatorFlags(name, args, stderr)
	if !ok {
		return 2
	}
	method, path := http.MethodGet, opts.prefix+"top"
	query := url.Values{}
	for _, k := range opts.keys {
		query.Add("key", k)
	}
	if opts.rule != "" {
		query.Set("rule", opts.rule)
	}
	switch name {
	case "inspect":
		path = opts.prefix + "keys"
	case "reset":
		method, path = http.MethodPost, opts.prefix+"reset"
		if opts.level >= 0 {
			query.Set("level", strconv.FormatInt(opts.level, 10))
		}
	}
	target := *opts.base // a listener behind a path (a gateway's route) keeps it
	target.Path = strings.TrimSuffix(target.Path, "/") + path
	target.RawPath, target.RawQuery = "", query.Encode()
	status, body, code := askEndpoint(opts, method, &target, stderr)
	if code != 0 {
		return code
	}
	if opts.json {
		stdout.Write(body)
	}
	looked, err := printOperatorReply(name, body, stdout, opts.json)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "tollgate %s: the endpoint answered %d with a body that is not its JSON: %v\n", name, status, err)
		return exitFailed
	case !looked:
		fmt.Fprintf(stderr, "tollgate %s: no rule's key takes the key given: give --key once per part of the rule's key, "+
			"in order (a client_ip part takes an IP address)\n", name)
		return exitNotFound
	}
	return 0
}

// parseOperatorFlags reads and checks an operator command's flags, saying every problem at once.
func parseOperatorFlags(name string, args []string, stderr io.Writer) (operatorOptions, bool) {
	fs := commandFlags(name, stderr)
	base := fs.String("url", "", "Envoy's listener `URL`, e.g. http://127.0.0.1:8080, required")
	tokenFile := fs.String("token-file", "", "`FILE` holding the bearer token whose SHA-256 is in operator.token_sha256, required")
	prefix := fs.String("prefix", "/.tollgate/", "the endpoint's operator.path_prefix")
	asJSON := fs.Bool("json", false, "print the endpoint's JSON as it is")
	timeout := fs.Duration("timeout", 10*time.Second, "longest wait for the answer")
	var keys keyList
	rule, level := new(string), new(int64)
	*level = -1
	if name != "top" {
		fs.Var(&keys, "key", "the `KEY` as requests carry it (a header's value, a client address); once per part of a key of several parts, in order, required")
		rule = fs.String("rule", "", "only the rule `NAME` (default: every rule whose key fits)")
	}
	if name == "reset" {
		fs.Int64Var(level, "level", -1, "leave the key `N` units instead of a whole bucket")
	}
	if err := fs.Parse(args); err != nil {
		return operatorOptions{}, false
	}
	var problems []string
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected argument %q: give everything as flags, e.g. --key %s", fs.Arg(0), fs.Arg(0)))
	}
	u, err := url.Parse(*base)
	switch {
	case *base == "":
		problems = append(problems, "--url is required: Envoy's listener, e.g. --url http://127.0.0.1:8080")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		problems = append(problems, fmt.Sprintf("--url %q is not an http(s) URL with a host, e.g. http://127.0.0.1:8080", *base))
	}
	token, problem := readTokenFile(*tokenFile)
	if problem != "" {
		problems = append(problems, problem)
	}
	if len(*prefix) < 2 || !strings.HasPrefix(*prefix, "/") || !strings.HasSuffix(*prefix, "/") {
		problems = append(problems, fmt.Sprintf("--prefix %q does not start and end with '/': give operator.path_prefix, e.g. /.tollgate/", *prefix))
	}
	if name != "top" && len(keys) == 0 {
		problems = append(problems, "--key is required: the key as requests carry it, e.g. --key customer-42")
	}
	if name == "reset" && *level < -1 {
		problems = append(problems, fmt.Sprintf("--level %d is negative: give the units to leave, 0 or more (without --level the bucket is whole)", *level))
	}
	if *timeout <= 0 {
		problems = append(problems, fmt.Sprintf("--timeout %s is not positive: e.g. --timeout 10s", *timeout))
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "tollgate %s: %s\n", name, p)
	}
	return operatorOptions{name: name, base: u, prefix: *prefix, token: token, keys: keys, rule: *rule, level: *level,
		json: *asJSON, timeout: *timeout}, len(problems) == 0
}

// printOperatorEndpoint is tollgate check's line on the operator endpoint, when it is on.
func printOperatorEndpoint(w io.Writer, name string, op *config.Operator) {
	if op == nil {
		return
	}
	keys := "key hashes"
	if op.RawKeys {
		keys = "raw keys"
	}
	fmt.Fprintf(w, "%s: operator endpoint under %s for %d CIDR(s) with %d token(s), top %d keys per rule by %s\n",
		name, op.PathPrefix, len(op.ClientCIDRs), len(op.TokenSHA256), op.TopKeys, keys)
}

// readTokenFile reads the bearer token: the file's first line, without surrounding spaces.
func readTokenFile(path string) (string, string) {
	if path == "" {
		return "", "--token-file is required: a file holding the operator token, e.g. --token-file ~/.tollgate-token"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Sprintf("--token-file: %v", err)
	}
	token, _, _ := strings.Cut(string(data), "\n")
	token = strings.TrimSpace(token)
	if token == "" {
		return "", fmt.Sprintf("--token-file %s is empty: write the token on its first line", path)
	}
	return token, ""
}

// askEndpoint sends the request and sorts out the answer: the status and body of a 200 from
// the endpoint, or the exit code of anything else, with a message on stderr.
func askEndpoint(opts operatorOptions, method string, target *url.URL, stderr io.Writer) (int, []byte, int) {
	ctx, cancel := context.WithTimeout(context.Background(), opts.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target.String(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate %s: %v\n", opts.name, err)
		return 0, nil, exitFailed
	}
	req.Header.Set("Authorization", "Bearer "+opts.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate %s: cannot reach %s: %v\n", opts.name, opts.base, err)
		return 0, nil, exitFailed
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		fmt.Fprintf(stderr, "tollgate %s: reading the answer: %v\n", opts.name, err)
		return 0, nil, exitFailed
	}
	if resp.Header.Get(operatorHeader) == "" {
		fmt.Fprintf(stderr, "tollgate %s: %s %s was answered %d by something other than the operator endpoint: "+
			"is \"operator\" configured with path_prefix %q in the Tollgate filter of this listener?\n",
			opts.name, method, target.Path, resp.StatusCode, opts.prefix)
		return 0, nil, exitNoEndpoint
	}
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, body, 0
	}
	var reply struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &reply)
	if reply.Error == "" {
		reply.Error = strings.TrimSpace(string(body))
	}
	fmt.Fprintf(stderr, "tollgate %s: the endpoint answered %d: %s\n", opts.name, resp.StatusCode, reply.Error)
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return 0, nil, exitRefused
	case http.StatusTooManyRequests:
		return 0, nil, exitRateLimited
	case http.StatusNotFound:
		return 0, nil, exitNotFound
	}
	return 0, nil, exitFailed
}

// decodeStrict decodes the endpoint's JSON into v.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}
