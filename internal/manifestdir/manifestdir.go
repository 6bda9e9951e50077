package manifestdir

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/logx"
	"github.com/podsync/podsync/validation"
)

// Defaults of Options.
const (
	// DefaultRescan is the kubelet's fileCheckFrequency (20 s).
	DefaultRescan = 20 * time.Second
	// DefaultDebounce is how long a file must stay unchanged after an
	// inotify event before it is read: an editor's or a copy's writes
	// come in bursts.
	DefaultDebounce = 300 * time.Millisecond
	// MaxFileBytes is the largest manifest file read: the API's largest
	// request (server.Limits.MaxRequestBytes). A bigger file is refused
	// unread.
	MaxFileBytes = 16 << 20
)

// Event reasons recorded on the pods of a manifest file.
const (
	// ReasonFailedManifest: the file no longer parses or validates; its
	// last good content stays applied.
	ReasonFailedManifest = "FailedManifest"
)

// Node is what the source drives: engine.Node implements it.
type Node interface {
	Apply(ctx context.Context, pod *corev1.Pod, configMaps []*corev1.ConfigMap, secrets []*corev1.Secret, emit func(engine.StepResult)) (engine.ApplyResult, error)
	ApplyObjects(ctx context.Context, objs []engine.ObjectPut, source string) ([]engine.ObjectResult, error)
	DeleteAs(ctx context.Context, source, namespace, name, uid string, grace *int64) (engine.DeleteResult, error)
	DeleteObject(ctx context.Context, ref engine.ObjectRef, resourceVersion, source string) (bool, int64, error)
	ListShared(ctx context.Context, f engine.PodFilter) ([]*engine.PodRecord, int64, error)
	ListObjects(ctx context.Context, f engine.ObjectFilter) ([]*engine.ObjectRecord, int64, error)
	RecordEvent(ref engine.PodRef, ev engine.Event) error
}

var _ Node = (*engine.Node)(nil)

// Options configure a Source.
type Options struct {
	// Dir is the manifest directory. Required.
	Dir string
	// Node applies and deletes the pods and objects. Required.
	Node Node
	// Rescan is the period of the full rescan that backs inotify up;
	// zero means DefaultRescan.
	Rescan time.Duration
	// Debounce is the quiet time after a file's last inotify event before
	// it is read; zero means DefaultDebounce.
	Debounce time.Duration
	// Validation are the node's validation options (limits, node name).
	Validation validation.Options
	// Logger logs what the source does; nil discards.
	Logger *zap.Logger
}

// Source keeps the pods and objects of the files of a directory applied,
// as the kubelet's file source keeps its static pods: every regular file
// (or link to one) named *.yaml, *.yml or *.json whose name does not
// start with a dot, of at most MaxFileBytes, owned by root or podsyncd's
// user and writable by no one else, in a directory no one else may
// write, holds pods, ConfigMaps and Secrets (multi-document, workload kinds as
// podsyncctl reads them); a new file applies its objects, a changed one
// applies the new content and deletes what it no longer holds, a removed
// one deletes all it held. A file that does not read, parse or validate
// (half written, a syntax error) is reported — a log line and a
// FailedManifest event on each pod of its last good content — and that
// content stays applied. What the files hold carries
// engine.SourceAnnotation "file:NAME", so the API cannot change or
// delete it, and the source finds what it applied after a restart.
type Source struct {
	opts Options
	log  *zap.Logger

	mu sync.Mutex
	// files are the files applied, by name: their last good content's
	// digest and what it held.
	files map[string]*fileState
	// reported are the digests of bad contents already reported, by
	// name, so a rescan does not report one again.
	reported map[string][sha256.Size]byte
	// distrusted is the error last logged of a directory the source does
	// not read (checkTrusted), so a rescan does not log it again.
	distrusted string
}

// fileState is what a file's last good content held.
type fileState struct {
	digest  [sha256.Size]byte
	known   bool // digest is set (false for what a restart found in the store)
	pods    []engine.PodRef
	objects []engine.ObjectRef
}

