package localcri

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// modulePath is the module whose checkout holds the tools directory.
const modulePath = "github.com/podsync/podsync"

// RepoDir returns the root of the podsync checkout that contains the current
// working directory: the nearest parent holding the go.mod of modulePath.
func RepoDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	return findRepoDir(dir)
}

func findRepoDir(dir string) (string, error) {
	want := []byte("module " + modulePath + "\n")
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.HasPrefix(b, want) {
			return d, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("read go.mod: %w", err)
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of %s above %s", modulePath, dir)
		}
	}
}
