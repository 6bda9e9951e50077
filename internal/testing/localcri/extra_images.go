package localcri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ImageFile is a file, directory or symbolic link of an image built with
// WriteImageArchive.
type ImageFile struct {
	// Path is the file's path in the image, without a leading slash; a
	// directory's ends with a slash.
	Path string
	// Mode is the file's permission bits (and setuid, setgid, sticky).
	Mode int64
	// Data is a regular file's content.
	Data []byte
	// Link, if set, makes the file a symbolic link to Link.
	Link string
}

// ImageSpec is an image to build: its full name, its files (one layer)
// and its configuration (entrypoint, command, user, environment).
type ImageSpec struct {
	Ref    string
	Files  []ImageFile
	Config v1.Config
}

// image builds the image of s: one layer of its files, its config.
func (s ImageSpec) image() (v1.Image, error) {
	entries := make([]tarEntry, 0, len(s.Files))
	for _, f := range s.Files {
		entries = append(entries, tarEntry{name: f.Path, mode: f.Mode, data: f.Data, link: f.Link, dir: strings.HasSuffix(f.Path, "/")})
	}
	layer, err := layerOf(entries)
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", s.Ref, err)
	}
	img, err := imageOf(layer, s.Config)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", s.Ref, err)
	}
	return img, nil
}

// BusyboxFiles are the files of BusyboxImage: Debian's static busybox at
// /bin/busybox with a link /bin/<applet> for each applet, /etc/passwd and
// /etc/group with root and nobody, and /root, /tmp and /var; images built
// on busybox start from them.
func BusyboxFiles(ctx context.Context) ([]ImageFile, error) {
	busybox, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, fmt.Errorf("read busybox: %w", err)
	}
	list, err := runCommand(ctx, nil, "", busyboxPath, "--list")
	if err != nil {
		return nil, fmt.Errorf("list busybox applets: %w", err)
	}
	var out []ImageFile
	for _, e := range busyboxEntries(busybox, strings.Fields(string(list))) {
		out = append(out, ImageFile{Path: e.name, Mode: e.mode, Data: e.data, Link: e.link})
	}
	return out, nil
}

// busyboxEntries are the layer entries of a busybox root file system.
func busyboxEntries(busybox []byte, applets []string) []tarEntry {
	entries := []tarEntry{
		{name: "bin/", mode: 0o755, dir: true},
		{name: "bin/busybox", mode: 0o755, data: busybox},
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnogroup:x:65534:\n")},
		{name: "root/", mode: 0o700, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "var/", mode: 0o755, dir: true},
	}
	applets = slices.Clone(applets)
	slices.Sort(applets)
	for _, a := range slices.Compact(applets) {
		if a == "busybox" || a == "" || strings.Contains(a, "/") {
			continue
		}
		entries = append(entries, tarEntry{name: "bin/" + a, link: "busybox"})
	}
	return entries
}

// WriteImageArchive builds the images of specs and writes them as an OCI
// image layout directory and a tarball of it (tarPath), which
// Instance.ImportImages takes. Identical specs give identical digests.
func WriteImageArchive(specs []ImageSpec, layoutDir, tarPath string) error {
	var imgs []namedImage
	for _, s := range specs {
		img, err := s.image()
		if err != nil {
			return err
		}
		imgs = append(imgs, namedImage{ref: s.Ref, img: img})
	}
	return writeLayout(imgs, layoutDir, tarPath)
}

// ImportImages imports an image tarball (WriteImageArchive) into the
// instance's containerd and waits until CRI lists each of refs.
func (i *Instance) ImportImages(ctx context.Context, tarPath string, refs []string) error {
	return i.importTar(ctx, tarPath, refs)
}

// ServeImages builds the images of specs and serves them from the
// instance's registry under their own names: the registry of each name's
// host (registry.k8s.io, say) is mirrored to the local one, so that a pull
// of such a name (imagePullPolicy Always, an image volume's) succeeds
// here as it would on a machine that reaches that registry.
func (i *Instance) ServeImages(ctx context.Context, specs []ImageSpec) error {
	hosts := map[string]bool{}
	for _, s := range specs {
		host, repoTag, ok := strings.Cut(s.Ref, "/")
		if !ok || !strings.ContainsAny(host, ".:") {
			return fmt.Errorf("serve image %q: want a name with its registry's host", s.Ref)
		}
		img, err := s.image()
		if err != nil {
			return err
		}
		if err := i.reg.Push(ctx, repoTag, img); err != nil {
			return err
		}
		if !hosts[host] {
			hosts[host] = true
			d := i.path("certs.d", host)
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("create hosts dir: %w", err)
			}
			if err := os.WriteFile(filepath.Join(d, "hosts.toml"), hostsTOML(i.rec.RegistryAddr), 0o644); err != nil {
				return fmt.Errorf("mirror %s to the local registry: %w", host, err)
			}
		}
	}
	return nil
}
