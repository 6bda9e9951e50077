package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
)

// logsFlags are logs' flags.
type logsFlags struct {
	namespace      string
	container      string
	selector       string
	allContainers  bool
	prefix         bool
	maxLogRequests int
	follow         bool
	tail           int64
	since          time.Duration
	sinceTime      string
	previous       bool
	timestamps     bool
	limitBytes     int64
}

// defaultSelectorTail is kubectl's --tail when -l selects the pods.
const defaultSelectorTail = 10

func (a *app) newLogsCommand() *cobra.Command {
	var f logsFlags
	cmd := &cobra.Command{
		Use:   "logs (POD | pod/POD | -l SELECTOR)",
		Short: "Print a container's output",
		Long: "logs prints the output of a container of a pod, as kubectl logs does: -c names\n" +
			"the container (the pod's default container without it), --all-containers\n" +
			"prints every container's, -p reads the previous instance (the one before the\n" +
			"last restart), -f follows new lines across restarts until interrupted.\n\n" +
			"-l prints the logs of every pod of -n whose labels match, the last 10 lines\n" +
			"of each unless --tail says otherwise; --prefix starts each line with\n" +
			"[pod/NAME/CONTAINER]. -f follows at most --max-log-requests streams at once.",
		Example: "  podsyncctl logs web\n" +
			"  podsyncctl logs init-sidecar -c log-shipper -f --tail 5\n" +
			"  podsyncctl logs crashloop --previous --timestamps\n" +
			"  podsyncctl logs -l app=web --all-containers --prefix -f",
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case f.selector != "" && len(args) > 0:
				return usageErrorf("give a pod or -l, not both")
			case f.selector == "" && len(args) == 0:
				return usageErrorf("logs needs a pod (POD or pod/POD) or a selector (-l)")
			case f.allContainers && f.container != "":
				return usageErrorf("--all-containers and -c exclude each other")
			case f.maxLogRequests < 1:
				return usageErrorf("--max-log-requests must be at least 1")
			}
			tailSet := cmd.Flags().Changed("tail")
			if f.selector != "" && !tailSet {
				f.tail, tailSet = defaultSelectorTail, true
			}
			req, err := a.logsRequest(f, "", tailSet)
			if err != nil {
				return err
			}
			var pod string
			if len(args) == 1 {
				if pod, err = podArg(args[0]); err != nil {
					return err
				}
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			targets, err := a.logTargets(cmd.Context(), c, f, pod)
			if err != nil || len(targets) == 0 {
				return err
			}
			if f.follow && len(targets) > f.maxLogRequests {
				return failed("you are attempting to follow %d log streams, but maximum allowed concurrency is %d, use --max-log-requests to increase the limit",
					len(targets), f.maxLogRequests)
			}
			ctx, cancel := a.callContext(cmd.Context())
			if f.follow {
				ctx, cancel = a.waitContext(cmd.Context())
			}
			defer cancel()
			err = a.writeAllLogs(ctx, c, req, targets, f.prefix)
			if f.follow && cmd.Context().Err() != nil && isCanceled(err) {
				// ^C is how a follower ends.
				return nil
			}
			return err
		},
		ValidArgsFunction: a.completePodNames(&f.namespace),
	}
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", `namespace of the pod (default "default")`)
	cmd.Flags().StringVarP(&f.container, "container", "c", "", "container name; may be omitted when the pod has one container")
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "print the logs of the pods of -n whose labels match (app=web,tier!=db)")
	cmd.Flags().BoolVar(&f.allContainers, "all-containers", false, "print the logs of every container of the pods (init, app and ephemeral)")
	cmd.Flags().BoolVar(&f.prefix, "prefix", false, "start each line with [pod/NAME/CONTAINER]")
	cmd.Flags().IntVar(&f.maxLogRequests, "max-log-requests", 5, "the most log streams -f follows at once (with -l or --all-containers)")
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "stream new lines until interrupted")
	cmd.Flags().Int64Var(&f.tail, "tail", -1, "print only the last N lines (-1: all; 10 with -l)")
	cmd.Flags().DurationVar(&f.since, "since", 0, "print only lines newer than this, such as 5m")
	cmd.Flags().StringVar(&f.sinceTime, "since-time", "", "print only lines written at or after this RFC 3339 time")
	cmd.Flags().BoolVarP(&f.previous, "previous", "p", false, "print the previous instance's output (before the last restart)")
	cmd.Flags().BoolVar(&f.timestamps, "timestamps", false, "prefix each line with its RFC 3339 time")
	cmd.Flags().Int64Var(&f.limitBytes, "limit-bytes", 0, "stop after this many bytes of output (0: no limit)")
	return cmd
}

// logTarget is one container whose logs are printed.
type logTarget struct{ namespace, pod, container string }

