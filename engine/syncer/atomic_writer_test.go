package syncer

// The tables of TestValidatePath, TestWriteOnce, TestUpdate and
// TestMultipleUpdates are the kubelet's (pkg/volume/util/
// atomic_writer_test.go, Kubernetes v1.37.2); the loops check podsync's
// writer the same way.

import (
	"encoding/base64"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/validation"
)

func TestAtomicWriterValidatePath(t *testing.T) {
	maxPath := strings.Repeat("a", validation.MaxPathBytes+1)
	maxFile := strings.Repeat("a", validation.MaxFileNameBytes+1)

	cases := []struct {
		name  string
		path  string
		valid bool
	}{
		{
			name:  "valid 1",
			path:  "i/am/well/behaved.txt",
			valid: true,
		},
		{
			name:  "valid 2",
			path:  "keepyourheaddownandfollowtherules.txt",
			valid: true,
		},
		{
			name:  "max path length",
			path:  maxPath,
			valid: false,
		},
		{
			name:  "max file length",
			path:  maxFile,
			valid: false,
		},
		{
			name:  "absolute failure",
			path:  "/dev/null",
			valid: false,
		},
		{
			name:  "reserved path",
			path:  "..sneaky.txt",
			valid: false,
		},
		{
			name:  "contains doubledot 1",
			path:  "hello/there/../../../../../../etc/passwd",
			valid: false,
		},
		{
			name:  "contains doubledot 2",
			path:  "hello/../etc/somethingbad",
			valid: false,
		},
		{
			name:  "empty",
			path:  "",
			valid: false,
		},
	}

	for _, tc := range cases {
		err := checkPayloadPath(tc.path)
		if tc.valid && err != nil {
			t.Errorf("%v: unexpected failure: %v", tc.name, err)
		}
		if !tc.valid && !errors.Is(err, errdefs.ErrInvalidSpec) {
			t.Errorf("%v: %v, want errdefs.ErrInvalidSpec", tc.name, err)
		}
	}
}

