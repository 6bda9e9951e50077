package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
)

// deleteFlags are delete's flags.
type deleteFlags struct {
	files          []string
	namespace      string
	all            bool
	gracePeriod    int64
	uid            string
	ignoreNotFound bool
	output         string
	wait           bool
}

func (a *app) newDeleteCommand() *cobra.Command {
	var f deleteFlags
	cmd := &cobra.Command{
		Use:   "delete [pods] (NAME... | -f FILE... | --all) | delete (cm|secret) NAME...",
		Short: "Stop and remove pods, or delete stored ConfigMaps and Secrets",
		Long: "delete stops pods — preStop hooks, SIGTERM, SIGKILL after the grace period —\n" +
			"and removes their containers, sandboxes, volumes and logs. It returns once\n" +
			"everything is gone, showing on stderr what it waits for (the containers it is\n" +
			"stopping and what is left of the grace period); with --wait=false it returns\n" +
			"once the node has the deletion, and the node goes on stopping the pod. Pods\n" +
			"are named, taken from manifests (-f), or all the pods of -n (every namespace\n" +
			"without it) with --all.\n\n" +
			"A pod that does not exist is an error unless --ignore-not-found.\n\n" +
			"delete cm NAME... and delete secret NAME... remove stored objects of -n: an\n" +
			"optional source's files leave the volumes of the pods that use it, a required\n" +
			"one's stay; a container started later waits for it.",
		Example: "  podsyncctl delete web\n" +
			"  podsyncctl delete -f examples/ --grace-period 0\n" +
			"  podsyncctl delete --all -n demo\n" +
			"  podsyncctl delete web --wait=false\n" +
			"  podsyncctl delete cm app-config",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				kind, names, err := parseResourceArgs(args)
				if err != nil {
					return err
				}
				switch kind {
				case resourceConfigMaps, resourceSecrets:
					return a.deleteObjectsArgs(cmd, f, kind, names)
				case resourcePods:
				default:
					return usageErrorf("delete removes pods, configmaps and secrets")
				}
				args = names
			}
			if err := f.check(args); err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			refs, err := a.deleteTargets(cmd.Context(), c, f, args)
			if err != nil {
				return err
			}
			return a.deletePods(cmd.Context(), c, f, refs)
		},
		ValidArgsFunction: a.completePodNames(&f.namespace),
	}
	addFileFlag(cmd, &f.files, "delete the pods of these manifests (file, directory or -); repeatable")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", `namespace of the named pods (default "default"); with --all, all namespaces when empty`)
	cmd.Flags().BoolVar(&f.all, "all", false, "delete every pod of -n, or of every namespace")
	cmd.Flags().Int64Var(&f.gracePeriod, "grace-period", -1, "seconds given to the containers to stop; 0 kills at once; -1 uses each pod's terminationGracePeriodSeconds")
	cmd.Flags().StringVar(&f.uid, "uid", "", "delete only this incarnation (uid) of the pod: another one is left running and the command fails (UID_MISMATCH)")
	cmd.Flags().BoolVar(&f.ignoreNotFound, "ignore-not-found", false, "a pod that does not exist is not an error")
	cmd.Flags().BoolVar(&f.wait, "wait", true, "wait until the pods are gone; false returns once the node is stopping them")
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "output format: json or yaml (the API's DeletePodResponse messages)")
	return cmd
}

// deleteObjectsArgs deletes the named stored objects (delete cm NAME,
// delete secret/NAME).
func (a *app) deleteObjectsArgs(cmd *cobra.Command, f deleteFlags, kind resKind, names []string) error {
	if err := checkFormat(f.output, formatText); err != nil {
		return err
	}
	c, err := a.client(cmd.Context())
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	return a.deleteObjects(cmd.Context(), c, objectKindOf(kind), f, names)
}

// check checks the output format and that the pods come from exactly one
// of the names (args), -f and --all.
func (f deleteFlags) check(args []string) error {
	if err := checkFormat(f.output, formatText, formatJSON, formatYAML); err != nil {
		return err
	}
	sources := 0
	for _, set := range []bool{len(args) > 0, len(f.files) > 0, f.all} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return usageErrorf("name the pods, or give -f or --all (one of them)")
	}
	if f.uid != "" && len(args) != 1 {
		return usageErrorf("--uid takes exactly one pod name")
	}
	return nil
}

