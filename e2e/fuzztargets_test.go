package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// make fuzz runs every fuzz target of the repository: the Makefile's FUZZ_TARGETS lists each
// func FuzzX in a _test.go file as package:FuzzX.
func TestMakeFuzzRunsEveryTarget(t *testing.T) {
	t.Parallel()
	makefile, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(makefile), "\nFUZZ_TARGETS := ")
	if !ok {
		t.Fatal("the Makefile has no FUZZ_TARGETS")
	}
	var listed []string
	for _, line := range strings.Split(rest, "\n") {
		listed = append(listed, strings.Fields(strings.TrimSuffix(line, "\\"))...)
		if !strings.HasSuffix(line, "\\") {
			break
		}
	}
	var found []string
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "build") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(src), "\n") {
			if name, ok := strings.CutPrefix(line, "func Fuzz"); ok {
				name, _, _ = strings.Cut(name, "(")
				found = append(found, "./"+filepath.ToSlash(filepath.Dir(strings.TrimPrefix(path, "../")))+":Fuzz"+name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(listed)
	slices.Sort(found)
	if !slices.Equal(listed, found) {
		t.Fatalf("make fuzz runs %v\nthe fuzz targets are %v", listed, found)
	}
}
