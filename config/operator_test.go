package config_test

import (
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
)

const digestA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func TestOperatorBlock(t *testing.T) {
	cfg, err := config.Parse([]byte(withTop(`"operator": {"path_prefix": "/.tollgate/", "client_cidrs": ["10.0.0.0/8", "192.0.2.7"],
		"token_sha256": ["` + strings.ToUpper(digestA) + `"], "raw_keys": true, "top_keys": 5}`)))
	if err != nil {
		t.Fatal(err)
	}
	op := cfg.Operator
	if op == nil || op.PathPrefix != "/.tollgate/" || len(op.ClientCIDRs) != 2 || op.ClientCIDRs[1].String() != "192.0.2.7/32" ||
		len(op.TokenSHA256) != 1 || op.TokenSHA256[0][0] != 0x9f || op.TokenSHA256[0][31] != 0x08 || !op.RawKeys || op.TopKeys != 5 {
		t.Errorf("operator %+v", op)
	}
	cfg, _ = config.Parse([]byte(withTop(`"operator": {"path_prefix": "/ops/", "client_cidrs": ["::1"], "token_sha256": ["` + digestA + `"]}`)))
	if cfg == nil || cfg.Operator.TopKeys != config.DefaultTopKeys || cfg.Operator.RawKeys {
		t.Errorf("defaults: %+v", cfg)
	}
	if cfg, _ := config.Parse([]byte(withTop(`"shadow": false`))); cfg.Operator != nil {
		t.Errorf("the endpoint is on without an operator block")
	}
}

func TestOperatorBlockRefused(t *testing.T) {
	valid := `"client_cidrs": ["10.0.0.0/8"], "token_sha256": ["` + digestA + `"]`
	for doc, want := range map[string]string{
		`"operator": true`: `operator: got true, want an object: operator is an object such as {"path_prefix": "/.tollgate/"`,
		`"operator": {"path_prefix": ".tollgate/", ` + valid + `}`:                                                                `operator.path_prefix: ".tollgate/" does not start and end with '/': path_prefix is`,
		`"operator": {"path_prefix": "/.tollgate", ` + valid + `}`:                                                                `operator.path_prefix: "/.tollgate" does not start and end with '/'`,
		`"operator": {"path_prefix": "/a//b/", ` + valid + `}`:                                                                    `operator.path_prefix: "/a//b/" has an empty segment`,
		`"operator": {"path_prefix": "/a b/", ` + valid + `}`:                                                                     `operator.path_prefix: "/a b/" has ' '`,
		`"operator": {"path_prefix": "/", ` + valid + `}`:                                                                         `operator.path_prefix: "/" does not start and end with '/'`,
		`"operator": {"path_prefix": "/t/", "client_cidrs": ["10.0.0.0/33"], "token_sha256": ["` + digestA + `"]}`:                `operator.client_cidrs[0]: "10.0.0.0/33" is not a valid CIDR`,
		`"operator": {"path_prefix": "/t/", "client_cidrs": [], "token_sha256": ["` + digestA + `"]}`:                             `operator.client_cidrs: `,
		`"operator": {"path_prefix": "/t/", "client_cidrs": ["10.0.0.0/8"], "token_sha256": ["abc"]}`:                             `operator.token_sha256[0]: "abc" is not 64 hex digits: token_sha256 lists`,
		`"operator": {"path_prefix": "/t/", "client_cidrs": ["10.0.0.0/8"], "token_sha256": ["` + strings.Repeat("g", 64) + `"]}`: `operator.token_sha256[0]: "ggg`,
		`"operator": {"path_prefix": "/t/", "client_cidrs": ["10.0.0.0/8"], "token_sha256": []}`:                                  `operator.token_sha256: `,
		`"operator": {"path_prefix": "/t/", "client_cidrs": ["10.0.0.0/8"]}`:                                                      `operator.token_sha256: required field is missing: add "token_sha256": ["<64 hex digits>"]`,
		`"operator": {"client_cidrs": ["10.0.0.0/8"], "token_sha256": ["` + digestA + `"]}`:                                       `operator.path_prefix: required field is missing: add "path_prefix": "/.tollgate/"`,
		`"operator": {"path_prefix": "/t/", ` + valid + `, "top_keys": 0}`:                                                        `operator.top_keys: 0 is not allowed: top_keys is`,
		`"operator": {"path_prefix": "/t/", ` + valid + `, "token": "x"}`:                                                         `operator: unknown field "token"`,
	} {
		_, err := config.Parse([]byte(withTop(doc)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %q", doc, err, want)
		}
	}
}

// The operator's client_cidrs is one problem each, with the operator's own fix: not exempt's
// advice to remove a field the endpoint requires.
func TestOperatorCIDRsOneProblem(t *testing.T) {
	for cidrs, want := range map[string]string{
		`[]`:   `an empty list is not allowed: add the range your operators connect from, such as "10.0.0.0/8"`,
		`"10"`: `got the string "10", want an array: client_cidrs lists the peers that may use the operator endpoint`,
	} {
		checkParse(t, withTop(`"operator": {"path_prefix": "/t/", "client_cidrs": `+cidrs+`, "token_sha256": ["`+digestA+`"]}`),
			nil, []problem{{"operator.client_cidrs", want}})
	}
}

// A client_cidrs entry of length 0 lets every peer reach the endpoint: valid, but flagged.
func TestOperatorWarnings(t *testing.T) {
	cfg, err := config.Parse([]byte(withTop(`"operator": {"path_prefix": "/t/", "client_cidrs": ["10.0.0.0/8", "0.0.0.0/0", "::/0"],
		"token_sha256": ["` + digestA + `"]}`)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range config.Warnings(cfg) {
		got = append(got, w.String())
	}
	want := []string{
		`operator.client_cidrs[1]: "0.0.0.0/0" lets every peer reach the operator endpoint, where only the token stops it: list the ranges your operators connect from, e.g. "10.0.0.0/8"`,
		`operator.client_cidrs[2]: "::/0" lets every peer reach the operator endpoint, where only the token stops it: list the ranges your operators connect from, e.g. "10.0.0.0/8"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings\n%q\nwant\n%q", got, want)
	}
}

// encodeOperator writes an operator block back as JSON, for the parser's round trip (FuzzParse).
func encodeOperator(op *config.Operator) map[string]any {
	var cidrs, digests []string
	for _, prefix := range op.ClientCIDRs {
		cidrs = append(cidrs, prefix.String())
	}
	for _, d := range op.TokenSHA256 {
		digests = append(digests, hex.EncodeToString(d[:]))
	}
	return map[string]any{"path_prefix": op.PathPrefix, "client_cidrs": cidrs, "token_sha256": digests,
		"raw_keys": op.RawKeys, "top_keys": op.TopKeys}
}

// revalidateOperator checks an accepted operator block against the documented bounds.
func revalidateOperator(op *config.Operator) error {
	switch {
	case op == nil:
		return nil
	case len(op.PathPrefix) < 2 || op.PathPrefix[0] != '/' || op.PathPrefix[len(op.PathPrefix)-1] != '/' || strings.Contains(op.PathPrefix, "//"):
		return errors.New("path_prefix " + op.PathPrefix)
	case len(op.ClientCIDRs) < 1 || len(op.ClientCIDRs) > 64:
		return errors.New("client_cidrs")
	case len(op.TokenSHA256) < 1 || len(op.TokenSHA256) > 8:
		return errors.New("token_sha256")
	case op.TopKeys < 1 || op.TopKeys > 256:
		return errors.New("top_keys")
	}
	return nil
}