// New returns a Source.
func New(opts Options) (*Source, error) {
	if opts.Dir == "" || opts.Node == nil {
		return nil, errors.New("manifest directory: Dir and Node are required")
	}
	if opts.Rescan <= 0 {
		opts.Rescan = DefaultRescan
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	opts.Validation.StoredObjects = true
	return &Source{opts: opts, log: opts.Logger, files: map[string]*fileState{}, reported: map[string][sha256.Size]byte{}}, nil
}

// SourceName is the value of engine.SourceAnnotation for the file name.
func SourceName(file string) string { return "file:" + file }

// Run applies the directory and follows it until ctx ends: it first finds
// what an earlier run applied (the store's pods and objects of a file
// source), then scans, and then rescans on every inotify event (after
// Options.Debounce) and every Options.Rescan. A directory that does not
// exist yet is waited for: it holds nothing. Run returns nil when ctx
// ends, or the error of the first listing of the store.
func (s *Source) Run(ctx context.Context) error {
	if err := s.adopt(ctx); err != nil {
		return err
	}
	s.scan(ctx)
	events, closeWatch := s.watch()
	defer closeWatch()
	ticker := time.NewTicker(s.opts.Rescan)
	defer ticker.Stop()
	var debounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			debounce = time.After(s.opts.Debounce)
		case <-debounce:
			debounce = nil
			s.scan(ctx)
		case <-ticker.C:
			if events == nil {
				events, closeWatch = s.rewatch(closeWatch)
			}
			s.scan(ctx)
		}
	}
}

// watch starts inotify on the directory; it yields a nil channel when
// the directory cannot be watched (missing yet), which the rescans retry.
func (s *Source) watch() (<-chan fsnotify.Event, func()) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		s.log.Warn("manifest directory: no inotify, rescans only", zap.String(logx.Path, s.opts.Dir), zap.Error(err))
		return nil, func() {}
	}
	if err := w.Add(s.opts.Dir); err != nil {
		_ = w.Close()
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("manifest directory: cannot watch, rescans only", zap.String(logx.Path, s.opts.Dir), zap.Error(err))
		}
		return nil, func() {}
	}
	out := make(chan fsnotify.Event)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		for {
			select {
			case e, ok := <-w.Events:
				if !ok {
					return
				}
				if strings.HasPrefix(filepath.Base(e.Name), ".") {
					continue // dot-files, editors' temporary files among them
				}
				select {
				case out <- e:
				case <-done:
					return
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				s.log.Warn("manifest directory: inotify error, rescanning", zap.Error(err))
				select {
				case out <- fsnotify.Event{}:
				case <-done:
					return
				}
			case <-done:
				return
			}
		}
	}()
	return out, func() {
		close(done)
		_ = w.Close()
		wg.Wait()
	}
}

func (s *Source) rewatch(closeOld func()) (<-chan fsnotify.Event, func()) {
	closeOld()
	return s.watch()
}

// adopt finds the pods and objects an earlier run applied: they carry a
// file source. A file removed while podsyncd was down is then found
// missing by the first scan.
func (s *Source) adopt(ctx context.Context) error {
	recs, _, err := s.opts.Node.ListShared(ctx, engine.PodFilter{})
	if err != nil {
		return fmt.Errorf("manifest directory: %w", err)
	}
	objs, _, err := s.opts.Node.ListObjects(ctx, engine.ObjectFilter{})
	if err != nil {
		return fmt.Errorf("manifest directory: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		if name, ok := fileOf(r.Pod.Annotations); ok {
			st := s.stateLocked(name)
			st.pods = append(st.pods, r.Ref())
		}
	}
	for _, o := range objs {
		if name, ok := fileOf(o.Meta().Annotations); ok {
			st := s.stateLocked(name)
			st.objects = append(st.objects, o.Ref())
		}
	}
	return nil
}

func (s *Source) stateLocked(name string) *fileState {
	st := s.files[name]
	if st == nil {
		st = &fileState{}
		s.files[name] = st
	}
	return st
}

func fileOf(annotations map[string]string) (string, bool) {
	name, ok := strings.CutPrefix(engine.SourceOf(annotations), "file:")
	return name, ok
}

