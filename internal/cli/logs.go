package cli

import (
	"bufio"
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
)

// logsFlags are logs' flags.
type logsFlags struct {
	namespace  string
	container  string
	follow     bool
	tail       int64
	since      time.Duration
	sinceTime  string
	previous   bool
	timestamps bool
	limitBytes int64
}

func (a *app) newLogsCommand() *cobra.Command {
	var f logsFlags
	cmd := &cobra.Command{
		Use:   "logs POD",
		Short: "Print a container's output",
		Long: "logs prints the output of a container of a pod, as kubectl logs does: -c names\n" +
			"the container (needed when the pod has several), -p reads the previous\n" +
			"instance (the one before the last restart), -f follows new lines across\n" +
			"restarts until interrupted.",
		Example: "  podsyncctl logs web\n" +
			"  podsyncctl logs init-sidecar -c log-shipper -f --tail 5\n" +
			"  podsyncctl logs crashloop --previous --timestamps",
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := a.logsRequest(f, args[0], cmd.Flags().Changed("tail"))
			if err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			if req.Container, err = a.defaultContainer(cmd.Context(), c, f.namespace, args[0], req.Container); err != nil {
				return err
			}
			ctx, cancel := a.callContext(cmd.Context())
			if f.follow {
				ctx, cancel = a.waitContext(cmd.Context())
			}
			defer cancel()
			err = a.writeLogs(ctx, c, req)
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
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "stream new lines until interrupted")
	cmd.Flags().Int64Var(&f.tail, "tail", -1, "print only the last N lines (-1: all)")
	cmd.Flags().DurationVar(&f.since, "since", 0, "print only lines newer than this, such as 5m")
	cmd.Flags().StringVar(&f.sinceTime, "since-time", "", "print only lines written at or after this RFC 3339 time")
	cmd.Flags().BoolVarP(&f.previous, "previous", "p", false, "print the previous instance's output (before the last restart)")
	cmd.Flags().BoolVar(&f.timestamps, "timestamps", false, "prefix each line with its RFC 3339 time")
	cmd.Flags().Int64Var(&f.limitBytes, "limit-bytes", 0, "stop after this many bytes of output (0: no limit)")
	return cmd
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

// writeLogs prints the lines GetContainerLogs streams for req to stdout,
// each after its RFC 3339 time when req asks for timestamps. Output is
// buffered; a follower flushes every line so that it shows at once.
func (a *app) writeLogs(ctx context.Context, c *client.Client, req *podsyncv1.GetContainerLogsRequest) error {
	out := bufio.NewWriter(a.stdout)
	err := c.Logs(ctx, req, func(l *podsyncv1.LogLine) error {
		if req.GetTimestamps() {
			if _, err := out.WriteString(l.GetTime().AsTime().Format(time.RFC3339Nano) + " "); err != nil {
				return err
			}
		}
		if _, err := out.Write(l.GetContent()); err != nil {
			return err
		}
		if err := out.WriteByte('\n'); err != nil {
			return err
		}
		if req.GetFollow() {
			return out.Flush()
		}
		return nil
	})
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	return err
}

// isCanceled reports whether err says the call was cancelled.
func isCanceled(err error) bool {
	return err == nil || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled
}
