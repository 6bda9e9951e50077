package manifestdir_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/host/mounttable"
	"github.com/podsync/podsync/internal/manifestdir"
)

const image = "registry.local/busybox:local"

// harness is a node on the fake runtime with a manifest directory
// source that can be stopped and started again on the same store.
type harness struct {
	t      *testing.T
	ctx    context.Context
	dir    string
	rt     *enginetest.FakeRuntime
	st     *store.Store
	node   *engine.Node
	stop   func()
	dbPath string
	cfg    criconfig.Options
	// logs are the source's.
	logs *observer.ObservedLogs
}

func newHarness(t *testing.T) *harness {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, dir: t.TempDir(), rt: enginetest.NewRuntime(enginetest.WithImages(image)),
		dbPath: filepath.Join(t.TempDir(), "podsync.db"),
		cfg:    criconfig.Options{RootDir: t.TempDir(), PodLogDir: t.TempDir(), CgroupFS: t.TempDir(), NodeIPs: []string{"192.0.2.10"}}}
	t.Cleanup(func() {
		if err := mounttable.UnmountBelow(h.cfg.RootDir); err != nil {
			t.Error(err)
		}
	})
	h.start()
	t.Cleanup(func() { h.stop() })
	return h
}

// start runs a node and the source, as podsyncd does, on the harness's
// store file and runtime.
func (h *harness) start() {
	st, err := store.Open(h.dbPath, store.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	node, err := engine.NewNode(engine.NodeOptions{Runtime: h.rt, Images: h.rt, Store: st, Logger: zaptest.NewLogger(h.t), Config: h.cfg,
		Eviction: engine.EvictionPolicy{Period: time.Hour, StoreReserve: -1}})
	if err != nil {
		h.t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	h.logs = logs
	log := zaptest.NewLogger(h.t).Named("manifests").WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) }))
	src, err := manifestdir.New(manifestdir.Options{Dir: h.dir, Node: node, Rescan: 200 * time.Millisecond,
		Debounce: 20 * time.Millisecond, Logger: log})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	nodeDone, srcDone := make(chan error, 1), make(chan error, 1)
	go func() { nodeDone <- node.Run(ctx) }()
	go func() { srcDone <- src.Run(ctx) }()
	h.st, h.node = st, node
	h.stop = func() {
		cancel()
		if err := <-srcDone; err != nil {
			h.t.Error(err)
		}
		if err := <-nodeDone; err != nil {
			h.t.Error(err)
		}
		_ = st.Close()
		h.stop = func() {}
	}
}

func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	for !cond() {
		select {
		case <-h.ctx.Done():
			h.t.Fatalf("%s: not reached", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// put writes a file beside the directory and moves it in, as an
// operator's mv does.
func (h *harness) put(name, content string) {
	h.t.Helper()
	tmp := filepath.Join(filepath.Dir(h.dir), "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(h.dir, name)); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) pod(name string) *store.PodRecord {
	rec, err := h.st.GetByName("default", name)
	if err != nil {
		return nil
	}
	return rec
}

func runningCommand(rec *store.PodRecord) string {
	if rec == nil {
		return ""
	}
	for _, cs := range rec.Pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return strings.Join(rec.Pod.Spec.Containers[0].Command, " ")
		}
	}
	return ""
}

func runningID(rec *store.PodRecord) string {
	if rec == nil {
		return ""
	}
	for _, cs := range rec.Pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return cs.ContainerID
		}
	}
	return ""
}

func manifest(name, command string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\nspec:\n  containers:\n  - name: app\n    image: " + image +
		"\n    command: [" + command + "]\n"
}

