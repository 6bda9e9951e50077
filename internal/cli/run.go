package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
)

// waitForValues maps --wait-for to the API.
var waitForValues = map[string]podsyncv1.WaitFor{
	"running":   podsyncv1.WaitFor_WAIT_FOR_RUNNING,
	"ready":     podsyncv1.WaitFor_WAIT_FOR_READY,
	"succeeded": podsyncv1.WaitFor_WAIT_FOR_SUCCEEDED,
}

// runFlags are run's flags.
type runFlags struct {
	files        []string
	waitFor      string
	timeout      time.Duration
	allOrNothing bool
	minReady     int32
	output       string
}

func (a *app) newRunCommand() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run -f FILE...",
		Short: "Run the pods of manifests and wait until they run, are ready or succeed",
		Long: "run sends the Pods of the manifests (with the ConfigMaps and Secrets they use) to\n" +
			"podsyncd in one RunPods call. podsyncd admits them in order, starts them and\n" +
			"waits, per pod, until it reaches --wait-for, fails, or --timeout passes. run\n" +
			"prints each sync step and status change as it happens, then a summary table.\n\n" +
			"--wait-for running (the default): every regular container runs, and has stayed\n" +
			"up --min-ready-seconds (one with a readiness probe: until it is ready);\n" +
			"--wait-for ready: the pod is Ready (readiness probes passed);\n" +
			"--wait-for succeeded: the pod ran to completion (phase Succeeded).\n" +
			"A pod that fails or crash-loops before its target is reported as failed, at\n" +
			"once, and so is one whose image the registry says is not there or refuses\n" +
			"(the node goes on retrying it). A pod that waits for a ConfigMap or Secret\n" +
			"is waited for; at its timeout, the message names what each container waits\n" +
			"for and its last event. A step that repeats (a back-off) is printed once.\n\n" +
			"The pods stay on the node after run returns, kept running by podsyncd until\n" +
			"`podsyncctl delete`. The exit code is 1 when any pod was rejected, failed or\n" +
			"timed out.",
		Example: "  podsyncctl run -f examples/web.yaml --wait-for ready\n" +
			"  podsyncctl run -f examples/job.yaml --wait-for succeeded --timeout 1m\n" +
			"  podsyncctl run -f manifests/ --all-or-nothing\n" +
			"  kubectl create --dry-run=client -o yaml ... | podsyncctl run -f -",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, claims, err := a.runRequest(f)
			if err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			if err := a.createClaims(cmd.Context(), c, claims, a.stderr); err != nil {
				return err
			}
			if err := a.pruneWorkloads(cmd.Context(), c, req); err != nil {
				return err
			}
			p := newRunPrinter(a, req, f.output)
			res, err := c.RunPods(cmd.Context(), req, p.progress)
			if err != nil {
				return err
			}
			if err := p.summary(res); err != nil {
				return err
			}
			if !res.OK() {
				s := res.Summary
				return failed("%d of %d pods did not reach %s: %s", len(s.GetResults())-int(s.GetReachedTarget()),
					len(s.GetResults()), targetWord(req.GetWaitFor()), countsPhrase(s))
			}
			return nil
		},
	}
	addFileFlag(cmd, &f.files, "manifest file, directory (its .yaml, .yml and .json files) or - for stdin; repeatable")
	cmd.Flags().StringVar(&f.waitFor, "wait-for", "running", "what to wait for, per pod: running, ready or succeeded")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long to wait for each pod, from its admission (at most 24h)")
	cmd.Flags().BoolVar(&f.allOrNothing, "all-or-nothing", false, "run no pod when admission refuses any of them")
	cmd.Flags().Int32Var(&f.minReady, "min-ready-seconds", 3, "with --wait-for running, how long each container must stay up (one with a readiness probe: until it is ready once); 0: running is enough")
	cmd.Flags().StringVarP(&f.output, "output", "o", "", "output format: json or yaml (the API's RunPodsResponse messages)")
	return cmd
}

