package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/podsync/podsync/client"
)

// Exit codes of Main.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitFailure: the command failed — podsyncd refused or could not do
	// the call, a manifest is invalid, or pods that run or sync ran did not
	// reach their target (rejected, failed, timed out, failed steps).
	ExitFailure = 1
	// ExitUsage: the command line is wrong (unknown command or flag, bad
	// flag value, missing argument).
	ExitUsage = 2
	// ExitInterrupted: the command was interrupted (SIGINT, SIGTERM) before
	// it finished; logs -f and watch end with ExitOK instead.
	ExitInterrupted = 130
)

// Main runs podsyncctl with args (without the program name) until it is
// done or ctx ends, and returns its exit code (ExitOK, ExitFailure,
// ExitUsage, ExitInterrupted). Errors are printed on stderr as
// "error: …", with one line per field violation.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, now: time.Now}
	return a.main(ctx, args)
}

// app is one run of podsyncctl: its streams, environment and global flags.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time

	// Global flags.
	address    string
	configPath string
	tlsCert    string
	tlsKey     string
	tlsCA      string
	insecure   bool
	timeout    time.Duration

	// resolved is the address dialled, for error messages.
	resolved string
	colors   palette
}

func (a *app) main(ctx context.Context, args []string) int {
	a.colors = newPalette(a.stdout, a.getenv)
	root := a.newRoot()
	root.SetArgs(args)
	ctx, endTrace := a.startTrace(ctx)
	cmd, err := root.ExecuteContextC(ctx)
	endTrace(cmd, err)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		if ee.msg != "" {
			_, _ = fmt.Fprintf(a.stderr, "error: %s\n", ee.msg)
		}
		return ee.code
	case errors.As(err, new(usageError)):
		_, _ = fmt.Fprintf(a.stderr, "error: %s\n", err)
		_, _ = fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return ExitUsage
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled):
		_, _ = fmt.Fprintln(a.stderr, "error: interrupted")
		return ExitInterrupted
	}
	a.writeError(err)
	return ExitFailure
}

// usageError marks an error in how a command was called.
type usageError struct{ error }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// usageArgs makes the error of an argument check a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// exitError ends a command with code after it has printed its results;
// msg, when set, is printed as the error.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// failed ends a command with ExitFailure and the message.
func failed(format string, args ...any) error {
	return &exitError{code: ExitFailure, msg: fmt.Sprintf(format, args...)}
}

func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "podsyncctl",
		Short: "Run Kubernetes Pods on a node through podsyncd",
		Long: "podsyncctl talks to podsyncd, which runs Kubernetes Pods on one node with the\n" +
			"kubelet's semantics. It reads standard Pod, ConfigMap and Secret manifests\n" +
			"(YAML or JSON, multi-document, kind: List).\n\n" +
			"podsyncd's address is, in order: --address, $PODSYNC_ADDRESS, the address of the\n" +
			"config file (--config, $PODSYNC_CONFIG, else ~/.config/podsync/config.yaml), and\n" +
			client.DefaultAddress + ".\n\n" +
			"Exit codes: 0 success; 1 the command failed, or pods did not reach their\n" +
			"target; 2 usage error; 130 interrupted.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Without arguments the root prints its help; an argument that is no
	// command is a usage error (with cobra's suggestions).
	root.Args = cobra.ArbitraryArgs
	root.SuggestionsMinimumDistance = 2
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usageError{errors.New(msg)}
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.address, "address", "", `podsyncd's address: unix:///path, /path, tcp://host:port or host:port (default $PODSYNC_ADDRESS, the config file's, or `+client.DefaultAddress+")")
	pf.StringVar(&a.configPath, "config", "", "client config file with address and TLS files (default $PODSYNC_CONFIG or ~/.config/podsync/config.yaml)")
	pf.StringVar(&a.tlsCert, "tls-cert-file", "", "client certificate (PEM) for a TCP address (mutual TLS)")
	pf.StringVar(&a.tlsKey, "tls-key-file", "", "client private key (PEM) for a TCP address")
	pf.StringVar(&a.tlsCA, "tls-ca-file", "", "CA certificates (PEM) that signed podsyncd's certificate")
	pf.BoolVar(&a.insecure, "insecure", false, "plaintext TCP to a loopback address (podsyncd --insecure-listen-loopback; development only)")
	pf.DurationVar(&a.timeout, "timeout", 0, "give up after this long (default: 30s for single calls, no limit for commands that wait or follow; run's --timeout is its per-pod timeout)")
	root.AddGroup(&cobra.Group{ID: "pods", Title: "Running pods:"}, &cobra.Group{ID: "inspect", Title: "Inspecting pods:"}, &cobra.Group{ID: "other", Title: "Other commands:"})
	for _, c := range []*cobra.Command{a.newRunCommand(), a.newApplyCommand(), a.newSyncCommand(), a.newPlanCommand(), a.newDeleteCommand()} {
		c.GroupID = "pods"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.newGetCommand(), a.newDescribeCommand(), a.newLogsCommand(), a.newWatchCommand(), a.newNodeCommand(), a.newVolumeCommand(),
		a.newTopCommand(), a.newExecCommand(), a.newCpCommand(), a.newAttachCommand(), a.newPortForwardCommand(), a.newDebugCommand()} {
		c.GroupID = "inspect"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.newHealthCommand(), a.newVersionCommand(), newConvertCommand(a)} {
		c.GroupID = "other"
		root.AddCommand(c)
	}
	root.SetHelpCommandGroupID("other")
	root.SetCompletionCommandGroupID("other")
	return root
}

// version is the module version podsyncctl was built from, or the VCS
// revision for a build from a checkout.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "devel-" + rev
}
