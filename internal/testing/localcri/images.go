package localcri

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Images that every instance holds, imported at start and also served by its
// registry (under the same repository and tag, see Instance.Registry).
const (
	// PauseImage is the sandbox image: the static program in
	// internal/testing/localcri/pause at /pause. It sleeps until SIGTERM or SIGINT,
	// exits 0, and reaps zombies.
	PauseImage = "registry.local/pause:local"
	// BusyboxImage holds Debian's static busybox at /bin/busybox with a
	// symlink /bin/<applet> for every applet. Its default command (no
	// entrypoint) runs until SIGTERM or SIGINT and then exits 0 promptly,
	// unlike busybox sleep as PID 1, which ignores SIGTERM: see
	// BusyboxDefaultCommand. Set Command to run anything else.
	BusyboxImage = "registry.local/busybox:local"
)

// BusyboxDefaultCommand is the default command (image Cmd) of BusyboxImage.
var BusyboxDefaultCommand = []string{"/bin/sh", "-c", `trap "exit 0" TERM INT; while :; do sleep 1 & wait; done`}

// imageFormat changes whenever the way images are built changes, so that
// cached tarballs are rebuilt.
const imageFormat = "localcri-images-v1"

// epoch is the creation time of every file and image built here, so that
// identical inputs give identical digests.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Images is a built set of the local images.
type Images struct {
	// Key is the hash of the inputs the images were built from.
	Key string
	// Tar is an OCI image-layout tarball holding every image, each named by
	// the io.containerd.image.name annotation; `ctr images import` takes it.
	Tar string
	// Layout is the same OCI image layout as a directory.
	Layout string
	// Refs are the image names, e.g. PauseImage and BusyboxImage.
	Refs []string
	// Cached is true when the images came from the cache unchanged.
	Cached bool
}

// imageInputs are the files the images are built from.
type imageInputs struct {
	pause   []byte   // static pause binary
	busybox []byte   // static busybox binary
	applets []string // busybox applet names
}

// BuildImages returns the local images, building them into
// <toolsDir>/images/<key>/ unless a build with the same inputs (the pause
// program's source, the Go version, the busybox binary) is cached there.
// repoDir is the podsync checkout holding internal/testing/localcri/pause.
func BuildImages(ctx context.Context, log *zap.Logger, repoDir, toolsDir string) (*Images, error) {
	if log == nil {
		log = zap.NewNop()
	}
	pauseDir := filepath.Join(repoDir, "internal", "testing", "localcri", "pause")
	gocmd, err := goCommand()
	if err != nil {
		return nil, err
	}
	gover, err := runCommand(ctx, nil, repoDir, gocmd, "env", "GOVERSION")
	if err != nil {
		return nil, fmt.Errorf("go version: %w", err)
	}
	busybox, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, fmt.Errorf("read busybox: %w", err)
	}
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%s\n%s\n%s\n", imageFormat, runtime.GOARCH, strings.TrimSpace(string(gover)))
	if err := hashDir(h, pauseDir); err != nil {
		return nil, err
	}
	h.Write(busybox)
	key := hex.EncodeToString(h.Sum(nil))[:16]

	dir := filepath.Join(toolsDir, "images", key)
	imgs := &Images{
		Key:    key,
		Tar:    filepath.Join(dir, "images.tar"),
		Layout: filepath.Join(dir, "layout"),
		Refs:   []string{PauseImage, BusyboxImage},
	}
	if _, err := os.Stat(imgs.Tar); err == nil {
		imgs.Cached = true
		return imgs, nil
	}
	lock, err := lockFile(ctx, dir+".lock")
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	if _, err := os.Stat(imgs.Tar); err == nil {
		imgs.Cached = true
		return imgs, nil
	}
	log.Info("building local images", zap.String("dir", dir))
	if err := buildImageDir(ctx, dir, repoDir, gocmd, busybox); err != nil {
		return nil, err
	}
	return imgs, nil
}

// buildImageDir builds the image directory dir (<tools>/images/<key>) from
// the pause program in repoDir, built with gocmd, and the busybox binary.
// It builds them in a temporary directory beside dir and renames it to
// dir at the end, so that dir holds a complete build or none.
func buildImageDir(ctx context.Context, dir, repoDir, gocmd string, busybox []byte) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return fmt.Errorf("create image build dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	pauseBin := filepath.Join(tmp, "pause")
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if _, err := runCommand(ctx, env, repoDir, gocmd, "build", "-trimpath", "-ldflags=-s -w", "-o", pauseBin, "./internal/testing/localcri/pause"); err != nil {
		return fmt.Errorf("build pause: %w", err)
	}
	pause, err := os.ReadFile(pauseBin)
	if err != nil {
		return fmt.Errorf("read pause: %w", err)
	}
	list, err := runCommand(ctx, nil, "", busyboxPath, "--list")
	if err != nil {
		return fmt.Errorf("list busybox applets: %w", err)
	}
	in := imageInputs{pause: pause, busybox: busybox, applets: strings.Fields(string(list))}
	if err := writeImages(in, filepath.Join(tmp, "layout"), filepath.Join(tmp, "images.tar")); err != nil {
		return err
	}
	if err := os.Remove(pauseBin); err != nil {
		return fmt.Errorf("remove pause binary: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("open up image dir: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clean %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("store images: %w", err)
	}
	return nil
}

// hashDir adds the names and contents of the regular files in dir to h.
func hashDir(h io.Writer, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("read %s: %w", e.Name(), err)
		}
		_, _ = fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		_, _ = h.Write(b)
	}
	return nil
}