func TestAtomicWriterWriteOnce(t *testing.T) {
	// $1 if you can tell me what this binary is
	encodedMysteryBinary := `f0VMRgIBAQAAAAAAAAAAAAIAPgABAAAAeABAAAAAAABAAAAAAAAAAAAAAAAAAAAAAAAAAEAAOAAB
AAAAAAAAAAEAAAAFAAAAAAAAAAAAAAAAAEAAAAAAAAAAQAAAAAAAfQAAAAAAAAB9AAAAAAAAAAAA
IAAAAAAAsDyZDwU=`

	mysteryBinaryBytes := make([]byte, base64.StdEncoding.DecodedLen(len(encodedMysteryBinary)))
	numBytes, err := base64.StdEncoding.Decode(mysteryBinaryBytes, []byte(encodedMysteryBinary))
	if err != nil {
		t.Fatalf("Unexpected error decoding binary payload: %v", err)
	}

	if numBytes != 125 {
		t.Fatalf("Unexpected decoded binary size: expected 125, got %v", numBytes)
	}

	cases := []struct {
		name    string
		payload map[string]criconfig.VolumeFile
		success bool
	}{
		{
			name: "invalid payload 1",
			payload: map[string]criconfig.VolumeFile{
				"foo":        {Mode: 0644, Data: []byte("foo")},
				"..bar":      {Mode: 0644, Data: []byte("bar")},
				"binary.bin": {Mode: 0644, Data: mysteryBinaryBytes},
			},
			success: false,
		},
		{
			name: "invalid payload 2",
			payload: map[string]criconfig.VolumeFile{
				"foo/../bar": {Mode: 0644, Data: []byte("foo")},
			},
			success: false,
		},
		{
			name: "basic 1",
			payload: map[string]criconfig.VolumeFile{
				"foo": {Mode: 0644, Data: []byte("foo")},
				"bar": {Mode: 0644, Data: []byte("bar")},
			},
			success: true,
		},
		{
			name: "basic 2",
			payload: map[string]criconfig.VolumeFile{
				"binary.bin":  {Mode: 0644, Data: mysteryBinaryBytes},
				".binary.bin": {Mode: 0644, Data: mysteryBinaryBytes},
			},
			success: true,
		},
		{
			name: "basic mode 1",
			payload: map[string]criconfig.VolumeFile{
				"foo": {Mode: 0777, Data: []byte("foo")},
				"bar": {Mode: 0400, Data: []byte("bar")},
			},
			success: true,
		},
		{
			name: "dotfiles",
			payload: map[string]criconfig.VolumeFile{
				"foo":           {Mode: 0644, Data: []byte("foo")},
				"bar":           {Mode: 0644, Data: []byte("bar")},
				".dotfile":      {Mode: 0644, Data: []byte("dotfile")},
				".dotfile.file": {Mode: 0644, Data: []byte("dotfile.file")},
			},
			success: true,
		},
		{
			name: "dotfiles mode",
			payload: map[string]criconfig.VolumeFile{
				"foo":           {Mode: 0407, Data: []byte("foo")},
				"bar":           {Mode: 0440, Data: []byte("bar")},
				".dotfile":      {Mode: 0777, Data: []byte("dotfile")},
				".dotfile.file": {Mode: 0666, Data: []byte("dotfile.file")},
			},
			success: true,
		},
		{
			name: "subdirectories 1",
			payload: map[string]criconfig.VolumeFile{
				"foo/bar.txt": {Mode: 0644, Data: []byte("foo/bar")},
				"bar/zab.txt": {Mode: 0644, Data: []byte("bar/zab.txt")},
			},
			success: true,
		},
		{
			name: "subdirectories mode 1",
			payload: map[string]criconfig.VolumeFile{
				"foo/bar.txt": {Mode: 0400, Data: []byte("foo/bar")},
				"bar/zab.txt": {Mode: 0644, Data: []byte("bar/zab.txt")},
			},
			success: true,
		},
		{
			name: "subdirectories 2",
			payload: map[string]criconfig.VolumeFile{
				"foo//bar.txt":      {Mode: 0644, Data: []byte("foo//bar")},
				"bar///bar/zab.txt": {Mode: 0644, Data: []byte("bar/../bar/zab.txt")},
			},
			success: true,
		},
		{
			name: "subdirectories 3",
			payload: map[string]criconfig.VolumeFile{
				"foo/bar.txt":      {Mode: 0644, Data: []byte("foo/bar")},
				"bar/zab.txt":      {Mode: 0644, Data: []byte("bar/zab.txt")},
				"foo/blaz/bar.txt": {Mode: 0644, Data: []byte("foo/blaz/bar")},
				"bar/zib/zab.txt":  {Mode: 0644, Data: []byte("bar/zib/zab.txt")},
			},
			success: true,
		},
		{
			name: "kitchen sink",
			payload: map[string]criconfig.VolumeFile{
				"foo.log":                           {Mode: 0644, Data: []byte("foo")},
				"bar.zap":                           {Mode: 0644, Data: []byte("bar")},
				".dotfile":                          {Mode: 0644, Data: []byte("dotfile")},
				"foo/bar.txt":                       {Mode: 0644, Data: []byte("foo/bar")},
				"bar/zab.txt":                       {Mode: 0644, Data: []byte("bar/zab.txt")},
				"foo/blaz/bar.txt":                  {Mode: 0644, Data: []byte("foo/blaz/bar")},
				"bar/zib/zab.txt":                   {Mode: 0400, Data: []byte("bar/zib/zab.txt")},
				"1/2/3/4/5/6/7/8/9/10/.dotfile.lib": {Mode: 0777, Data: []byte("1-2-3-dotfile")},
			},
			success: true,
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			targetDir := t.TempDir()
			err := writeAtomic(targetDir, tc.payload)
			switch {
			case err != nil && tc.success:
				t.Fatalf("unexpected error writing payload: %v", err)
			case err == nil && !tc.success:
				t.Fatal("unexpected success")
			case err != nil:
				return
			}
			checkVolumeContents(t, targetDir, tc.payload)
		})
	}
}

