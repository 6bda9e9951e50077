package stats

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

// TestCPUSampleRates: a rate is the usage between two samples of a key;
// the first sample of a key takes the runtime's rate, or none; a counter
// that went back (a new container under the key) gives no rate.
func TestCPUSampleRates(t *testing.T) {
	var s cpuSamples
	t0 := time.Unix(1000, 0)
	if r := s.rate("c", t0, 5e9, nil); r != nil {
		t.Errorf("first sample without the runtime's rate: %d, want none", *r)
	}
	if r := s.rate("c", t0.Add(2*time.Second), 5e9+1e9, nil); r == nil || *r != 5e8 {
		t.Errorf("1 s of CPU over 2 s: %v, want 500000000 nano-cores", r)
	}
	if r := s.rate("d", t0, 1, ptr.To[uint64](42)); r == nil || *r != 42 {
		t.Errorf("first sample with the runtime's rate: %v, want 42", r)
	}
	if r := s.rate("c", t0.Add(3*time.Second), 1, nil); r != nil {
		t.Errorf("a counter that went back: %d, want none", *r)
	}
	s.rate("e", t0.Add(20*time.Minute), 1, nil)
	if _, ok := s.m["d"]; ok {
		t.Error("a key not sampled for 20 minutes is kept")
	}
}

// TestStatValue reads cgroup "key value" files.
func TestStatValue(t *testing.T) {
	b := []byte("cache 4096\nrss 8192\ntotal_rss 12288\ntotal_inactive_file 100\n")
	for key, want := range map[string]uint64{"rss": 8192, "total_rss": 12288, "total_inactive_file": 100, "absent": 0} {
		if got := statValue(b, key); got != want {
			t.Errorf("%s = %d, want %d", key, got, want)
		}
	}
}