// deleteTargets returns the namespace and name of each pod to delete: the
// Pods of the manifests of -f, every pod of -n (ListPods) with --all, or
// the named pods in -n.
func (a *app) deleteTargets(ctx context.Context, c *client.Client, f deleteFlags, args []string) ([][2]string, error) {
	var refs [][2]string
	switch {
	case len(f.files) > 0:
		m, err := a.readManifests(f.files, true)
		if err != nil {
			return nil, err
		}
		if len(m.Pods) == 0 {
			return nil, errors.New("no Pod in the manifests")
		}
		// A workload's pods beyond its replicas in the file too.
		if refs, err = a.withWorkloadPods(ctx, c, manifestRefs(m), m); err != nil {
			return nil, err
		}
	case f.all:
		lctx, cancel := a.callContext(ctx)
		resp, err := c.ListPods(lctx, &podsyncv1.ListPodsRequest{Namespace: f.namespace})
		cancel()
		if err != nil {
			return nil, err
		}
		for _, p := range resp.GetPods() {
			refs = append(refs, [2]string{p.GetMetadata().GetNamespace(), p.GetMetadata().GetName()})
		}
	default:
		for _, name := range args {
			refs = append(refs, [2]string{namespaceOr(f.namespace), name})
		}
	}
	return refs, nil
}

// maxParallelDeletes bounds the DeletePod calls delete has open at once.
const maxParallelDeletes = 16

// deletePods deletes the pods of refs side by side (at most
// maxParallelDeletes at once), as kubectl's delete has the API server stop
// them all before it waits, each bounded by --timeout only, and prints
// each result in the order of refs. A pod that is not found fails the
// command after the others are deleted, unless --ignore-not-found; the
// first error ends it after the others are done.
func (a *app) deletePods(ctx context.Context, c *client.Client, f deleteFlags, refs [][2]string) error {
	mw := &messageWriter{w: a.stdout, format: f.output}
	board := newDeleteBoard(a.stderr, isTerminal(a.stderr))
	defer board.end()
	type result struct {
		resp *podsyncv1.DeletePodResponse
		err  error
	}
	results := make([]chan result, len(refs))
	slots := make(chan struct{}, maxParallelDeletes)
	for i, ref := range refs {
		results[i] = make(chan result, 1)
		req := &podsyncv1.DeletePodRequest{Namespace: ref[0], Name: ref[1], Uid: f.uid}
		if f.gracePeriod >= 0 {
			req.GracePeriodSeconds = &f.gracePeriod
		}
		go func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			resp, err := a.deletePod(ctx, c, req, f.wait, board)
			results[i] <- result{resp, err}
		}()
	}
	var missing []string
	var firstErr error
	for i, ref := range refs {
		r := <-results[i]
		switch {
		case firstErr != nil:
			continue
		case r.err != nil:
			firstErr = r.err
			continue
		}
		if f.output != formatText {
			if err := board.print(func() error { return mw.write(r.resp) }); err != nil {
				firstErr = err
			}
		}
		if !r.resp.GetFound() {
			if !f.ignoreNotFound {
				missing = append(missing, ref[0]+"/"+ref[1])
			}
			continue
		}
		if f.output == formatText {
			if err := board.print(func() error {
				_, err := fmt.Fprintf(a.stdout, "pod %q deleted\n", ref[0]+"/"+ref[1])
				return err
			}); err != nil {
				firstErr = err
			}
		}
	}
	switch {
	case firstErr != nil:
		return firstErr
	case len(missing) == 0:
		return nil
	case len(missing) == 1:
		return failed("pod %q not found", missing[0])
	}
	return failed("pods %q not found", missing)
}

// deletePollInterval is how often delete reads the pod it waits for.
const deletePollInterval = 500 * time.Millisecond

// deleteQuietFor is how long a deletion runs before delete says what it
// waits for: a pod that stops at once needs no commentary.
const deleteQuietFor = time.Second

// deletePod deletes one pod. While DeletePod runs, it reads the pod every
// deletePollInterval and shows on stderr what the deletion waits for.
// Without wait it returns as soon as the pod is marked deleting (with the
// grace period asked for, or a shorter one): the node goes on stopping it
// on its own, as it does for a DeletePod whose caller went away.
func (a *app) deletePod(ctx context.Context, c *client.Client, req *podsyncv1.DeletePodRequest, wait bool, board *deleteBoard) (*podsyncv1.DeletePodResponse, error) {
	// Deleting waits for the grace period: bound it by --timeout only.
	dctx, cancel := a.waitContext(ctx)
	defer cancel()
	type result struct {
		resp *podsyncv1.DeletePodResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := c.DeletePod(dctx, req)
		done <- result{resp, err}
	}()
	key := req.GetNamespace() + "/" + req.GetName()
	defer board.done(key)
	start := time.Now()
	tick := time.NewTicker(deletePollInterval)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			return r.resp, r.err
		case <-tick.C:
		}
		gctx, gcancel := a.callContext(dctx)
		resp, err := c.GetPod(gctx, req.GetNamespace(), req.GetName())
		gcancel()
		pod := resp.GetPod()
		if err != nil || (req.GetUid() != "" && pod.GetMetadata().GetUid() != req.GetUid()) {
			// Gone, or another incarnation: DeletePod's own result says.
			continue
		}
		if !wait && markedDeleting(pod, req.GracePeriodSeconds) {
			cancel()
			<-done
			m := pod.GetMetadata()
			return &podsyncv1.DeletePodResponse{Found: true,
				Pod: &podsyncv1.PodRef{Namespace: m.GetNamespace(), Name: m.GetName(), Uid: m.GetUid()}}, nil
		}
		if time.Since(start) >= deleteQuietFor {
			board.show(key, deleteWait(pod, time.Now()))
		}
	}
}