func (h *harness) sandboxes() int {
	sbs, err := h.rt.ListPodSandbox(h.ctx, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(sbs)
}

// TestManifestDirectory: mv a file in and its pods run, marked with their
// source; an edit of the command recreates the container; a syntax error
// keeps the pod as it was and records FailedManifest; the API cannot
// delete or change a file's pod; rm deletes the pods; dot-files and other
// extensions are ignored; a ConfigMap of one file serves a pod of
// another.
func TestManifestDirectory(t *testing.T) {
	h := newHarness(t)
	h.put("web.yaml", manifest("web", "sleep, inf")+"---\n"+manifest("db", "sleep, inf"))
	h.put(".hidden.yaml", manifest("hidden", "sleep, inf"))
	h.put("notes.txt", manifest("txt", "sleep, inf"))
	h.eventually("the file's pods run", func() bool {
		return runningCommand(h.pod("web")) == "sleep inf" && runningCommand(h.pod("db")) == "sleep inf"
	})
	if got := engine.SourceOf(h.pod("web").Pod.Annotations); got != "file:web.yaml" {
		t.Errorf("source annotation %q, want file:web.yaml", got)
	}

	// The API refuses to change or delete a file's pod.
	if _, err := h.node.Delete(h.ctx, "default", "web", "", nil); !errors.Is(err, errdefs.ErrOwnedByFile) {
		t.Errorf("API delete of a file's pod: %v, want ErrOwnedByFile", err)
	}
	apiPod := h.pod("web").Pod.DeepCopy()
	apiPod.Annotations = nil
	if _, err := h.node.Apply(h.ctx, apiPod, nil, nil, nil); !errors.Is(err, errdefs.ErrOwnedByFile) {
		t.Errorf("API apply of a file's pod: %v, want ErrOwnedByFile", err)
	}

	before := runningID(h.pod("web"))
	h.put("web.yaml", manifest("web", "sleep, \"3600\"")+"---\n"+manifest("db", "sleep, inf"))
	h.eventually("the edited container is recreated", func() bool {
		rec := h.pod("web")
		return runningCommand(rec) == "sleep 3600" && runningID(rec) != "" && runningID(rec) != before
	})

	h.put("web.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: web\nspec: [\n")
	h.eventually("the bad file is reported on its pods", func() bool {
		return slices.Contains(events(t, h.st, h.pod("web")), manifestdir.ReasonFailedManifest)
	})
	if got := runningCommand(h.pod("web")); got != "sleep 3600" {
		t.Errorf("after a syntax error the pod runs %q, want its last good command", got)
	}
	if h.pod("db") == nil {
		t.Error("a syntax error deleted the file's other pod")
	}

	// A ConfigMap in one file, a pod using it in another.
	h.put("cfg.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {k: v}\n")
	h.put("user.yaml", manifest("user", "sleep, inf")+"    env:\n    - name: K\n      valueFrom: {configMapKeyRef: {name: cfg, key: k}}\n")
	h.eventually("the pod of a file's ConfigMap runs", func() bool { return runningCommand(h.pod("user")) == "sleep inf" })

	if err := os.Remove(filepath.Join(h.dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	h.eventually("rm deletes the file's pods", func() bool { return h.pod("web") == nil && h.pod("db") == nil })
	for _, name := range []string{"hidden", "txt"} {
		if h.pod(name) != nil {
			t.Errorf("pod %s of an ignored file was applied", name)
		}
	}
}

// TestManifestDirectorySurvivesARestart: after a restart of podsyncd the
// file's pod is the same pod (no second sandbox), a file removed while
// podsyncd was down has its pods deleted, and one added meanwhile runs.
func TestManifestDirectorySurvivesARestart(t *testing.T) {
	h := newHarness(t)
	h.put("keep.yaml", manifest("keep", "sleep, inf"))
	h.put("gone.yaml", manifest("gone", "sleep, inf"))
	h.eventually("the pods run", func() bool { return runningCommand(h.pod("keep")) != "" && runningCommand(h.pod("gone")) != "" })
	if n := h.sandboxes(); n != 2 {
		t.Fatalf("%d sandboxes, want 2", n)
	}
	h.stop()
	if err := os.Remove(filepath.Join(h.dir, "gone.yaml")); err != nil {
		t.Fatal(err)
	}
	h.put("new.yaml", manifest("new", "sleep, inf"))
	h.start()
	h.eventually("the removed file's pod is deleted and the new one runs", func() bool {
		return h.pod("gone") == nil && runningCommand(h.pod("new")) != ""
	})
	if runningCommand(h.pod("keep")) == "" {
		t.Error("the kept file's pod does not run after the restart")
	}
	h.eventually("two sandboxes: keep's and new's", func() bool { return h.sandboxes() == 2 })
}

func events(t *testing.T, st *store.Store, rec *store.PodRecord) []string {
	t.Helper()
	if rec == nil {
		return nil
	}
	entries, err := st.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.Kind == store.KindEvent && e.Pod.UID == rec.Pod.UID {
			out = append(out, e.Event.Reason)
		}
	}
	return out
}

// logged reports whether the source logged msg with an error saying
// each of want.
func (h *harness) logged(msg string, want ...string) bool {
	for _, e := range h.logs.FilterMessage(msg).All() {
		text := fmt.Sprint(e.ContextMap())
		all := true
		for _, w := range want {
			all = all && strings.Contains(text, w)
		}
		if all {
			return true
		}
	}
	return false
}

// TestManifestFilesMustBeTrusted: a link to a FIFO is refused without
// blocking the source (it stalled it), as are a file over MaxFileBytes, a
// file others may write, a file of another user, and every file of a
// directory others may write; a link to a regular root-owned file is
// followed, as the kubelet follows it. What is refused is reported, and
// the other files apply.
func TestManifestFilesMustBeTrusted(t *testing.T) {
	h := newHarness(t)
	outside := t.TempDir()
	fifo := filepath.Join(outside, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fifo, filepath.Join(h.dir, "fifo.yaml")); err != nil {
		t.Fatal(err)
	}
	write := func(path, content string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	write(filepath.Join(h.dir, "writable.yaml"), manifest("writable", "sleep, inf"), 0o666)
	write(filepath.Join(h.dir, "other.yaml"), manifest("other", "sleep, inf"), 0o644)
	if err := os.Chown(filepath.Join(h.dir, "other.yaml"), 4242, 4242); err != nil {
		t.Fatalf("chown (the unit tests run as root): %v", err)
	}
	big := filepath.Join(h.dir, "big.yaml")
	write(big, manifest("big", "sleep, inf"), 0o644)
	if err := os.Truncate(big, manifestdir.MaxFileBytes+1); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(outside, "linked.yaml"), manifest("linked", "sleep, inf"), 0o644)
	if err := os.Symlink(filepath.Join(outside, "linked.yaml"), filepath.Join(h.dir, "linked.yaml")); err != nil {
		t.Fatal(err)
	}
	h.put("good.yaml", manifest("good", "sleep, inf"))

	h.eventually("the good and the linked file apply", func() bool {
		return runningCommand(h.pod("good")) != "" && runningCommand(h.pod("linked")) != ""
	})
	const refused = "manifest file not applied; its last good content stays applied"
	for _, r := range []struct{ file, why string }{
		{"fifo.yaml", "is not a regular file"},
		{"writable.yaml", "lets its group or others write it"},
		{"other.yaml", "owned by uid 4242"},
		{"big.yaml", "more than the 16777216 a manifest file may hold"},
	} {
		h.eventually(r.file+" reported", func() bool { return h.logged(refused, "file:"+r.file, r.why) })
		if name := strings.TrimSuffix(r.file, ".yaml"); h.pod(name) != nil {
			t.Errorf("pod %s of a refused file was applied", name)
		}
	}

	// A directory others may write: nothing new is read from it, what it
	// applied stays.
	if err := os.Chmod(h.dir, 0o777); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(h.dir, "later.yaml"), manifest("later", "sleep, inf"), 0o644)
	h.eventually("the directory reported", func() bool {
		return h.logged("manifest directory not read; what it applied stays applied", "lets its group or others write it")
	})
	// chmod came before the write: no scan since has read the directory.
	if h.pod("later") != nil || h.pod("good") == nil {
		t.Errorf("in a world-writable directory: later applied %v, good kept %v; want not applied, kept", h.pod("later") != nil, h.pod("good") != nil)
	}
	if err := os.Chmod(h.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h.eventually("the file applies once the directory is trusted", func() bool { return runningCommand(h.pod("later")) != "" })
}