// namedImage is an image and its full name.
type namedImage struct {
	ref string
	img v1.Image
}

// buildImages makes the images from their inputs, in memory.
func buildImages(in imageInputs) ([]namedImage, error) {
	pauseLayer, err := layerOf([]tarEntry{
		{name: "pause", mode: 0o755, data: in.pause},
	})
	if err != nil {
		return nil, fmt.Errorf("pause layer: %w", err)
	}
	pause, err := imageOf(pauseLayer, v1.Config{
		Entrypoint: []string{"/pause"},
		WorkingDir: "/",
	})
	if err != nil {
		return nil, fmt.Errorf("pause image: %w", err)
	}

	entries := busyboxEntries(in.busybox, in.applets)
	bbLayer, err := layerOf(entries)
	if err != nil {
		return nil, fmt.Errorf("busybox layer: %w", err)
	}
	bb, err := imageOf(bbLayer, v1.Config{
		Cmd:        BusyboxDefaultCommand,
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		WorkingDir: "/",
	})
	if err != nil {
		return nil, fmt.Errorf("busybox image: %w", err)
	}
	return []namedImage{{ref: PauseImage, img: pause}, {ref: BusyboxImage, img: bb}}, nil
}

// writeImages builds the images and writes them as an OCI image layout
// directory and as a tarball of that directory.
func writeImages(in imageInputs, layoutDir, tarPath string) error {
	imgs, err := buildImages(in)
	if err != nil {
		return err
	}
	return writeLayout(imgs, layoutDir, tarPath)
}

// writeLayout writes imgs as an OCI image layout directory, each named by
// its io.containerd.image.name annotation, and as a tarball of it.
func writeLayout(imgs []namedImage, layoutDir, tarPath string) error {
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return fmt.Errorf("create image layout: %w", err)
	}
	for _, ni := range imgs {
		tag := ni.ref[strings.LastIndex(ni.ref, ":")+1:]
		err := p.AppendImage(ni.img,
			layout.WithAnnotations(map[string]string{
				"io.containerd.image.name":          ni.ref,
				"org.opencontainers.image.ref.name": tag,
			}),
			layout.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}),
		)
		if err != nil {
			return fmt.Errorf("write %s to layout: %w", ni.ref, err)
		}
	}
	if err := tarDir(layoutDir, tarPath); err != nil {
		return fmt.Errorf("write image tarball: %w", err)
	}
	return nil
}

// LayoutImages reads the images of an OCI image layout written by
// BuildImages, keyed by their full names.
func LayoutImages(dir string) (map[string]v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("open image layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read image index: %w", err)
	}
	out := make(map[string]v1.Image, len(m.Manifests))
	for _, d := range m.Manifests {
		ref := d.Annotations["io.containerd.image.name"]
		if ref == "" {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("read image %s: %w", ref, err)
		}
		out[ref] = img
	}
	return out, nil
}

// tarEntry is one file, directory or symlink of a layer.
type tarEntry struct {
	name string
	mode int64
	data []byte
	dir  bool
	link string
}

// layerOf makes a gzip-compressed OCI layer, identical for identical entries.
func layerOf(entries []tarEntry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case e.dir:
			hdr.Typeflag = tar.TypeDir
		case e.link != "":
			hdr.Typeflag = tar.TypeSymlink
			hdr.Linkname = e.link
			hdr.Mode = 0o777
		default:
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("write header %s: %w", e.name, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, fmt.Errorf("write %s: %w", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer tar: %w", err)
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// imageOf makes a single-layer OCI image for linux/GOARCH with cfg.
func imageOf(layer v1.Layer, cfg v1.Config) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "localcri"},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = runtime.GOARCH
	cf.OS = "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

// tarDir writes the regular files and directories under dir to a tarball
// at path, in a stable order, via a temporary file.
func tarDir(dir, path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp) }()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.ModTime = epoch
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = src.Close() }()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		_ = f.Close()
		return err
	}
	if err := tw.Close(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// pushImages stores the local images in the registry.
func (i *Instance) pushImages(ctx context.Context) error {
	imgs, err := LayoutImages(i.images.Layout)
	if err != nil {
		return err
	}
	for ref, img := range imgs {
		if err := i.reg.Push(ctx, strings.TrimPrefix(ref, "registry.local/"), img); err != nil {
			return err
		}
	}
	return nil
}

// importImages imports the local images.
func (i *Instance) importImages(ctx context.Context) error {
	return i.importTar(ctx, i.images.Tar, i.images.Refs)
}

// importTar imports an image tarball with ctr and waits until CRI lists
// every image of refs.
func (i *Instance) importTar(ctx context.Context, tarPath string, refs []string) error {
	cmd := i.CtrCommand("images", "import", tarPath)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ctr images import: %w: %s", err, tail(out.String(), 2000))
	}
	conn, err := dialCRI(i.rec.Socket)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	is := runtimeapi.NewImageServiceClient(conn)
	return poll(ctx, 50*time.Millisecond, func() (bool, error) {
		for _, ref := range refs {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := is.ImageStatus(cctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
			cancel()
			if err != nil || resp.GetImage() == nil {
				return false, nil
			}
		}
		return true, nil
	})
}
