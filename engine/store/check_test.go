package store

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsync/podsync/engine/errdefs"
)

// writeStore writes a store of several pages (pods with ConfigMaps, a
// revision log) at path and returns its bytes.
func writeStore(t *testing.T, path string) []byte {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		pod := testPod("default", fmt.Sprint("p", i), types.UID(fmt.Sprint("uid-", i)))
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprint("cm", i)},
			Data: map[string]string{"k": strings.Repeat(fmt.Sprint(i), 3000)}}
		if _, err := s.Put(PodRecord{Pod: pod, ConfigMaps: []*corev1.ConfigMap{cm}}); err != nil {
			t.Fatal(err)
		}
		for j := range 10 {
			if _, err := s.Append(event(pod, fmt.Sprint("E", j))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestOpenCorruptFile: a truncated, garbage or partly zeroed or
// overwritten store file makes Open fail with ErrStoreCorrupt, naming the
// file and what was found, without a panic or a fault, and without
// writing to the file.
func TestOpenCorruptFile(t *testing.T) {
	dir := t.TempDir()
	good := writeStore(t, filepath.Join(dir, "good.db"))
	const page = 4096
	if len(good) < 8*page {
		t.Fatalf("the store is %d bytes, want several pages", len(good))
	}
	// The page holding the first pod record, and the last page.
	recPage := bytes.Index(good, recordMagic) / page
	if recPage < 2 {
		t.Fatalf("no record page found")
	}
	// hwm is the end of the pages bbolt counts; the file may be longer.
	m0, err0 := decodeMeta(good[:page])
	m1, err1 := decodeMeta(good[page : 2*page])
	if err0 != nil || err1 != nil {
		t.Fatalf("meta pages: %v, %v", err0, err1)
	}
	hwm := int(max(m0.pgid, m1.pgid)) * page
	last := hwm/page - 1
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	overwrite := func(off int, b []byte) func([]byte) []byte {
		return func(d []byte) []byte { copy(d[off:], b); return d }
	}
	for _, tc := range []struct {
		name   string
		mutate func([]byte) []byte
		want   string
	}{
		{"truncated to half", func(d []byte) []byte { return d[:len(d)/2] }, "truncated"},
		{"truncated by one page", func(d []byte) []byte { return d[:hwm-page] }, "truncated"},
		{"truncated mid-page", func(d []byte) []byte { return d[:hwm-page/2] }, "truncated"},
		{"truncated to one page", func(d []byte) []byte { return d[:page] }, "truncated"},
		{"truncated to 100 bytes", func(d []byte) []byte { return d[:100] }, "too short"},
		{"garbage", func(d []byte) []byte { return garbage(len(d)) }, "no valid bbolt meta page"},
		{"text", func([]byte) []byte { return bytes.Repeat([]byte("not a store\n"), 1000) }, "no bbolt magic"},
		{"meta pages zeroed", overwrite(0, make([]byte, 2*page)), "no valid bbolt meta page"},
		{"both meta pages' checksums", func(d []byte) []byte {
			d[16+50] ^= 0xff
			d[page+16+50] ^= 0xff
			return d
		}, "checksum"},
		{"record page zeroed", overwrite(recPage*page, make([]byte, page)), "bbolt"},
		{"record page garbage", overwrite(recPage*page, garbage(page)), "bbolt"},
		{"record's fields overwritten", func(d []byte) []byte {
			i := bytes.Index(d, recordMagic) + len(recordMagic)
			copy(d[i:], "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01garbage")
			return d
		}, "pod uid"},
		{"record's magic overwritten", func(d []byte) []byte {
			copy(d[bytes.Index(d, recordMagic):], "\x00\x01\x02garbage")
			return d
		}, "pod uid"},
		{"last page zeroed", overwrite(last*page, make([]byte, page)), ""},
		{"every page from the third zeroed", func(d []byte) []byte {
			clear(d[2*page:])
			return d
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "podsync.db")
			data := tc.mutate(bytes.Clone(good))
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(data)
			s, err := Open(path, Options{})
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open of a corrupt file succeeded")
			}
			if !errors.Is(err, errdefs.ErrStoreCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open = %v, want ErrStoreCorrupt naming %s and %q", err, path, tc.want)
			}
			after, rerr := os.ReadFile(path)
			if rerr != nil || sha256.Sum256(after) != sum {
				t.Errorf("Open changed the corrupt file (%v)", rerr)
			}
		})
	}
}

// TestOpenRandomDamageNeverPanics damages a store at random places many
// times: Open either fails with ErrStoreCorrupt or opens a store whose
// every read works; it never panics or faults (either would end the test
// binary).
func TestOpenRandomDamageNeverPanics(t *testing.T) {
	good := writeStore(t, filepath.Join(t.TempDir(), "good.db"))
	rng := rand.New(rand.NewPCG(3, 4))
	path := filepath.Join(t.TempDir(), "podsync.db")
	iterations := 300
	if testing.Short() {
		iterations = 50
	}
	var corrupt int
	for i := range iterations {
		data := bytes.Clone(good)
		switch i % 3 {
		case 0: // a run of garbage
			off, n := rng.IntN(len(data)), 1+rng.IntN(512)
			for j := off; j < min(off+n, len(data)); j++ {
				data[j] = byte(rng.IntN(256))
			}
		case 1: // a zeroed page
			p := rng.IntN(len(data) / 4096)
			clear(data[p*4096 : (p+1)*4096])
		case 2: // a truncation
			data = data[:rng.IntN(len(data))]
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, Options{})
		if err != nil {
			if !errors.Is(err, errdefs.ErrStoreCorrupt) {
				t.Fatalf("iteration %d: Open = %v, want ErrStoreCorrupt", i, err)
			}
			corrupt++
			continue
		}
		if _, _, err := s.List(Filter{}); err != nil && !errors.Is(err, errdefs.ErrStoreCorrupt) {
			t.Errorf("iteration %d: List = %v", i, err)
		}
		if _, err := s.Since(s.CompactRevision()); err != nil {
			t.Errorf("iteration %d: Since = %v", i, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if corrupt == 0 {
		t.Errorf("no damage was found in %d iterations", iterations)
	}
}

// TestMoveAside: a corrupt file moved aside keeps its bytes under a
// timestamped name, and a new store opens in its place.
func TestMoveAside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podsync.db")
	junk := bytes.Repeat([]byte("junk"), 4096)
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); !errors.Is(err, errdefs.ErrStoreCorrupt) {
		t.Fatalf("Open = %v, want ErrStoreCorrupt", err)
	}
	to, err := MoveAside(path, t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := path + ".corrupt-20260102T030405Z"; to != want {
		t.Errorf("moved to %s, want %s", to, want)
	}
	if got, err := os.ReadFile(to); err != nil || !bytes.Equal(got, junk) {
		t.Errorf("the moved file: %v, want its bytes unchanged", err)
	}
	if _, err := MoveAside(path, t0); err == nil {
		t.Errorf("MoveAside of a missing file succeeded")
	}
	s := openAt(t, path, Options{})
	if s.Revision() != 0 {
		t.Errorf("the new store is at revision %d", s.Revision())
	}
}