// runRequest checks the flags and builds the RunPods request from the
// manifests of -f: their Pods, with the ConfigMaps and Secrets they use,
// the target of --wait-for, --timeout and --all-or-nothing; and returns
// the claims of their PersistentVolumeClaim documents.
func (a *app) runRequest(f runFlags) (*podsyncv1.RunPodsRequest, []convert.ClaimRef, error) {
	if len(f.files) == 0 {
		return nil, nil, usageErrorf("run needs at least one -f")
	}
	wf, ok := waitForValues[f.waitFor]
	if !ok {
		return nil, nil, usageErrorf("--wait-for %q: want running, ready or succeeded", f.waitFor)
	}
	if err := checkFormat(f.output, formatText, formatJSON, formatYAML); err != nil {
		return nil, nil, err
	}
	if f.timeout <= 0 {
		return nil, nil, usageErrorf("--timeout %s: must be positive", f.timeout)
	}
	m, err := a.readManifests(f.files, false)
	if err != nil {
		return nil, nil, err
	}
	if len(m.Pods) == 0 {
		return nil, nil, errors.New("no Pod in the manifests")
	}
	req, err := client.RunPodsRequestFromManifests(m)
	if err != nil {
		return nil, nil, err
	}
	req.WaitFor = wf
	req.Timeout = durationpb.New(f.timeout)
	if f.allOrNothing {
		req.AdmissionMode = podsyncv1.AdmissionMode_ADMISSION_MODE_ALL_OR_NOTHING
	}
	if f.minReady < 0 {
		return nil, nil, usageErrorf("--min-ready-seconds %d: must not be negative", f.minReady)
	}
	if wf == podsyncv1.WaitFor_WAIT_FOR_RUNNING {
		req.MinReadySeconds = f.minReady
	}
	return req, m.Claims, nil
}

