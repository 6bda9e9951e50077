package localcri

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// testInputs stand in for the pause and busybox binaries.
var testInputs = imageInputs{
	pause:   []byte("#!pause\n"),
	busybox: []byte("#!busybox\n"),
	applets: []string{"sh", "sleep", "echo", "busybox", "sh"},
}

func TestBuildImagesIsDeterministic(t *testing.T) {
	a, err := buildImages(testInputs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := buildImages(testInputs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		da, _ := a[i].img.Digest()
		db, _ := b[i].img.Digest()
		if da != db {
			t.Errorf("%s: digests differ between builds: %s %s", a[i].ref, da, db)
		}
	}
	other := testInputs
	other.busybox = []byte("#!other busybox\n")
	c, err := buildImages(other)
	if err != nil {
		t.Fatal(err)
	}
	db, _ := a[1].img.Digest()
	dc, _ := c[1].img.Digest()
	if db == dc {
		t.Error("a different busybox gives the same image digest")
	}
}

func TestImageConfigs(t *testing.T) {
	imgs, err := buildImages(testInputs)
	if err != nil {
		t.Fatal(err)
	}
	byRef := map[string]v1.Image{}
	for _, ni := range imgs {
		byRef[ni.ref] = ni.img
	}
	for ref, want := range map[string]v1.Config{
		PauseImage:   {Entrypoint: []string{"/pause"}, WorkingDir: "/"},
		BusyboxImage: {Cmd: BusyboxDefaultCommand, Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, WorkingDir: "/"},
	} {
		cf, err := byRef[ref].ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
			t.Errorf("%s: platform %s/%s", ref, cf.OS, cf.Architecture)
		}
		if diff := cmp.Diff(want, cf.Config); diff != "" {
			t.Errorf("%s config (-want +got):\n%s", ref, diff)
		}
		mt, _ := byRef[ref].MediaType()
		if mt != "application/vnd.oci.image.manifest.v1+json" {
			t.Errorf("%s: media type %s", ref, mt)
		}
	}

	layers, err := byRef[BusyboxImage].Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("busybox layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	entries := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h.Linkname
		if h.Name == "bin/busybox" {
			b, _ := io.ReadAll(tr)
			if string(b) != string(testInputs.busybox) || h.Mode != 0o755 {
				t.Errorf("bin/busybox: %q mode %o", b, h.Mode)
			}
		}
	}
	for _, a := range []string{"sh", "sleep", "echo"} {
		if entries["bin/"+a] != "busybox" {
			t.Errorf("bin/%s links to %q, want busybox", a, entries["bin/"+a])
		}
	}
	if _, ok := entries["tmp/"]; !ok {
		t.Error("no /tmp in the busybox image")
	}
}

func TestWriteImagesLayoutAndTarball(t *testing.T) {
	dir := t.TempDir()
	layoutDir, tarPath := filepath.Join(dir, "layout"), filepath.Join(dir, "images.tar")
	if err := writeImages(testInputs, layoutDir, tarPath); err != nil {
		t.Fatal(err)
	}
	imgs, err := LayoutImages(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for ref := range imgs {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	if diff := cmp.Diff([]string{BusyboxImage, PauseImage}, refs); diff != "" {
		t.Errorf("layout images (-want +got):\n%s", diff)
	}
	f, err := os.Open(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = true
	}
	for _, n := range []string{"oci-layout", "index.json", "blobs/", "blobs/sha256/"} {
		if !names[n] {
			t.Errorf("image tarball lacks %s", n)
		}
	}
}