func TestAtomicWriterUpdate(t *testing.T) {
	cases := []struct {
		name        string
		first       map[string]criconfig.VolumeFile
		next        map[string]criconfig.VolumeFile
		shouldWrite bool
	}{
		{
			name: "update",
			first: map[string]criconfig.VolumeFile{
				"foo": {Mode: 0644, Data: []byte("foo")},
				"bar": {Mode: 0644, Data: []byte("bar")},
			},
			next: map[string]criconfig.VolumeFile{
				"foo": {Mode: 0644, Data: []byte("foo2")},
				"bar": {Mode: 0640, Data: []byte("bar2")},
			},
			shouldWrite: true,
		},
		{
			name: "no update",
			first: map[string]criconfig.VolumeFile{
				"foo": {Mode: 0644, Data: []byte("foo")},
				"bar": {Mode: 0644, Data: []byte("bar")},
			},
			next: map[string]criconfig.VolumeFile{
				"foo": {Mode: 0644, Data: []byte("foo")},
				"bar": {Mode: 0644, Data: []byte("bar")},
			},
			shouldWrite: false,
		},
		{
			name: "no update 2",
			first: map[string]criconfig.VolumeFile{
				"foo/bar.txt": {Mode: 0644, Data: []byte("foo")},
				"bar/zab.txt": {Mode: 0644, Data: []byte("bar")},
			},
			next: map[string]criconfig.VolumeFile{
				"foo/bar.txt": {Mode: 0644, Data: []byte("foo")},
				"bar/zab.txt": {Mode: 0644, Data: []byte("bar")},
			},
			shouldWrite: false,
		},
		{
			name: "add 1",
			first: map[string]criconfig.VolumeFile{
				"foo/bar.txt": {Mode: 0644, Data: []byte("foo")},
				"bar/zab.txt": {Mode: 0644, Data: []byte("bar")},
			},
			next: map[string]criconfig.VolumeFile{
				"foo/bar.txt": {Mode: 0644, Data: []byte("foo")},
				"bar/zab.txt": {Mode: 0644, Data: []byte("bar")},
				"blu/zip.txt": {Mode: 0644, Data: []byte("zip")},
			},
			shouldWrite: true,
		},
		{
			name: "add 2",
			first: map[string]criconfig.VolumeFile{
				"foo/bar.txt": {Mode: 0644, Data: []byte("foo")},
				"bar/zab.txt": {Mode: 0644, Data: []byte("bar")},
			},
			next: map[string]criconfig.VolumeFile{
				"foo/bar.txt":             {Mode: 0644, Data: []byte("foo")},
				"bar/zab.txt":             {Mode: 0644, Data: []byte("bar")},
				"blu/two/2/3/4/5/zip.txt": {Mode: 0644, Data: []byte("zip")},
			},
			shouldWrite: true,
		},
		{
			name: "add 3",
			first: map[string]criconfig.VolumeFile{
				"foo/bar.txt": {Mode: 0644, Data: []byte("foo")},
				"bar/zab.txt": {Mode: 0644, Data: []byte("bar")},
			},
			next: map[string]criconfig.VolumeFile{
				"foo/bar.txt":         {Mode: 0644, Data: []byte("foo")},
				"bar/zab.txt":         {Mode: 0644, Data: []byte("bar")},
				"bar/2/3/4/5/zip.txt": {Mode: 0644, Data: []byte("zip")},
			},
			shouldWrite: true,
		},
		{
			name: "delete 1",
			first: map[string]criconfig.VolumeFile{
				"foo/bar.txt": {Mode: 0644, Data: []byte("foo")},
				"bar/zab.txt": {Mode: 0644, Data: []byte("bar")},
			},
			next: map[string]criconfig.VolumeFile{
				"foo/bar.txt": {Mode: 0644, Data: []byte("foo")},
			},
			shouldWrite: true,
		},
		{
			name: "delete 2",
			first: map[string]criconfig.VolumeFile{
				"foo/bar.txt":       {Mode: 0644, Data: []byte("foo")},
				"bar/1/2/3/zab.txt": {Mode: 0644, Data: []byte("bar")},
			},
			next: map[string]criconfig.VolumeFile{
				"foo/bar.txt": {Mode: 0644, Data: []byte("foo")},
			},
			shouldWrite: true,
		},
		{
			name: "delete 3",
			first: map[string]criconfig.VolumeFile{
				"foo/bar.txt":       {Mode: 0644, Data: []byte("foo")},
				"bar/1/2/sip.txt":   {Mode: 0644, Data: []byte("sip")},
				"bar/1/2/3/zab.txt": {Mode: 0644, Data: []byte("bar")},
			},
			next: map[string]criconfig.VolumeFile{
				"foo/bar.txt":     {Mode: 0644, Data: []byte("foo")},
				"bar/1/2/sip.txt": {Mode: 0644, Data: []byte("sip")},
			},
			shouldWrite: true,
		},
		{
			name: "delete 4",
			first: map[string]criconfig.VolumeFile{
				"foo/bar.txt":            {Mode: 0644, Data: []byte("foo")},
				"bar/1/2/sip.txt":        {Mode: 0644, Data: []byte("sip")},
				"bar/1/2/3/4/5/6zab.txt": {Mode: 0644, Data: []byte("bar")},
			},
			next: map[string]criconfig.VolumeFile{
				"foo/bar.txt":     {Mode: 0644, Data: []byte("foo")},
				"bar/1/2/sip.txt": {Mode: 0644, Data: []byte("sip")},
			},
			shouldWrite: true,
		},
		{
			name: "delete all",
			first: map[string]criconfig.VolumeFile{
				"foo/bar.txt":            {Mode: 0644, Data: []byte("foo")},
				"bar/1/2/sip.txt":        {Mode: 0644, Data: []byte("sip")},
				"bar/1/2/3/4/5/6zab.txt": {Mode: 0644, Data: []byte("bar")},
			},
			next:        map[string]criconfig.VolumeFile{},
			shouldWrite: true,
		},
		{
			name: "add and delete 1",
			first: map[string]criconfig.VolumeFile{
				"foo/bar.txt": {Mode: 0644, Data: []byte("foo")},
			},
			next: map[string]criconfig.VolumeFile{
				"bar/baz.txt": {Mode: 0644, Data: []byte("baz")},
			},
			shouldWrite: true,
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			targetDir := t.TempDir()
			if err := writeAtomic(targetDir, tc.first); err != nil {
				t.Fatal(err)
			}
			checkVolumeContents(t, targetDir, tc.first)
			before := currentData(t, targetDir)
			if err := writeAtomic(targetDir, tc.next); err != nil {
				t.Fatal(err)
			}
			checkVolumeContents(t, targetDir, tc.next)
			if wrote := currentData(t, targetDir) != before; wrote != tc.shouldWrite {
				t.Errorf("a new ..data directory: %v, want %v", wrote, tc.shouldWrite)
			}
		})
	}
}