// countsPhrase is "1 rejected, 2 failed" from a summary.
func countsPhrase(s *podsyncv1.RunPodsSummary) string {
	var parts []string
	for _, c := range []struct {
		n    int32
		what string
	}{{s.GetRejected(), "rejected"}, {s.GetFailed(), "failed"}, {s.GetTimedOut(), "timed out"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return strings.Join(parts, ", ")
}

// runPrinter prints a RunPods stream: progress lines as they come, then
// the summary.
type runPrinter struct {
	a      *app
	w      io.Writer
	format string
	mw     *messageWriter
	specs  map[string]*podsyncv1.PodSpec // by namespace/name
	width  int                           // of the pod column
	last   map[string]string             // last status line per pod
	// failing are the failed and backed-off steps printed, by pod and
	// step target, so that a back-off's repeats print once; a step that
	// succeeds clears its target's.
	failing map[string]map[string]bool
	target  podsyncv1.WaitFor
	err     error
}

func newRunPrinter(a *app, req *podsyncv1.RunPodsRequest, format string) *runPrinter {
	p := &runPrinter{a: a, w: a.stdout, format: format, mw: &messageWriter{w: a.stdout, format: format},
		specs: map[string]*podsyncv1.PodSpec{}, last: map[string]string{}, failing: map[string]map[string]bool{}, target: req.GetWaitFor()}
	for _, pod := range req.GetPods() {
		key := pod.GetMetadata().GetNamespace() + "/" + pod.GetMetadata().GetName()
		p.specs[key] = pod.GetSpec()
		p.width = max(p.width, len(key))
	}
	return p
}

func refKey(r *podsyncv1.PodRef) string { return r.GetNamespace() + "/" + r.GetName() }

// progress is RunPods' progress callback.
func (p *runPrinter) progress(m *podsyncv1.RunPodsResponse) {
	if p.err != nil || m.GetSummary() != nil {
		return
	}
	if p.format != formatText {
		p.err = p.mw.write(m)
		return
	}
	now := p.a.now()
	switch {
	case m.GetStep() != nil:
		s := m.GetStep()
		if p.repeat(s) {
			return
		}
		p.err = writeStep(p.w, p.prefix(s.GetPod()), s.GetStep(), now, p.a.colors)
	case m.GetStatus() != nil:
		u := m.GetStatus()
		key := refKey(u.GetPod())
		sum := summarizePod(p.specs[key], u.GetStatus(), now)
		line := fmt.Sprintf("%s %s ready", sum.Status, sum.Ready)
		if sum.RestartCount > 0 {
			line += fmt.Sprintf(", %d restarts", sum.RestartCount)
		}
		if line == p.last[key] {
			return
		}
		p.last[key] = line
		_, p.err = fmt.Fprintf(p.w, "%s%s %s\n", p.prefix(u.GetPod()), p.a.colors.dim("status"), line)
	}
}

// repeat reports whether a failed or backed-off step says again what one
// of its pod and target said since the target last succeeded (a
// back-off's retries), and then is not printed.
func (p *runPrinter) repeat(ps *podsyncv1.PodStep) bool {
	s := ps.GetStep()
	key := refKey(ps.GetPod()) + "\x00" + s.GetAction().String() + "\x00" + s.GetTarget()
	if s.GetOutcome() == podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED {
		delete(p.failing, key)
		return false
	}
	what := s.GetOutcome().String() + "\x00" + s.GetReason() + "\x00" + s.GetMessage()
	if s.GetOutcome() == podsyncv1.StepOutcome_STEP_OUTCOME_BACKING_OFF {
		// The message and the next retry change with each back-off.
		what = s.GetOutcome().String() + "\x00" + s.GetReason()
	}
	if p.failing[key][what] {
		return true
	}
	if p.failing[key] == nil {
		p.failing[key] = map[string]bool{}
	}
	p.failing[key][what] = true
	return false
}

func (p *runPrinter) prefix(r *podsyncv1.PodRef) string {
	return fmt.Sprintf("%-*s  ", p.width, refKey(r))
}

// outcomeWord is the RESULT column.
func outcomeWord(o podsyncv1.PodOutcome) string {
	switch o {
	case podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET:
		return "OK"
	case podsyncv1.PodOutcome_POD_OUTCOME_REJECTED:
		return "Rejected"
	case podsyncv1.PodOutcome_POD_OUTCOME_FAILED:
		return "Failed"
	case podsyncv1.PodOutcome_POD_OUTCOME_TIMED_OUT:
		return "TimedOut"
	}
	return "Unknown"
}

// targetWord names a WaitFor in prose.
func targetWord(w podsyncv1.WaitFor) string {
	switch w {
	case podsyncv1.WaitFor_WAIT_FOR_READY:
		return "Ready"
	case podsyncv1.WaitFor_WAIT_FOR_SUCCEEDED:
		return "Succeeded"
	}
	return "Running"
}

// summary prints the result table, the details of every pod that did not
// reach its target, and a closing line.
func (p *runPrinter) summary(res *client.RunResult) error {
	if p.err != nil {
		return p.err
	}
	if p.format != formatText {
		return p.mw.write(&podsyncv1.RunPodsResponse{Event: &podsyncv1.RunPodsResponse_Summary{Summary: res.Summary}})
	}
	return writeRunSummary(p.w, res.Summary, p.specs, p.target, p.a.now(), p.a.colors)
}

// writeRunSummary prints a RunPods summary as a table, the details of the
// pods that did not reach target, and a closing line.
func writeRunSummary(w io.Writer, s *podsyncv1.RunPodsSummary, specs map[string]*podsyncv1.PodSpec, target podsyncv1.WaitFor, now time.Time, colors palette) error {
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	t := newTable(w, "NAMESPACE", "NAME", "PHASE", "READY", "RESTARTS", "RESULT", "REASON")
	for _, r := range s.GetResults() {
		phase, ready, restarts := "<none>", "<none>", "<none>"
		if st := r.GetStatus(); st != nil {
			sum := summarizePod(specs[refKey(r.GetPod())], st, now)
			phase, ready, restarts = orNone(st.GetPhase()), sum.Ready, sum.Restarts
		}
		t.row(r.GetPod().GetNamespace(), r.GetPod().GetName(), phase, ready, restarts, outcomeWord(r.GetOutcome()), orNone(r.GetReason()))
	}
	if err := t.flush(); err != nil {
		return err
	}
	var b strings.Builder
	for _, r := range s.GetResults() {
		if r.GetOutcome() == podsyncv1.PodOutcome_POD_OUTCOME_REACHED_TARGET {
			continue
		}
		fmt.Fprintf(&b, "\n%s: %s", refKey(r.GetPod()), colors.bad(outcomeWord(r.GetOutcome())))
		if r.GetReason() != "" {
			fmt.Fprintf(&b, " (%s)", r.GetReason())
		}
		if m := r.GetMessage(); m != "" {
			fmt.Fprintf(&b, ": %s", oneLine(m))
		}
		b.WriteString("\n")
		for _, fc := range r.GetFailedContainers() {
			fmt.Fprintf(&b, "  %s %s:", containerKind(fc.GetContainerType()), fc.GetName())
			var parts []string
			if fc.ExitCode != nil {
				parts = append(parts, fmt.Sprintf("exit code %d", fc.GetExitCode()))
			}
			if fc.GetReason() != "" {
				parts = append(parts, fc.GetReason())
			}
			if fc.GetRestartCount() > 0 {
				parts = append(parts, fmt.Sprintf("%d restarts", fc.GetRestartCount()))
			}
			if fc.GetMessage() != "" {
				parts = append(parts, oneLine(fc.GetMessage()))
			}
			fmt.Fprintf(&b, " %s\n", strings.Join(parts, ", "))
			if len(fc.GetLogTail()) > 0 {
				b.WriteString("    last output:\n")
				for _, l := range fc.GetLogTail() {
					fmt.Fprintf(&b, "    | %s\n", l)
				}
			}
		}
	}
	// A batch that failed ends with the error line on stderr instead.
	if n := len(s.GetResults()); int(s.GetReachedTarget()) == n {
		fmt.Fprintf(&b, "\n%s\n", colors.good(fmt.Sprintf("%d of %d pods reached %s", n, n, targetWord(target))))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
