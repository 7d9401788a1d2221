package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tollgate-proxy/tollgate/config"
)

// tollgateConfigs are the stand-alone Tollgate configurations the repository ships.
var tollgateConfigs = []string{"examples/tollgate.json", "examples/egress/tollgate.json", "examples/llm/tollgate.json"}

// otherShippedFiles are configuration files proven by a test outside these lists.
var otherShippedFiles = map[string]string{
	"deploy/image/Dockerfile":  "TestDockerfileMakesOneLayerWithPluginWasm",
	"docs/summary.schema.json": "internal/simulate's TestSummaryMatchesItsSchema",
}

// shippedConfigs maps every configuration file the repository ships to the test that proves it
// valid.
func shippedConfigs() map[string]string {
	proven := map[string]string{}
	for _, c := range envoyConfigs {
		proven[c.file] = "TestShippedEnvoyConfigsAreValid"
	}
	for _, f := range istioManifests {
		proven[f] = "TestShippedWasmPluginsAreValid"
	}
	for _, f := range composeFiles {
		proven[f] = "TestComposeFileMatchesWhatItMounts"
	}
	for _, f := range envoyGatewayManifests {
		proven[f] = "TestShippedEnvoyGatewayManifestsAreValid"
	}
	for _, f := range ambientManifests {
		proven[f] = "TestShippedAmbientManifestsAreValid"
	}
	for _, f := range tollgateConfigs {
		proven[f] = "TestShippedTollgateConfigsAreValid"
	}
	for f, test := range otherShippedFiles {
		proven[f] = test
	}
	return proven
}

// Every configuration file in the repository (YAML, JSON, Dockerfiles), outside build output and
// test data, is listed with the test that proves it valid: a new one cannot ship unproven.
func TestEveryShippedConfigIsProven(t *testing.T) {
	proven := shippedConfigs()
	var found []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "build" || d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && rel != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		switch ext := filepath.Ext(rel); {
		case ext == ".yaml" || ext == ".yml" || ext == ".json", d.Name() == "Dockerfile", d.Name() == "Containerfile":
			found = append(found, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(found)
	for _, f := range found {
		if test, ok := proven[f]; ok {
			t.Logf("%s: proven by %s", f, test)
		} else {
			t.Errorf("%s is not proven valid by any test: add it to one of the lists in package deploy", f)
		}
	}
	for _, f := range sortedKeys(proven) {
		if !slices.Contains(found, f) {
			t.Errorf("%s is listed as shipped but does not exist", f)
		}
	}
}

func TestShippedTollgateConfigsAreValid(t *testing.T) {
	for _, file := range tollgateConfigs {
		data, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := config.Parse(data); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}
}