func TestAtomicWriterMultipleUpdates(t *testing.T) {
	cases := []struct {
		name     string
		payloads []map[string]criconfig.VolumeFile
	}{
		{
			name: "update 1",
			payloads: []map[string]criconfig.VolumeFile{
				{
					"foo": {Mode: 0644, Data: []byte("foo")},
					"bar": {Mode: 0644, Data: []byte("bar")},
				},
				{
					"foo": {Mode: 0400, Data: []byte("foo2")},
					"bar": {Mode: 0400, Data: []byte("bar2")},
				},
				{
					"foo": {Mode: 0600, Data: []byte("foo3")},
					"bar": {Mode: 0600, Data: []byte("bar3")},
				},
			},
		},
		{
			name: "update 2",
			payloads: []map[string]criconfig.VolumeFile{
				{
					"foo/bar.txt": {Mode: 0644, Data: []byte("foo/bar")},
					"bar/zab.txt": {Mode: 0644, Data: []byte("bar/zab.txt")},
				},
				{
					"foo/bar.txt": {Mode: 0644, Data: []byte("foo/bar2")},
					"bar/zab.txt": {Mode: 0400, Data: []byte("bar/zab.txt2")},
				},
			},
		},
		{
			name: "clear sentinel",
			payloads: []map[string]criconfig.VolumeFile{
				{
					"foo": {Mode: 0644, Data: []byte("foo")},
					"bar": {Mode: 0644, Data: []byte("bar")},
				},
				{
					"foo": {Mode: 0644, Data: []byte("foo2")},
					"bar": {Mode: 0644, Data: []byte("bar2")},
				},
				{
					"foo": {Mode: 0644, Data: []byte("foo3")},
					"bar": {Mode: 0644, Data: []byte("bar3")},
				},
				{
					"foo": {Mode: 0644, Data: []byte("foo4")},
					"bar": {Mode: 0644, Data: []byte("bar4")},
				},
			},
		},
		{
			name: "subdirectories 2",
			payloads: []map[string]criconfig.VolumeFile{
				{
					"foo/bar.txt":      {Mode: 0644, Data: []byte("foo/bar")},
					"bar/zab.txt":      {Mode: 0644, Data: []byte("bar/zab.txt")},
					"foo/blaz/bar.txt": {Mode: 0644, Data: []byte("foo/blaz/bar")},
					"bar/zib/zab.txt":  {Mode: 0644, Data: []byte("bar/zib/zab.txt")},
				},
				{
					"foo/bar.txt":      {Mode: 0644, Data: []byte("foo/bar2")},
					"bar/zab.txt":      {Mode: 0644, Data: []byte("bar/zab.txt2")},
					"foo/blaz/bar.txt": {Mode: 0644, Data: []byte("foo/blaz/bar2")},
					"bar/zib/zab.txt":  {Mode: 0644, Data: []byte("bar/zib/zab.txt2")},
				},
			},
		},
		{
			name: "add 1",
			payloads: []map[string]criconfig.VolumeFile{
				{
					"foo/bar.txt":            {Mode: 0644, Data: []byte("foo/bar")},
					"bar//zab.txt":           {Mode: 0644, Data: []byte("bar/zab.txt")},
					"foo/blaz/bar.txt":       {Mode: 0644, Data: []byte("foo/blaz/bar")},
					"bar/zib////zib/zab.txt": {Mode: 0644, Data: []byte("bar/zib/zab.txt")},
				},
				{
					"foo/bar.txt":      {Mode: 0644, Data: []byte("foo/bar2")},
					"bar/zab.txt":      {Mode: 0644, Data: []byte("bar/zab.txt2")},
					"foo/blaz/bar.txt": {Mode: 0644, Data: []byte("foo/blaz/bar2")},
					"bar/zib/zab.txt":  {Mode: 0644, Data: []byte("bar/zib/zab.txt2")},
					"add/new/keys.txt": {Mode: 0644, Data: []byte("addNewKeys")},
				},
			},
		},
		{
			name: "add 2",
			payloads: []map[string]criconfig.VolumeFile{
				{
					"foo/bar.txt":      {Mode: 0644, Data: []byte("foo/bar2")},
					"bar/zab.txt":      {Mode: 0644, Data: []byte("bar/zab.txt2")},
					"foo/blaz/bar.txt": {Mode: 0644, Data: []byte("foo/blaz/bar2")},
					"bar/zib/zab.txt":  {Mode: 0644, Data: []byte("bar/zib/zab.txt2")},
					"add/new/keys.txt": {Mode: 0644, Data: []byte("addNewKeys")},
				},
				{
					"foo/bar.txt":       {Mode: 0644, Data: []byte("foo/bar2")},
					"bar/zab.txt":       {Mode: 0644, Data: []byte("bar/zab.txt2")},
					"foo/blaz/bar.txt":  {Mode: 0644, Data: []byte("foo/blaz/bar2")},
					"bar/zib/zab.txt":   {Mode: 0644, Data: []byte("bar/zib/zab.txt2")},
					"add/new/keys.txt":  {Mode: 0644, Data: []byte("addNewKeys")},
					"add/new/keys2.txt": {Mode: 0644, Data: []byte("addNewKeys2")},
					"add/new/keys3.txt": {Mode: 0644, Data: []byte("addNewKeys3")},
				},
			},
		},
		{
			name: "remove 1",
			payloads: []map[string]criconfig.VolumeFile{
				{
					"foo/bar.txt":         {Mode: 0644, Data: []byte("foo/bar")},
					"bar//zab.txt":        {Mode: 0644, Data: []byte("bar/zab.txt")},
					"foo/blaz/bar.txt":    {Mode: 0644, Data: []byte("foo/blaz/bar")},
					"zip/zap/zup/fop.txt": {Mode: 0644, Data: []byte("zip/zap/zup/fop.txt")},
				},
				{
					"foo/bar.txt": {Mode: 0644, Data: []byte("foo/bar2")},
					"bar/zab.txt": {Mode: 0644, Data: []byte("bar/zab.txt2")},
				},
				{
					"foo/bar.txt": {Mode: 0644, Data: []byte("foo/bar")},
				},
			},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			targetDir := t.TempDir()
			for _, payload := range tc.payloads {
				if err := writeAtomic(targetDir, payload); err != nil {
					t.Fatal(err)
				}
				checkVolumeContents(t, targetDir, payload)
			}
		})
	}
}

