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
)

func (a *app) newLogsCommand() *cobra.Command {
	var (
		namespace  string
		container  string
		follow     bool
		tail       int64
		since      time.Duration
		sinceTime  string
		previous   bool
		timestamps bool
		limitBytes int64
	)
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
			req := &podsyncv1.GetContainerLogsRequest{
				Namespace: namespaceOr(namespace), Name: args[0], Container: container,
				Follow: follow, Previous: previous, Timestamps: timestamps,
			}
			if cmd.Flags().Changed("tail") && tail >= 0 {
				req.TailLines = &tail
			}
			if limitBytes > 0 {
				req.LimitBytes = &limitBytes
			}
			switch {
			case since > 0 && sinceTime != "":
				return usageErrorf("--since and --since-time exclude each other")
			case since > 0:
				req.SinceTime = timestamppb.New(a.now().Add(-since))
			case sinceTime != "":
				t, err := time.Parse(time.RFC3339, sinceTime)
				if err != nil {
					return usageErrorf("--since-time %q: want RFC 3339, such as 2026-01-02T15:04:05Z", sinceTime)
				}
				req.SinceTime = timestamppb.New(t)
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			ctx, cancel := a.callContext(cmd.Context())
			if follow {
				ctx, cancel = a.waitContext(cmd.Context())
			}
			defer cancel()
			// Output is buffered; a follower flushes every line so that
			// it shows at once.
			out := bufio.NewWriter(a.stdout)
			err = c.Logs(ctx, req, func(l *podsyncv1.LogLine) error {
				if timestamps {
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
				if follow {
					return out.Flush()
				}
				return nil
			})
			if ferr := out.Flush(); err == nil {
				err = ferr
			}
			if follow && cmd.Context().Err() != nil && isCanceled(err) {
				// ^C is how a follower ends.
				return nil
			}
			return err
		},
		ValidArgsFunction: a.completePodNames(&namespace),
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", `namespace of the pod (default "default")`)
	cmd.Flags().StringVarP(&container, "container", "c", "", "container name; may be omitted when the pod has one container")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream new lines until interrupted")
	cmd.Flags().Int64Var(&tail, "tail", -1, "print only the last N lines (-1: all)")
	cmd.Flags().DurationVar(&since, "since", 0, "print only lines newer than this, such as 5m")
	cmd.Flags().StringVar(&sinceTime, "since-time", "", "print only lines written at or after this RFC 3339 time")
	cmd.Flags().BoolVarP(&previous, "previous", "p", false, "print the previous instance's output (before the last restart)")
	cmd.Flags().BoolVar(&timestamps, "timestamps", false, "prefix each line with its RFC 3339 time")
	cmd.Flags().Int64Var(&limitBytes, "limit-bytes", 0, "stop after this many bytes of output (0: no limit)")
	return cmd
}

// isCanceled reports whether err says the call was cancelled.
func isCanceled(err error) bool {
	return err == nil || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled
}
