package cli

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/podsync/podsync/client"
)

// cp copies files and directories between the local filesystem and a
// container as kubectl cp (k8s.io/kubectl/pkg/cmd/cp, v0.37.2) does: a
// tar stream over exec, tar cf - in the container to copy from it,
// tar -xmf - to copy into it. The file specs, the paths' cleaning, the
// tar writer and reader and the messages are kubectl's; its code is
// Apache-2.0, The Kubernetes Authors.

// cpFlags are cp's flags.
type cpFlags struct {
	namespace  string
	container  string
	noPreserve bool
}

// The file spec errors, as kubectl words them.
var (
	errFileSpecFormat = errors.New("filespec must match the canonical format: [[namespace/]pod:]file/path")
	errCpBothRemote   = errors.New("one of src or dest must be a local file specification")
	errCpBothLocal    = errors.New("one of src or dest must be a remote file specification")
	errCpEmptyPath    = errors.New("filepath can not be empty")
)

func (a *app) newCpCommand() *cobra.Command {
	var f cpFlags
	cmd := &cobra.Command{
		Use:   "cp SRC DEST",
		Short: "Copy files and directories to and from containers",
		Long: "cp copies files and directories to and from a container, as kubectl cp does:\n" +
			"one of SRC and DEST is a local path, the other [NAMESPACE/]POD:PATH. It runs\n" +
			"tar in the container over exec, so the image needs a tar binary, and it needs\n" +
			"the exec role (or admin). Symbolic links are not copied out of a container\n" +
			"(a warning names them); a file of the archive that would land outside DEST is\n" +
			"skipped with a warning. When tar in the container fails, podsyncctl exits with\n" +
			"its exit code (\"command terminated with exit code N\").",
		Example: "  podsyncctl cp web:/etc/nginx/nginx.conf ./nginx.conf\n" +
			"  podsyncctl cp ./site web:/usr/share/nginx/html -c nginx\n" +
			"  podsyncctl cp demo/web:/var/log ./web-logs",
		Args: usageArgs(func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return errors.New("source and destination are required")
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := parseFileSpec(args[0])
			if err != nil {
				return err
			}
			dest, err := parseFileSpec(args[1])
			if err != nil {
				return err
			}
			switch {
			case src.pod != "" && dest.pod != "":
				return errCpBothRemote
			case src.file == "" || dest.file == "":
				return errCpEmptyPath
			case src.pod == "" && dest.pod == "":
				return errCpBothLocal
			}
			if dest.pod != "" {
				// kubectl checks the local file before it dials.
				if _, err := os.Stat(src.file); err != nil {
					return fmt.Errorf("%s doesn't exist in local filesystem", src.file)
				}
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			remote := src
			if dest.pod != "" {
				remote = dest
			}
			if remote.namespace == "" {
				remote.namespace = namespaceOr(f.namespace)
			}
			container, err := a.defaultContainer(cmd.Context(), c, remote.namespace, remote.pod, f.container)
			if err != nil {
				return err
			}
			cp := &copier{a: a, c: c, namespace: remote.namespace, pod: remote.pod, container: container, noPreserve: f.noPreserve}
			ctx, cancel := a.waitContext(cmd.Context())
			defer cancel()
			if dest.pod != "" {
				return cp.toPod(ctx, src.file, dest.file)
			}
			return cp.fromPod(ctx, src.file, dest.file)
		},
		ValidArgsFunction: a.completePodNames(&f.namespace),
	}
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", `namespace of the pod when the file spec names none (default "default")`)
	cmd.Flags().StringVarP(&f.container, "container", "c", "", "container name; may be omitted when the pod has one container")
	cmd.Flags().BoolVar(&f.noPreserve, "no-preserve", false, "do not keep the copied files' ownership and permissions in the container")
	return cmd
}

// fileSpec is a cp argument: a local path, or a path in a pod's
// container.
type fileSpec struct {
	namespace, pod string
	file           string
}

// parseFileSpec reads [[namespace/]pod:]file/path as kubectl's
// extractFileSpec does; a local path keeps the client's separators, a
// remote one is a Unix path. A trailing slash is dropped.
func parseFileSpec(arg string) (fileSpec, error) {
	i := strings.Index(arg, ":")
	switch {
	case i == 0:
		return fileSpec{}, errFileSpecFormat
	case i < 0:
		return fileSpec{file: stripTrailingSlash(arg)}, nil
	}
	pod, file := arg[:i], remoteClean(arg[i+1:])
	pieces := strings.Split(pod, "/")
	switch len(pieces) {
	case 1:
		return fileSpec{pod: pieces[0], file: file}, nil
	case 2:
		return fileSpec{namespace: pieces[0], pod: pieces[1], file: file}, nil
	}
	return fileSpec{}, errFileSpecFormat
}

// remoteClean is kubectl's newRemotePath: a Unix path without a trailing
// slash.
func remoteClean(p string) string {
	return stripTrailingSlash(strings.ReplaceAll(p, `\`, "/"))
}

// copier copies to and from one container.
type copier struct {
	a                         *app
	c                         *client.Client
	namespace, pod, container string
	noPreserve                bool
}

// exec runs command in the container with the streams; a non-zero exit
// code is kubectl's "command terminated with exit code N", with N as
// podsyncctl's exit code.
func (cp *copier) exec(ctx context.Context, command []string, so client.StreamOptions) error {
	code, err := cp.c.Exec(ctx, client.ExecOptions{Namespace: cp.namespace, Name: cp.pod, Container: cp.container,
		Command: command, StreamOptions: so})
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitError{code: code, msg: fmt.Sprintf("command terminated with exit code %d", code)}
	}
	return nil
}

// toPod copies the local src to dest in the container: into dest when it
// is a directory there, else as dest.
func (cp *copier) toPod(ctx context.Context, src, dest string) error {
	// As kubectl, only a deadline stops the copy here: a container
	// without test(1) gets the file as dest.
	if err := cp.exec(ctx, []string{"test", "-d", dest}, client.StreamOptions{}); err == nil {
		dest = path.Join(dest, filepath.Base(src))
	} else if ctx.Err() != nil {
		return err
	}
	pr, pw := io.Pipe()
	tarDone := make(chan error, 1)
	go func() {
		err := makeTar(src, dest, pw)
		pw.CloseWithError(err)
		tarDone <- err
	}()
	command := []string{"tar", "-xmf", "-"}
	if cp.noPreserve {
		command = []string{"tar", "--no-same-permissions", "--no-same-owner", "-xmf", "-"}
	}
	if dir := remoteClean(path.Dir(dest)); dir != "" {
		command = append(command, "-C", dir)
	}
	err := cp.exec(ctx, command, client.StreamOptions{Stdin: pr, Stdout: cp.a.stdout, Stderr: cp.a.stderr})
	// The archive's writer ends when tar stops reading.
	_ = pr.CloseWithError(errTarStopped)
	terr := <-tarDone
	switch {
	case terr != nil && !errors.Is(terr, errTarStopped):
		// What broke the archive comes before what tar made of it.
		return fmt.Errorf("archive %s: %w", src, terr)
	case err != nil:
		return err
	case terr != nil:
		return errors.New("tar in the container stopped reading before the end of the archive")
	}
	return nil
}

// errTarStopped ends the archive's writer when tar in the container is
// done.
var errTarStopped = errors.New("tar in the container stopped reading")

// fromPod copies src of the container to the local dest.
func (cp *copier) fromPod(ctx context.Context, src, dest string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	execDone := make(chan error, 1)
	go func() {
		err := cp.exec(ctx, []string{"tar", "cf", "-", src}, client.StreamOptions{Stdout: pw, Stderr: cp.a.stderr})
		_ = pw.CloseWithError(err)
		execDone <- err
	}()
	prefix := stripPathShortcuts(path.Clean(strings.TrimLeft(src, `/\`)))
	uerr := cp.untar(pr, prefix, src, dest)
	if uerr != nil {
		// Stop tar: the rest of its archive has nowhere to go.
		cancel()
		_ = pr.CloseWithError(uerr)
	}
	eerr := <-execDone
	if uerr != nil && !isExitError(eerr) {
		return uerr
	}
	// tar's own failure (a missing file: exit 2) comes first.
	return eerr
}

// isExitError reports whether err is a command's non-zero exit.
func isExitError(err error) bool {
	var ee *exitError
	return errors.As(err, &ee)
}

// makeTar writes src (a file or a directory, with its tree; src may be a
// glob) to w as an archive whose names are under dest, as kubectl's
// makeTar.
func makeTar(src, dest string, w io.Writer) error {
	tw := tar.NewWriter(w)
	srcPath := filepath.Clean(src)
	destPath := path.Clean(dest)
	if err := recursiveTar(filepath.Dir(srcPath), filepath.Base(srcPath), path.Base(destPath), tw); err != nil {
		return err
	}
	return tw.Close()
}

func recursiveTar(srcDir, srcFile, destFile string, tw *tar.Writer) error {
	matched, err := filepath.Glob(filepath.Join(srcDir, srcFile))
	if err != nil {
		return err
	}
	for _, fpath := range matched {
		stat, err := os.Lstat(fpath)
		if err != nil {
			return err
		}
		switch {
		case stat.IsDir():
			files, err := os.ReadDir(fpath)
			if err != nil {
				return err
			}
			if len(files) == 0 {
				hdr, err := tar.FileInfoHeader(stat, fpath)
				if err != nil {
					return err
				}
				hdr.Name = destFile
				if err := tw.WriteHeader(hdr); err != nil {
					return err
				}
			}
			for _, f := range files {
				if err := recursiveTar(srcDir, filepath.Join(srcFile, f.Name()), path.Join(destFile, f.Name()), tw); err != nil {
					return err
				}
			}
			return nil
		case stat.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(fpath)
			if err != nil {
				return err
			}
			hdr, err := tar.FileInfoHeader(stat, target)
			if err != nil {
				return err
			}
			hdr.Name = destFile
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		default:
			if err := tarFile(tw, fpath, stat, destFile); err != nil {
				return err
			}
		}
	}
	return nil
}

func tarFile(tw *tar.Writer, fpath string, stat os.FileInfo, name string) error {
	hdr, err := tar.FileInfoHeader(stat, fpath)
	if err != nil {
		return err
	}
	hdr.Name = name
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	f, err := os.Open(fpath)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, err = io.Copy(tw, f)
	return err
}

// untar writes the archive r, of src in the container, to dest, as
// kubectl's untarAll: every name must start with prefix (src without its
// leading slashes), which is replaced by dest; a name that would land
// outside dest and symbolic links are skipped with a warning.
func (cp *copier) untar(r io.Reader, prefix, src, dest string) error {
	warnedSymlink := false
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !strings.HasPrefix(hdr.Name, prefix) {
			return errors.New("tar contents corrupted")
		}
		name := stripTrailingSlash(filepath.Join(dest, remoteClean(hdr.Name[len(prefix):])))
		if !isRelative(dest, name) {
			_, _ = fmt.Fprintf(cp.a.stderr, "warning: file %q is outside target destination, skipping\n", name)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		fi := hdr.FileInfo()
		if fi.IsDir() {
			if err := os.MkdirAll(name, 0o755); err != nil {
				return err
			}
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if !warnedSymlink {
				_, _ = fmt.Fprintf(cp.a.stderr, "warning: skipping symlink: %q -> %q (consider using \"podsyncctl exec -n %q %q -- tar cf - %q | tar xf -\")\n",
					name, hdr.Linkname, cp.namespace, cp.pod, src)
				warnedSymlink = true
				continue
			}
			_, _ = fmt.Fprintf(cp.a.stderr, "warning: skipping symlink: %q -> %q\n", name, hdr.Linkname)
			continue
		}
		if !fi.Mode().IsRegular() {
			// Devices, FIFOs: nothing a copy makes sense of.
			_, _ = fmt.Fprintf(cp.a.stderr, "warning: skipping %q: not a regular file\n", name)
			continue
		}
		if err := writeFile(name, tr); err != nil {
			return err
		}
	}
}

func writeFile(name string, r io.Reader) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// isRelative reports whether target is base or under it.
func isRelative(base, target string) bool {
	rel, err := filepath.Rel(stripTrailingSlash(base), stripTrailingSlash(target))
	if err != nil {
		return false
	}
	return rel == "." || rel == stripPathShortcuts(rel)
}

// stripTrailingSlash drops one trailing slash, except of "/".
func stripTrailingSlash(p string) string {
	if p != "/" && (strings.HasSuffix(p, "/") || strings.HasSuffix(p, `\`)) {
		return p[:len(p)-1]
	}
	return p
}

// stripPathShortcuts removes leading "../" and a leading slash, and makes
// "." and ".." empty, as kubectl's.
func stripPathShortcuts(p string) string {
	for {
		t := strings.TrimPrefix(strings.TrimPrefix(p, "../"), `..\`)
		if t == p {
			break
		}
		p = t
	}
	if p == "." || p == ".." {
		return ""
	}
	if p != "" && (p[0] == '/' || p[0] == '\\') {
		return p[1:]
	}
	return p
}
