package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"go.uber.org/zap"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// The e2e images the focused tests run, by the exact names of
// k8s.io/kubernetes v1.37.2's test/utils/image/manifest.go. No registry is
// reachable here, so each is built from what the Kubernetes module ships
// (agnhost, nonewprivs' nnp, kitten's and nautilus's pages) on Debian's
// static busybox, and imported into every node's containerd.
const (
	AgnhostImage     = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	AgnhostPrevImage = "registry.k8s.io/e2e-test-images/agnhost:2.55"
	BusyboxImage     = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"
	NginxImage       = "registry.k8s.io/e2e-test-images/nginx:1.27.0-2"
	NginxNewImage    = "registry.k8s.io/e2e-test-images/nginx:1.28.0-2"
	NonRootImage     = "registry.k8s.io/e2e-test-images/nonroot:1.5"
	NonewprivsImage  = "registry.k8s.io/e2e-test-images/nonewprivs:1.4"
	KittenImage      = "registry.k8s.io/e2e-test-images/kitten:1.8"
	NautilusImage    = "registry.k8s.io/e2e-test-images/nautilus:1.8"
	PauseImage       = "registry.k8s.io/pause:3.10.2"
	// GlibcDNSTestingImage's tests run sh, hostname and hostname -f,
	// which busybox has.
	GlibcDNSTestingImage = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"
)

// bashStatic is Debian's static bash (package bash-static): the agnhost
// image has a bash, which probe tests run.
const bashStatic = "/bin/bash-static"

// curlStandIn is the agnhost stand-in's curl: a GET with busybox's wget,
// in the forms the e2e tests' hooks use; any other option is refused
// aloud rather than misread.
const curlStandIn = `#!/bin/sh
# podsync's stand-in for curl in the agnhost image: GET a URL with busybox wget.
out=-
url=
while [ $# -gt 0 ]; do
	case "$1" in
	-s | --silent | -sS) ;;
	-o) out=$2; shift ;;
	-*) echo "curl (podsync's conformance stand-in): option $1 is not supported" >&2; exit 2 ;;
	*) url=$1 ;;
	esac
	shift
done
exec wget -q -O "$out" "$url"
`

// imagesFormat changes whenever the way the images are built changes.
const imagesFormat = "conformance-images-v5"

// Inputs are the binaries and files the images are built from.
type Inputs struct {
	// Agnhost and Nnp are static binaries of the Kubernetes module's
	// test/images/agnhost and test/images/nonewprivs (BuildTools).
	Agnhost, Nnp string
	// Module is the Kubernetes module's directory (its test/images
	// files).
	Module string
	// Pause is the localcri pause image's program.
	Pause []byte
	// Sh is the busybox stand-in's /bin/sh, a static build of ./sh.
	Sh []byte
}

// Images are the built e2e images: an OCI image layout tarball, the
// names it holds, and the images themselves, for the nodes' registries
// to serve (a test that pulls with imagePullPolicy Always).
type Images struct {
	Tar   string
	Refs  []string
	Specs []localcri.ImageSpec
}

// BuildImages builds the e2e images into dir/<key>/ unless a build of the
// same inputs is there already.
func BuildImages(ctx context.Context, log *zap.Logger, dir string, in Inputs) (*Images, error) {
	if err := localcri.EnsureFile(ctx, log, bashStatic, "bash-static"); err != nil {
		return nil, err
	}
	specs, err := imageSpecs(ctx, in)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%s\n", imagesFormat)
	refs := make([]string, 0, len(specs))
	for _, s := range specs {
		refs = append(refs, s.Ref)
		_, _ = fmt.Fprintf(h, "%s %q %q %q %q\n", s.Ref, s.Config.Entrypoint, s.Config.Cmd, s.Config.User, s.Config.Env)
		for _, f := range s.Files {
			sum := sha256.Sum256(f.Data)
			_, _ = fmt.Fprintf(h, "%s %o %s %x\n", f.Path, f.Mode, f.Link, sum)
		}
	}
	out := filepath.Join(dir, hex.EncodeToString(h.Sum(nil))[:16])
	imgs := &Images{Tar: filepath.Join(out, "images.tar"), Refs: refs, Specs: specs}
	if _, err := os.Stat(imgs.Tar); err == nil {
		return imgs, nil
	}
	tmp := out + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	if err := localcri.WriteImageArchive(specs, filepath.Join(tmp, "layout"), filepath.Join(tmp, "images.tar")); err != nil {
		return nil, err
	}
	_ = os.RemoveAll(out)
	if err := os.Rename(tmp, out); err != nil {
		return nil, err
	}
	return imgs, nil
}