// logTargets returns the containers logs prints: of the named pod, or of
// every pod -l selects (in the order ListPods gives, namespace and name),
// the one -c names, the pod's default container (announced as kubectl
// announces it), or all of them with --all-containers. No pod selected
// is kubectl's "No resources found" on stderr.
func (a *app) logTargets(ctx context.Context, c *client.Client, f logsFlags, pod string) ([]logTarget, error) {
	ns := namespaceOr(f.namespace)
	if pod != "" && !f.allContainers {
		container, err := a.defaultContainer(ctx, c, ns, pod, f.container)
		if err != nil {
			return nil, err
		}
		return []logTarget{{ns, pod, container}}, nil
	}
	lctx, cancel := a.callContext(ctx)
	defer cancel()
	var pods []*podsyncv1.Pod
	if pod != "" {
		resp, err := c.GetPod(lctx, ns, pod)
		if err != nil {
			return nil, err
		}
		pods = append(pods, resp.GetPod())
	} else {
		resp, err := c.ListPods(lctx, &podsyncv1.ListPodsRequest{Namespace: ns, LabelSelector: f.selector})
		if err != nil {
			return nil, err
		}
		pods = resp.GetPods()
	}
	if len(pods) == 0 {
		_, _ = fmt.Fprintf(a.stderr, "No resources found in %s namespace.\n", ns)
		return nil, nil
	}
	var targets []logTarget
	for _, p := range pods {
		name := p.GetMetadata().GetName()
		if !f.allContainers {
			container, err := a.podDefaultContainer(p, f.container)
			if err != nil {
				return nil, err
			}
			targets = append(targets, logTarget{ns, name, container})
			continue
		}
		spec := p.GetSpec()
		for _, ct := range spec.GetInitContainers() {
			targets = append(targets, logTarget{ns, name, ct.GetName()})
		}
		for _, ct := range spec.GetContainers() {
			targets = append(targets, logTarget{ns, name, ct.GetName()})
		}
		for _, ct := range spec.GetEphemeralContainers() {
			targets = append(targets, logTarget{ns, name, ct.GetName()})
		}
	}
	return targets, nil
}

// writeAllLogs prints the logs of targets: one after the other, or, when
// following several, side by side with whole lines interleaved; the
// first stream that fails ends the others.
func (a *app) writeAllLogs(ctx context.Context, c *client.Client, base *podsyncv1.GetContainerLogsRequest, targets []logTarget, prefix bool) error {
	out := &lineWriter{w: bufio.NewWriter(a.stdout), flush: base.GetFollow()}
	reqFor := func(t logTarget) (*podsyncv1.GetContainerLogsRequest, string) {
		req := proto.Clone(base).(*podsyncv1.GetContainerLogsRequest)
		req.Namespace, req.Name, req.Container = t.namespace, t.pod, t.container
		if prefix {
			return req, "[pod/" + t.pod + "/" + t.container + "] "
		}
		return req, ""
	}
	if !base.GetFollow() || len(targets) == 1 {
		for _, t := range targets {
			req, p := reqFor(t)
			if err := a.writeLogs(ctx, c, req, out, p); err != nil {
				_ = out.Flush()
				return err
			}
		}
		return out.Flush()
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(targets))
	for _, t := range targets {
		req, p := reqFor(t)
		go func() { errs <- a.writeLogs(gctx, c, req, out, p) }()
	}
	var err error
	for range targets {
		if e := <-errs; e != nil && err == nil {
			err = e
			cancel()
		}
	}
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	return err
}

// lineWriter writes whole lines for several streams at once; flush
// writes each line through at once (a follower's).
type lineWriter struct {
	mu    sync.Mutex
	w     *bufio.Writer
	flush bool
}

func (l *lineWriter) line(parts ...[]byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range parts {
		if _, err := l.w.Write(p); err != nil {
			return err
		}
	}
	if err := l.w.WriteByte('\n'); err != nil {
		return err
	}
	if l.flush {
		return l.w.Flush()
	}
	return nil
}

// Flush writes what is buffered.
func (l *lineWriter) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Flush()
}

// logsRequest is the GetContainerLogs request for pod from the flags;
// tailSet says whether --tail was given. --since and --since-time
// exclude each other.
func (a *app) logsRequest(f logsFlags, pod string, tailSet bool) (*podsyncv1.GetContainerLogsRequest, error) {
	req := &podsyncv1.GetContainerLogsRequest{
		Namespace: namespaceOr(f.namespace), Name: pod, Container: f.container,
		Follow: f.follow, Previous: f.previous, Timestamps: f.timestamps,
	}
	if tailSet && f.tail >= 0 {
		req.TailLines = &f.tail
	}
	if f.limitBytes > 0 {
		req.LimitBytes = &f.limitBytes
	}
	switch {
	case f.since > 0 && f.sinceTime != "":
		return nil, usageErrorf("--since and --since-time exclude each other")
	case f.since > 0:
		req.SinceTime = timestamppb.New(a.now().Add(-f.since))
	case f.sinceTime != "":
		t, err := time.Parse(time.RFC3339, f.sinceTime)
		if err != nil {
			return nil, usageErrorf("--since-time %q: want RFC 3339, such as 2026-01-02T15:04:05Z", f.sinceTime)
		}
		req.SinceTime = timestamppb.New(t)
	}
	return req, nil
}

// writeLogs prints the lines GetContainerLogs streams for req to out,
// each after prefix and, when req asks for timestamps, its RFC 3339 time.
func (a *app) writeLogs(ctx context.Context, c *client.Client, req *podsyncv1.GetContainerLogsRequest, out *lineWriter, prefix string) error {
	return c.Logs(ctx, req, func(l *podsyncv1.LogLine) error {
		var ts []byte
		if req.GetTimestamps() {
			ts = []byte(l.GetTime().AsTime().Format(time.RFC3339Nano) + " ")
		}
		return out.line([]byte(prefix), ts, l.GetContent())
	})
}

// podArg is the pod a command's argument names: NAME, or kubectl's
// pod/NAME (pods/NAME, po/NAME). Another type is a usage error.
func podArg(arg string) (string, error) {
	word, name, ok := strings.Cut(arg, "/")
	if !ok {
		return arg, nil
	}
	if r, known := resourceWords[strings.ToLower(word)]; !known || r != resourcePods || name == "" {
		return "", usageErrorf("%q: name a pod as NAME or pod/NAME", arg)
	}
	return name, nil
}

// isCanceled reports whether err says the call was cancelled.
func isCanceled(err error) bool {
	return err == nil || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled
}