// isManifest reports whether a directory entry is a manifest file.
func isManifest(e fs.DirEntry) bool {
	name := e.Name()
	if strings.HasPrefix(name, ".") || !e.Type().IsRegular() && e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// scan reads the directory once and applies what changed. A directory
// others may write to is not read (checkTrusted): what is applied stays.
func (s *Source) scan(ctx context.Context) {
	if fi, err := os.Stat(s.opts.Dir); err == nil {
		if err := checkTrusted(fi); err != nil {
			s.distrust(fmt.Errorf("manifest directory %s: %w", s.opts.Dir, err))
			return
		}
	}
	s.distrust(nil)
	entries, err := os.ReadDir(s.opts.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// Not knowing the files is not knowing they went: keep all.
		s.log.Warn("manifest directory: cannot read it", zap.String(logx.Path, s.opts.Dir), zap.Error(err))
		return
	}
	present := map[string]bool{}
	for _, e := range entries {
		if !isManifest(e) {
			continue
		}
		present[e.Name()] = true
		s.syncFile(ctx, e.Name())
	}
	s.mu.Lock()
	var gone []string
	for name := range s.files {
		if !present[name] {
			gone = append(gone, name)
		}
	}
	s.mu.Unlock()
	slices.Sort(gone)
	for _, name := range gone {
		s.removeFile(ctx, name)
	}
}

// syncFile applies the file name if its content changed since it was
// last applied.
func (s *Source) syncFile(ctx context.Context, name string) {
	data, err := readManifest(filepath.Join(s.opts.Dir, name))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.report(name, [sha256.Size]byte{}, err)
		}
		return
	}
	digest := sha256.Sum256(data)
	s.mu.Lock()
	st := s.files[name]
	unchanged := st != nil && st.known && st.digest == digest
	_, wasReported := s.reported[name]
	alreadyReported := wasReported && s.reported[name] == digest
	s.mu.Unlock()
	if unchanged || alreadyReported {
		return
	}
	m, _, err := convert.ReadManifests([]convert.Source{{Name: name, Data: data}}, convert.ReadOptions{Validation: s.opts.Validation})
	if err == nil && len(bytes.TrimSpace(data)) > 0 && len(m.Pods)+len(m.ConfigMaps)+len(m.Secrets) == 0 {
		err = errors.New("the file holds no Pod, ConfigMap or Secret")
	}
	if err != nil {
		s.report(name, digest, err)
		return
	}
	next, err := s.apply(ctx, name, m)
	s.mu.Lock()
	delete(s.reported, name)
	old := s.stateLocked(name)
	stalePods := without(old.pods, next.pods)
	staleObjects := without(old.objects, next.objects)
	if err == nil {
		next.digest, next.known = digest, true
		s.files[name] = next
	} else {
		// What did apply is held; the rest is retried by the next scan.
		old.pods = union(old.pods, next.pods)
		old.objects = union(old.objects, next.objects)
		old.known = false
		stalePods, staleObjects = nil, nil
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("manifest file not fully applied; retried at the next scan", zap.String(logx.Source, SourceName(name)), zap.Error(err))
		return
	}
	s.deletePods(ctx, name, stalePods)
	s.deleteObjects(ctx, name, staleObjects)
	s.log.Info("manifest file applied", zap.String(logx.Source, SourceName(name)), zap.Int(logx.Pods, len(next.pods)),
		zap.Int("objects", len(next.objects)))
}

// apply applies the objects, then the pods, of a file's manifests, all
// marked with the file's source.
func (s *Source) apply(ctx context.Context, name string, m *convert.Manifests) (*fileState, error) {
	source := SourceName(name)
	next := &fileState{}
	var puts []engine.ObjectPut
	for _, cm := range m.ConfigMaps {
		cm = cm.DeepCopy()
		cm.Annotations = withSource(cm.Annotations, source)
		puts = append(puts, engine.ObjectPut{ConfigMap: cm})
		next.objects = append(next.objects, engine.ObjectRef{Kind: engine.KindConfigMap, Namespace: cm.Namespace, Name: cm.Name})
	}
	for _, sec := range m.Secrets {
		sec = sec.DeepCopy()
		sec.Annotations = withSource(sec.Annotations, source)
		puts = append(puts, engine.ObjectPut{Secret: sec})
		next.objects = append(next.objects, engine.ObjectRef{Kind: engine.KindSecret, Namespace: sec.Namespace, Name: sec.Name})
	}
	var errs []error
	if len(puts) > 0 {
		if _, err := s.opts.Node.ApplyObjects(ctx, puts, source); err != nil {
			errs = append(errs, err)
			next.objects = nil
		}
	}
	for _, pod := range m.Pods {
		pod = pod.DeepCopy()
		pod.Annotations = withSource(pod.Annotations, source)
		if _, err := s.opts.Node.Apply(ctx, pod, nil, nil, nil); err != nil {
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
			continue
		}
		next.pods = append(next.pods, engine.RefOf(pod))
	}
	return next, errors.Join(errs...)
}