// checkVolumeContents checks the writer's layout in targetDir: "..data"
// links to a timestamped directory holding exactly payload (paths
// cleaned, content and modes), each top-level name is a link into
// "..data", and nothing else is there.
func checkVolumeContents(t *testing.T, targetDir string, payload map[string]criconfig.VolumeFile) {
	t.Helper()
	ts := currentData(t, targetDir)
	if !isTsDirName(ts) {
		t.Fatalf("..data links to %q, not a timestamped directory", ts)
	}
	observed := map[string]criconfig.VolumeFile{}
	tsPath := filepath.Join(targetDir, ts)
	err := filepath.WalkDir(tsPath, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			t.Errorf("%s is not a regular file", p)
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(tsPath, p)
		observed[rel] = criconfig.VolumeFile{Data: b, Mode: int32(fi.Mode().Perm())}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]criconfig.VolumeFile{}
	top := map[string]bool{dataDirName: true, ts: true}
	for k, v := range payload {
		k = filepath.Clean(k)
		want[k] = v
		first, _, _ := strings.Cut(k, "/")
		top[first] = true
	}
	if diff := cmp.Diff(want, observed); diff != "" {
		t.Errorf("payload in %s (-want +got):\n%s", ts, diff)
	}
	entries, err := os.ReadDir(targetDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if !top[name] {
			t.Errorf("stray entry %q in the volume", name)
			continue
		}
		if name == dataDirName || name == ts {
			continue
		}
		if target, err := os.Readlink(filepath.Join(targetDir, name)); err != nil || target != filepath.Join(dataDirName, name) {
			t.Errorf("%s links to %q (%v), want %s", name, target, err, filepath.Join(dataDirName, name))
		}
		delete(top, name)
	}
	for name := range maps.Keys(top) {
		if name != dataDirName && name != ts {
			t.Errorf("user-visible %q missing", name)
		}
	}
	for k, v := range want {
		if b, err := os.ReadFile(filepath.Join(targetDir, k)); err != nil || string(b) != string(v.Data) {
			t.Errorf("reading %s through the links: %q %v", k, b, err)
		}
	}
}

