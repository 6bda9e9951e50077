package store

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodeKey: a store makes a random key of its own beside its file
// (mode 0600) and finds the same key when it is opened again, also after
// its file was lost; a key file of another length is an error, never
// replaced silently.
func TestNodeKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := bytes.Clone(s.NodeKey())
	_ = s.Close()
	if len(key) != NodeKeySize || bytes.Equal(key, make([]byte, NodeKeySize)) {
		t.Fatalf("key %x, want %d random bytes", key, NodeKeySize)
	}
	if fi, err := os.Stat(NodeKeyFile(path)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v, want mode 0600", fi, err)
	}
	if err := os.Remove(path); err != nil { // the store is lost
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.NodeKey(), key) {
		t.Errorf("the key changed when the store file was lost")
	}
	_ = s.Close()
	if err := os.WriteFile(NodeKeyFile(path), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "is 5 bytes, want 32") {
		t.Errorf("Open with a damaged key: %v, want an error naming the key's length", err)
	}
}
