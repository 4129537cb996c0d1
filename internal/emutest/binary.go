package emutest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// EnvBinary names the environment variable that points at a built
// cmd/mongotest, used instead of building one.
const EnvBinary = "FERRY_MONGOTEST_BIN"

// emulatorPkg is the emulator's command.
const emulatorPkg = "github.com/ferry-io/ferry/mongotest/cmd/mongotest"

var built struct {
	once sync.Once
	path string
	err  error
}

// binary returns the path of the emulator's binary: $FERRY_MONGOTEST_BIN,
// or one built once per test binary.
func binary() (string, error) {
	built.once.Do(func() {
		if p := os.Getenv(EnvBinary); p != "" {
			if _, err := os.Stat(p); err != nil {
				built.err = fmt.Errorf("emutest: $%s: %w", EnvBinary, err)
				return
			}
			built.path = p
			return
		}
		built.path, built.err = build()
	})
	return built.path, built.err
}

// build builds the emulator from the workspace the test runs in, into a
// directory of the user's cache (or the temporary directory) of its own:
// the test binaries of one workspace share the file, each replacing it
// atomically (a private file renamed over it), so a binary another test
// binary is starting is never half written.
func build() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("emutest: %w", err)
	}
	root, err := workspaceRoot(wd)
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(base, "ferry-emutest", hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("emutest: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "mongotest-*.tmp")
	if err != nil {
		return "", fmt.Errorf("emutest: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name()) // a no-op once renamed
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", tmp.Name(), emulatorPkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "go.work"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("emutest: building the emulator (go build %s in %s): %v\n%s(set $%s to a built cmd/mongotest, or $%s to a real replica set)",
			emulatorPkg, root, err, out, EnvBinary, EnvURI)
	}
	final := filepath.Join(dir, "mongotest")
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", fmt.Errorf("emutest: %w", err)
	}
	return final, nil
}

// workspaceRoot is the nearest directory at or above dir with a go.work
// file.
func workspaceRoot(dir string) (string, error) {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("emutest: %w", err)
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("emutest: no go.work at or above %s: the emulator (%s) is built from Ferry's workspace; set $%s to a built one, or $%s to a real replica set",
				dir, strings.TrimSuffix(emulatorPkg, "/cmd/mongotest"), EnvBinary, EnvURI)
		}
		d = up
	}
}
