package cli

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseFileSpec is kubectl's TestExtractFileSpec.
func TestParseFileSpec(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want fileSpec
		err  error
	}{
		{arg: "namespace/pod:/some/file", want: fileSpec{namespace: "namespace", pod: "pod", file: "/some/file"}},
		{arg: "pod:/some/file", want: fileSpec{pod: "pod", file: "/some/file"}},
		{arg: "pod:/some/dir/", want: fileSpec{pod: "pod", file: "/some/dir"}},
		{arg: "/some/file", want: fileSpec{file: "/some/file"}},
		{arg: "./dir/", want: fileSpec{file: "./dir"}},
		{arg: ":file/not/allowed", err: errFileSpecFormat},
		{arg: "some:bad:spec", want: fileSpec{pod: "some", file: "bad:spec"}},
		{arg: "namespace/pod/invalid:/some/file", err: errFileSpecFormat},
		{arg: "pod:", want: fileSpec{pod: "pod"}},
	} {
		got, err := parseFileSpec(tc.arg)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("parseFileSpec(%q) = %+v, %v; want %+v, %v", tc.arg, got, err, tc.want, tc.err)
		}
	}
}

// TestStripPathShortcuts is kubectl's.
func TestStripPathShortcuts(t *testing.T) {
	for in, want := range map[string]string{
		"test/file": "test/file", "../test/file": "test/file", "../../test/file": "test/file",
		"../test/../file": "test/../file", "/test/file": "test/file", "..": "", ".": "", "": "",
	} {
		if got := stripPathShortcuts(in); got != want {
			t.Errorf("stripPathShortcuts(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTarRoundTrip archives a tree as copying it into a container does
// and unpacks it as copying it out does: files, modes, an empty directory
// and a symbolic link (skipped with kubectl's warning) come back.
func TestTarRoundTrip(t *testing.T) {
	src := filepath.Join(t.TempDir(), "site")
	mustWrite(t, filepath.Join(src, "index.html"), "<h1>hi</h1>\n", 0o644)
	mustWrite(t, filepath.Join(src, "bin", "run.sh"), "#!/bin/sh\n", 0o755)
	if err := os.MkdirAll(filepath.Join(src, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("index.html", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := makeTar(src, "/usr/share/html", &archive); err != nil {
		t.Fatal(err)
	}
	// tar -C /usr/share unpacks it: its names are under html.
	names := tarNames(t, archive.Bytes())
	for _, want := range []string{"html/index.html", "html/bin/run.sh", "html/empty", "html/link"} {
		if !names[want] {
			t.Errorf("archive names %v, missing %q", names, want)
		}
	}

	// As tar cf - /usr/share/html writes it, without the leading slash.
	var remote bytes.Buffer
	tw := tar.NewWriter(&remote)
	for name, body := range map[string]string{"usr/share/html/index.html": "<h1>hi</h1>\n", "usr/share/html/bin/run.sh": "#!/bin/sh\n"} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "usr/share/html/link", Linkname: "index.html", Typeflag: tar.TypeSymlink}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cp := &copier{a: &app{stderr: &stderr}, namespace: "default", pod: "web"}
	dest := filepath.Join(t.TempDir(), "copy")
	if err := cp.untar(&remote, "usr/share/html", "/usr/share/html", dest); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "bin", "run.sh")); err != nil || string(b) != "#!/bin/sh\n" {
		t.Errorf("bin/run.sh = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "index.html")); err != nil || string(b) != "<h1>hi</h1>\n" {
		t.Errorf("index.html = %q, %v", b, err)
	}
	want := `warning: skipping symlink: "` + filepath.Join(dest, "link") + `" -> "index.html" (consider using "podsyncctl exec -n "default" "web" -- tar cf - "/usr/share/html" | tar xf -")`
	if got := strings.TrimSpace(stderr.String()); got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

// TestUntarRefusesEscapes: an archive from a container cannot write
// outside the destination, and one whose names are not under the source
// is corrupted, as kubectl has it.
func TestUntarRefusesEscapes(t *testing.T) {
	archive := func(name string) *bytes.Buffer {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		return &b
	}
	base := t.TempDir()
	dest := filepath.Join(base, "dest")
	var stderr bytes.Buffer
	cp := &copier{a: &app{stderr: &stderr}}
	if err := cp.untar(archive("data/../../../escaped"), "data", "/data", dest); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, "escaped")); !os.IsNotExist(err) {
		t.Errorf("the archive wrote outside the destination: %v", err)
	}
	if !strings.Contains(stderr.String(), "is outside target destination, skipping") {
		t.Errorf("stderr = %q, want the warning", stderr.String())
	}
	if err := cp.untar(archive("etc/passwd"), "data", "/data", dest); err == nil || err.Error() != "tar contents corrupted" {
		t.Errorf("untar of another tree: %v, want tar contents corrupted", err)
	}
}

// TestCpUsage: kubectl's messages for the wrong file specs, before any
// call to podsyncd.
func TestCpUsage(t *testing.T) {
	env := map[string]string{"PODSYNC_ADDRESS": "unix:///nonexistent/podsync.sock"}
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"cp", "a"}, ExitUsage, "error: source and destination are required"},
		{[]string{"cp", "web:/a", "db:/b"}, ExitFailure, "error: one of src or dest must be a local file specification"},
		{[]string{"cp", "/a", "/b"}, ExitFailure, "error: one of src or dest must be a remote file specification"},
		{[]string{"cp", ":/a", "/b"}, ExitFailure, "error: filespec must match the canonical format: [[namespace/]pod:]file/path"},
		{[]string{"cp", "web:", "/b"}, ExitFailure, "error: filepath can not be empty"},
		{[]string{"cp", missing, "web:/b"}, ExitFailure, "error: " + missing + " doesn't exist in local filesystem"},
	} {
		r := runCLI(t, env, "", tc.args...)
		if r.code != tc.code || !strings.HasPrefix(r.stderr, tc.msg+"\n") {
			t.Errorf("%v: exit %d, stderr %q; want %d, %q", tc.args, r.code, r.stderr, tc.code, tc.msg)
		}
	}
}

func mustWrite(t *testing.T, name, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func tarNames(t *testing.T, b []byte) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names[h.Name] = true
	}
	return names
}
