package ferry

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryModuleIsLicensed: the repository is under the Apache License
// 2.0 (LICENSE, the text the MongoDB driver ships), every module of the
// workspace carries the same LICENSE at its root (a module's zip holds
// only its own directory), and the README says so.
func TestEveryModuleIsLicensed(t *testing.T) {
	root, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatalf("the repository has no licence file: %v", err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(root), []byte("Apache License")) || !bytes.Contains(root, []byte("Version 2.0, January 2004")) ||
		!bytes.Contains(root, []byte("END OF TERMS AND CONDITIONS")) {
		t.Fatal("LICENSE is not the whole Apache License 2.0 text")
	}
	work, err := os.ReadFile("go.work")
	if err != nil {
		t.Fatal(err)
	}
	var modules []string
	inUse := false
	for _, line := range strings.Split(string(work), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "use ("):
			inUse = true
		case inUse && line == ")":
			inUse = false
		case inUse && line != "":
			modules = append(modules, line)
		}
	}
	if len(modules) < 2 {
		t.Fatalf("go.work lists %d modules", len(modules))
	}
	for _, m := range modules {
		got, err := os.ReadFile(filepath.Join(m, "LICENSE"))
		if err != nil || !bytes.Equal(got, root) {
			t.Errorf("module %s: LICENSE missing or different from the repository's (%v)", m, err)
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("\n## Licence\n")) || !bytes.Contains(readme, []byte("Apache License 2.0")) {
		t.Error("README.md has no Licence section naming the Apache License 2.0")
	}
}