// currentData is the directory "..data" links to.
func currentData(t *testing.T, dir string) string {
	t.Helper()
	ts, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func file(data string, mode int32) criconfig.VolumeFile {
	return criconfig.VolumeFile{Data: []byte(data), Mode: mode}
}

// TestAtomicWriterModeChangeWrites: unlike the kubelet's, a change of mode
// alone is written (podsync compares modes too).
func TestAtomicWriterModeChangeWrites(t *testing.T) {
	dir := t.TempDir()
	if err := writeAtomic(dir, map[string]criconfig.VolumeFile{"a": file("1", 0o644)}); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(dir, map[string]criconfig.VolumeFile{"a": file("1", 0o600)}); err != nil {
		t.Fatal(err)
	}
	checkVolumeContents(t, dir, map[string]criconfig.VolumeFile{"a": file("1", 0o600)})
}

// TestAtomicWriterAfterUnexpectedExit is the kubelet's
// TestWriteAgainAfterUnexpectedExit with podsync's other interruptions:
// user-visible links gone, a "..data_tmp" link and a timestamped
// directory left by a write that never published.
func TestAtomicWriterAfterUnexpectedExit(t *testing.T) {
	payload := map[string]criconfig.VolumeFile{"foo": file("foo", 0o644), "bar": file("bar", 0o644)}
	for _, tc := range []struct {
		name     string
		simulate func(dir string) error
	}{
		{"process killed before creating user visible files", func(dir string) error {
			return errors.Join(os.RemoveAll(filepath.Join(dir, "foo")), os.RemoveAll(filepath.Join(dir, "bar")))
		}},
		{"process killed before publishing", func(dir string) error {
			ts := filepath.Join(dir, "..2020_01_02_03_04_05.42")
			return errors.Join(os.Mkdir(ts, 0o755), os.WriteFile(filepath.Join(ts, "foo"), []byte("half"), 0o644),
				os.Symlink("..2020_01_02_03_04_05.42", filepath.Join(dir, newDataDirName)))
		}},
		{"..data removed", func(dir string) error { return os.Remove(filepath.Join(dir, dataDirName)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := writeAtomic(dir, payload); err != nil {
				t.Fatal(err)
			}
			if err := tc.simulate(dir); err != nil {
				t.Fatal(err)
			}
			if err := writeAtomic(dir, payload); err != nil {
				t.Fatal(err)
			}
			checkVolumeContents(t, dir, payload)
		})
	}
}

// TestAtomicWriterReplacesOldLayout: the plain files and directories of
// podsync's earlier file-by-file writer become the writer's links.
func TestAtomicWriterReplacesOldLayout(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a", "d/b", "stale"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	payload := map[string]criconfig.VolumeFile{"a": file("new", 0o644), "d/b": file("new", 0o600)}
	if err := writeAtomic(dir, payload); err != nil {
		t.Fatal(err)
	}
	checkVolumeContents(t, dir, payload)
}

// TestAtomicWriterReaderNeverSeesHalf: a reader of a file through its
// link, while the writer swaps content in, sees the old content or the
// new, whole, never a mix, a short read or a missing file.
func TestAtomicWriterReaderNeverSeesHalf(t *testing.T) {
	dir := t.TempDir()
	a, b := strings.Repeat("a", 64<<10), strings.Repeat("b", 96<<10)
	if err := writeAtomic(dir, map[string]criconfig.VolumeFile{"labels": file(a, 0o644)}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	bad := make(chan string, 1)
	go func() {
		defer close(bad)
		for {
			select {
			case <-done:
				return
			default:
			}
			got, err := os.ReadFile(filepath.Join(dir, "labels"))
			if errors.Is(err, fs.ErrNotExist) {
				// The kubelet's window: the reader resolved ..data to the
				// payload directory a write has just swapped out and
				// removed. What it reads is never mixed.
				continue
			}
			if s := string(got); err != nil || (s != a && s != b) {
				bad <- "read " + strings.TrimSpace(s[:min(len(s), 8)]) + "…: " + errString(err)
				return
			}
		}
	}()
	for i := range 200 {
		content := a
		if i%2 == 0 {
			content = b
		}
		if err := writeAtomic(dir, map[string]criconfig.VolumeFile{"labels": file(content, 0o644)}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	if msg, ok := <-bad; ok {
		t.Error(msg)
	}
}

func errString(err error) string {
	if err == nil {
		return "a mix or a short read"
	}
	return err.Error()
}
