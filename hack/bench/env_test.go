package main

import (
	"os"
	"path/filepath"
	"testing"
)

// A podsyncd restarted around the kubelet's runs appends to its
// predecessor's log: its metrics address is the one past its own start.
func TestLogAddressSkipsEarlierProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsyncd.log")
	first := `{"msg":"serving metrics","address":"127.0.0.1:1111"}` + "\n"
	second := `{"msg":"podsyncd starting"}` + "\n" + `{"msg":"serving metrics","address":"127.0.0.1:2222"}` + "\n"
	if err := os.WriteFile(path, []byte(first+second), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from int64
		want string
	}{{0, "127.0.0.1:1111"}, {int64(len(first)), "127.0.0.1:2222"}} {
		got, err := logAddress(path, tc.from, "serving metrics")
		if err != nil || got != tc.want {
			t.Errorf("logAddress(from %d) = %q, %v; want %q", tc.from, got, err, tc.want)
		}
	}
	if _, err := logAddress(path, int64(len(first+second)), "serving metrics"); err == nil {
		t.Error("logAddress past every line found an address")
	}
}
