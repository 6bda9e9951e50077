package store

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// NodeKeySize is the length of the node's key.
const NodeKeySize = 32

// NodeKeyFile is the node key's file beside the store's file: a lost store
// file (removed, emptied, moved aside as corrupt) leaves it, and what it
// signed still verifies.
func NodeKeyFile(path string) string { return path + ".key" }

// loadNodeKey reads the node's key, or makes it (random, mode 0600) when
// its file does not exist. A file of another length is an error: a key
// replaced silently would make every record signed with the old one fail
// to verify.
func loadNodeKey(path string) ([]byte, error) {
	file := NodeKeyFile(path)
	key, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return makeNodeKey(file)
	}
	if err != nil {
		return nil, fmt.Errorf("read the node key: %w", err)
	}
	if len(key) != NodeKeySize {
		return nil, fmt.Errorf("node key %s is %d bytes, want %d: restore it, or remove it for a new key "+
			"(the sandboxes' records of their pods then no longer verify, and --adopt-runtime rebuilds pods in part)",
			file, len(key), NodeKeySize)
	}
	return key, nil
}

// makeNodeKey writes a new random key to file, which must not exist.
func makeNodeKey(file string) ([]byte, error) {
	key := make([]byte, NodeKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("make the node key: %w", err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("make the node key: %w", err)
	}
	_, err = f.Write(key)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(file)
		return nil, fmt.Errorf("make the node key %s: %w", file, err)
	}
	return key, nil
}

// NodeKey returns the node's key: random bytes made with the store and
// kept beside its file (<file>.key, mode 0600), with which the node signs
// what it records outside the store and must trust again later (the
// sandboxes' record of their pod, model.SignPodSpec). Callers must not
// change it.
func (s *Store) NodeKey() []byte { return s.key }