// imageSpecs are the e2e images, each a stand-in built as its Dockerfile
// in k8s.io/kubernetes's test/images does, on busybox instead of its base.
func imageSpecs(ctx context.Context, in Inputs) ([]localcri.ImageSpec, error) {
	busybox, err := localcri.BusyboxFiles(ctx)
	if err != nil {
		return nil, err
	}
	read := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("e2e image input: %w", err)
		}
		return b, nil
	}
	agnhost, err := read(in.Agnhost)
	if err != nil {
		return nil, err
	}
	nnp, err := read(in.Nnp)
	if err != nil {
		return nil, err
	}
	bash, err := read(bashStatic)
	if err != nil {
		return nil, err
	}
	imgDir := filepath.Join(in.Module, "test", "images")
	var files = map[string][]byte{}
	for _, f := range []string{"agnhost/porter/localhost.crt", "agnhost/porter/localhost.key",
		"kitten/html/kitten.jpg", "kitten/html/data.json", "nautilus/html/nautilus.jpg", "nautilus/html/data.json"} {
		if files[f], err = read(filepath.Join(imgDir, f)); err != nil {
			return nil, err
		}
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

	// agnhost's Dockerfile: its tools, /uploads, the porter's
	// certificate, agnhost and agnhost-2, and the image's own user and
	// group (user-defined-in-image 1000, group-defined-in-image 50000),
	// which the security-context tests run as.
	agnhostFiles := withFiles(busybox, []localcri.ImageFile{
		{Path: "bin/bash", Mode: 0o755, Data: bash},
		{Path: "uploads/", Mode: 0o755},
		{Path: "localhost.crt", Mode: 0o644, Data: files["agnhost/porter/localhost.crt"]},
		{Path: "localhost.key", Mode: 0o600, Data: files["agnhost/porter/localhost.key"]},
		{Path: "agnhost", Mode: 0o755, Data: agnhost},
		{Path: "agnhost-2", Link: "agnhost"},
		// agnhost's base is Alpine, which tests read (ImageVolume reads
		// it through kitten, an agnhost image).
		{Path: "etc/os-release", Mode: 0o644, Data: []byte("NAME=\"Alpine Linux\"\nID=alpine\n" +
			"PRETTY_NAME=\"Alpine Linux (podsync's stand-in: the e2e images' files on busybox)\"\n")},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n" +
			"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n")},
		{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\nuser-defined-in-image:x:1000:\n" +
			"group-defined-in-image:x:50000:user-defined-in-image\n")},
		{Path: "home/", Mode: 0o755},
		{Path: "home/user-defined-in-image/", Mode: 0o755},
		// agnhost's Alpine has curl, which the lifecycle hook tests'
		// exec hooks run (curl http://IP:8080/echo?msg=prestop).
		{Path: "usr/bin/curl", Mode: 0o755, Data: []byte(curlStandIn)},
	})
	// busybox's: its sh is the sh shim (./sh): busybox ash, but a `sh -c
	// CMD` of one plain command executes CMD with the whole environment.
	// Debian's busybox ash hands its children only the variables whose
	// names are shell identifiers; the e2e image's busybox passes the
	// others on too (data-1, 1-data-1), which the ConfigMap and Secret
	// envFrom tests read with `sh -c env`. Tests that read ash's own
	// messages ("/bin/sh: can't create /file: Read-only file system")
	// still get them.
	busyboxFiles := withFiles(busybox, []localcri.ImageFile{{Path: "bin/sh", Mode: 0o755, Data: in.Sh}})
	agnhostCfg := v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: env, WorkingDir: "/"}
	// nginx's stand-in: busybox's httpd serving /usr/share/nginx/html on
	// port 80 until SIGTERM (the tests need a server that runs and stops,
	// not nginx itself).
	nginxFiles := withFiles(busybox, []localcri.ImageFile{
		{Path: "usr/", Mode: 0o755}, {Path: "usr/share/", Mode: 0o755}, {Path: "usr/share/nginx/", Mode: 0o755},
		{Path: "usr/share/nginx/html/", Mode: 0o755},
		{Path: "usr/share/nginx/html/index.html", Mode: 0o644, Data: []byte("<!DOCTYPE html>\n<html><body><h1>Welcome to nginx!</h1></body></html>\n")},
	})
	nginxCfg := v1.Config{Cmd: []string{"/bin/sh", "-c", `trap 'exit 0' TERM INT; httpd -f -p 80 -h /usr/share/nginx/html & wait`},
		Env: env, WorkingDir: "/"}
	page := func(name string) []localcri.ImageFile {
		return withFiles(agnhostFiles, []localcri.ImageFile{
			{Path: name + ".jpg", Mode: 0o644, Data: files[name+"/html/"+name+".jpg"]},
			{Path: "data.json", Mode: 0o644, Data: files[name+"/html/data.json"]},
		})
	}
	return []localcri.ImageSpec{
		{Ref: AgnhostImage, Files: agnhostFiles, Config: agnhostCfg},
		{Ref: AgnhostPrevImage, Files: agnhostFiles, Config: agnhostCfg},
		{Ref: BusyboxImage, Files: busyboxFiles, Config: v1.Config{Cmd: []string{"sh"}, Env: env, WorkingDir: "/"}},
		{Ref: NginxImage, Files: nginxFiles, Config: nginxCfg},
		{Ref: NginxNewImage, Files: nginxFiles, Config: nginxCfg},
		{Ref: GlibcDNSTestingImage, Files: busybox, Config: v1.Config{Cmd: []string{"sh"}, Env: env, WorkingDir: "/"}},
		{Ref: NonRootImage, Files: busybox, Config: v1.Config{Cmd: []string{"sh"}, Env: env, WorkingDir: "/", User: "1234"}},
		{Ref: NonewprivsImage, Files: withFiles(busybox, []localcri.ImageFile{
			{Path: "usr/", Mode: 0o755}, {Path: "usr/local/", Mode: 0o755}, {Path: "usr/local/bin/", Mode: 0o755},
			{Path: "usr/local/bin/nnp", Mode: 0o4755, Data: nnp},
		}), Config: v1.Config{Cmd: []string{"nnp"}, Env: env, WorkingDir: "/"}},
		{Ref: KittenImage, Files: page("kitten"), Config: v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"test-webserver"}, Env: env, WorkingDir: "/"}},
		{Ref: NautilusImage, Files: page("nautilus"), Config: v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"test-webserver"}, Env: env, WorkingDir: "/"}},
		{Ref: PauseImage, Files: []localcri.ImageFile{{Path: "pause", Mode: 0o755, Data: in.Pause}},
			Config: v1.Config{Entrypoint: []string{"/pause"}, WorkingDir: "/"}},
	}, nil
}

// withFiles is base with files added, a file of base at the same path
// replaced.
func withFiles(base, files []localcri.ImageFile) []localcri.ImageFile {
	out := slices.Clone(base)
	for _, f := range files {
		i := slices.IndexFunc(out, func(b localcri.ImageFile) bool {
			return strings.TrimSuffix(b.Path, "/") == strings.TrimSuffix(f.Path, "/")
		})
		if i >= 0 {
			out[i] = f
		} else {
			out = append(out, f)
		}
	}
	return out
}
