package cli

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/spf13/cobra"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func (a *app) newHealthCommand() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check that podsyncd serves (grpc.health.v1)",
		Long: "health prints podsyncd's health: SERVING once it answers and its container\n" +
			"runtime does, NOT_SERVING otherwise. The exit code is 0 only for SERVING.\n" +
			"--wait polls until SERVING or until the wait is over, for scripts that\n" +
			"start podsyncd.",
		Example: "  podsyncctl health\n" +
			"  podsyncctl health --wait 30s",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			deadline := time.Now().Add(wait)
			for {
				ctx, cancel := a.callContext(cmd.Context())
				st, err := c.Health(ctx)
				cancel()
				if err == nil && st == healthpb.HealthCheckResponse_SERVING {
					_, err := fmt.Fprintln(a.stdout, st)
					return err
				}
				if wait <= 0 || !time.Now().Before(deadline) {
					if err != nil {
						return err
					}
					_, _ = fmt.Fprintln(a.stdout, st)
					return failed("podsyncd at %s is %s", a.resolved, st)
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(200 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "keep trying until SERVING for this long")
	return cmd
}

func (a *app) newVersionCommand() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print podsyncctl's version, and podsyncd's health if it is reachable",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := fmt.Fprintf(a.stdout, "client: podsyncctl %s (%s, %s/%s)\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH); err != nil {
				return err
			}
			if clientOnly {
				return nil
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			st, err := c.Health(ctx)
			if err != nil {
				_, err = fmt.Fprintf(a.stdout, "server: podsyncd at %s is not reachable\n", a.resolved)
				return err
			}
			// NOTE(cli): the API does not report podsyncd's version; its
			// health is what a client can learn.
			_, err = fmt.Fprintf(a.stdout, "server: podsyncd at %s, %s\n", a.resolved, st)
			return err
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only the client's version, without contacting podsyncd")
	return cmd
}