func withSource(annotations map[string]string, source string) map[string]string {
	out := make(map[string]string, len(annotations)+1)
	for k, v := range annotations {
		out[k] = v
	}
	out[engine.SourceAnnotation] = source
	return out
}

// removeFile deletes what a removed file held.
func (s *Source) removeFile(ctx context.Context, name string) {
	s.mu.Lock()
	st := s.files[name]
	delete(s.files, name)
	delete(s.reported, name)
	s.mu.Unlock()
	if st == nil {
		return
	}
	s.log.Info("manifest file removed: deleting its pods and objects", zap.String(logx.Source, SourceName(name)),
		zap.Int(logx.Pods, len(st.pods)))
	s.deletePods(ctx, name, st.pods)
	s.deleteObjects(ctx, name, st.objects)
}

func (s *Source) deletePods(ctx context.Context, name string, pods []engine.PodRef) {
	for _, p := range pods {
		if _, err := s.opts.Node.DeleteAs(ctx, SourceName(name), p.Namespace, p.Name, string(p.UID), nil); err != nil {
			s.log.Warn("delete a manifest file's pod", zap.String(logx.Source, SourceName(name)), zap.String(logx.PodNamespace, p.Namespace),
				zap.String(logx.PodName, p.Name), zap.Error(err))
		}
	}
}

func (s *Source) deleteObjects(ctx context.Context, name string, objs []engine.ObjectRef) {
	for _, o := range objs {
		if _, _, err := s.opts.Node.DeleteObject(ctx, o, "", SourceName(name)); err != nil {
			s.log.Warn("delete a manifest file's object", zap.String(logx.Source, SourceName(name)), zap.String(logx.Object, o.String()), zap.Error(err))
		}
	}
}

// report records that a file did not read, parse or validate: a log line
// and a FailedManifest event on each pod of its last good content, once
// per bad content.
func (s *Source) report(name string, digest [sha256.Size]byte, err error) {
	s.mu.Lock()
	s.reported[name] = digest
	var pods []engine.PodRef
	if st := s.files[name]; st != nil {
		pods = slices.Clone(st.pods)
	}
	s.mu.Unlock()
	s.log.Warn("manifest file not applied; its last good content stays applied", zap.String(logx.Source, SourceName(name)),
		zap.Int(logx.Pods, len(pods)), zap.Error(err))
	msg := fmt.Sprintf("manifest file %s was not applied, the pod keeps its last good spec: %v", name, err)
	if len(msg) > 1024 {
		msg = msg[:1024] + "…"
	}
	for _, p := range pods {
		if err := s.opts.Node.RecordEvent(p, engine.Event{Type: corev1.EventTypeWarning, Reason: ReasonFailedManifest, Message: msg}); err != nil {
			s.log.Warn("record a manifest file's event", zap.String(logx.PodName, p.Name), zap.Error(err))
		}
	}
}

// distrust logs, once until it changes, why the directory is not read;
// nil says it is read again.
func (s *Source) distrust(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	s.mu.Lock()
	changed := s.distrusted != msg
	s.distrusted = msg
	s.mu.Unlock()
	if changed && err != nil {
		s.log.Error("manifest directory not read; what it applied stays applied", zap.Error(err))
	}
}

// readManifest reads a manifest file as the kubelet's file source does — a
// link is followed, to a regular file only — with what sshd's StrictModes
// adds: the file is refused, unread, when it is not a regular file (a
// FIFO is opened without blocking, and refused), when it is bigger than
// MaxFileBytes, or when another user may write it (checkTrusted).
func readManifest(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s): a manifest is a regular file, or a link to one", path, fi.Mode().Type())
	}
	if err := checkTrusted(fi); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if fi.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a manifest file may hold", path, fi.Size(), MaxFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s grew beyond the %d bytes a manifest file may hold", path, MaxFileBytes)
	}
	return data, nil
}

// checkTrusted refuses a file or directory that a user other than root or
// podsyncd's own may change: owned by another user, or writable by its
// group or by others (what is in the directory runs as pods, with the
// node's Pod Security level but the source's ownership).
func checkTrusted(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("owned by uid %d: it must be owned by root or podsyncd's user (uid %d)", st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("mode %04o lets its group or others write it: chmod go-w it", perm)
	}
	return nil
}

// without returns the refs of a that are not in b.
func without[T comparable](a, b []T) []T {
	var out []T
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func union[T comparable](a, b []T) []T {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