// markedDeleting reports whether pod is being deleted with at most the
// grace period asked for (any, when grace is nil).
func markedDeleting(pod *podsyncv1.Pod, grace *int64) bool {
	m := pod.GetMetadata()
	if m.GetDeletionTimestamp() == nil {
		return false
	}
	return grace == nil || (m.DeletionGracePeriodSeconds != nil && m.GetDeletionGracePeriodSeconds() <= *grace)
}

// waitNote is what a deletion waits for: what, which changes when the
// deletion moves on, and detail, which counts down.
type waitNote struct{ what, detail string }

func (n waitNote) text() string {
	if n.detail == "" {
		return n.what
	}
	return n.what + " (" + n.detail + ")"
}

// deleteWait says what the deletion of pod waits for at now: the
// containers it is stopping and what is left of the grace period (its
// deletionTimestamp is the deadline, as the API server sets it), the
// kill once the grace period is over, or the removal of what is left.
func deleteWait(pod *podsyncv1.Pod, now time.Time) waitNote {
	m := pod.GetMetadata()
	subject := fmt.Sprintf("pod %q", m.GetNamespace()+"/"+m.GetName())
	var running []string
	st := pod.GetStatus()
	for _, list := range [][]*podsyncv1.ContainerStatus{st.GetEphemeralContainerStatuses(), st.GetContainerStatuses(), st.GetInitContainerStatuses()} {
		for _, cs := range list {
			if cs.GetState().GetRunning() != nil {
				running = append(running, strconv.Quote(cs.GetName()))
			}
		}
	}
	if len(running) == 0 {
		return waitNote{what: subject + ": containers stopped, removing its sandbox and volumes"}
	}
	containers := "container " + running[0]
	if len(running) > 1 {
		containers = "containers " + strings.Join(running, ", ")
	}
	deadline := m.GetDeletionTimestamp()
	if deadline == nil {
		return waitNote{what: subject + ": stopping " + containers}
	}
	left := deadline.AsTime().Sub(now).Round(time.Second)
	if left <= 0 {
		return waitNote{what: subject + ": grace period over, killing " + containers}
	}
	return waitNote{what: subject + ": stopping " + containers,
		detail: fmt.Sprintf("%s of the %ds grace period left", left, m.GetDeletionGracePeriodSeconds())}
}

// deleteBoard shows on stderr what the deletions under way wait for:
// on a terminal one line, rewritten as it counts down (the first pod's
// note, and how many more pods are being deleted), cleared while a
// result is printed and at the end; otherwise a line each time what a
// pod's deletion waits for changes.
type deleteBoard struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	order []string            // pods with a note, in the order they got one
	notes map[string]waitNote // by pod
	last  map[string]string   // the what last printed of each pod, off a terminal
	line  string              // what the terminal shows
}

func newDeleteBoard(w io.Writer, tty bool) *deleteBoard {
	return &deleteBoard{w: w, tty: tty, notes: map[string]waitNote{}, last: map[string]string{}}
}

// show sets what the deletion of pod waits for.
func (b *deleteBoard) show(pod string, n waitNote) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.tty {
		if b.last[pod] != n.what {
			_, _ = fmt.Fprintln(b.w, n.text())
		}
		b.last[pod] = n.what
		return
	}
	if _, ok := b.notes[pod]; !ok {
		b.order = append(b.order, pod)
	}
	b.notes[pod] = n
	b.draw()
}

// done drops the note of pod, whose deletion has ended.
func (b *deleteBoard) done(pod string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.notes[pod]; !ok {
		return
	}
	delete(b.notes, pod)
	b.order = slices.DeleteFunc(b.order, func(p string) bool { return p == pod })
	b.draw()
}

// print runs write, which prints a result, with the terminal's line
// cleared.
func (b *deleteBoard) print(write func() error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	line := b.line
	b.clear()
	err := write()
	if line != "" {
		b.draw()
	}
	return err
}

func (b *deleteBoard) end() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clear()
}

func (b *deleteBoard) draw() {
	if len(b.order) == 0 {
		b.clear()
		return
	}
	text := b.notes[b.order[0]].text()
	if more := len(b.order) - 1; more > 0 {
		text += fmt.Sprintf(" — and %d more", more)
	}
	_, _ = fmt.Fprintf(b.w, "\r\x1b[K%s", text)
	b.line = text
}

func (b *deleteBoard) clear() {
	if b.line != "" {
		_, _ = fmt.Fprint(b.w, "\r\x1b[K")
		b.line = ""
	}
}
