package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

func (a *app) newWatchCommand() *cobra.Command {
	var (
		namespace     string
		allNamespaces bool
		selector      string
		since         int64
		output        string
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Stream pod status changes and events",
		Long: "watch prints each change of the pods podsyncd runs — status changes, events\n" +
			"(Pulled, Created, Started, Killing, BackOff, Unhealthy, …) and deletions — with\n" +
			"the revision it happened at, until interrupted. It starts with the current\n" +
			"status of every pod, or with the changes after --since-revision; it resumes\n" +
			"by itself when the connection drops.",
		Example: "  podsyncctl watch\n" +
			"  podsyncctl watch -l app=web -o json",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output, formatText, formatJSON, formatYAML); err != nil {
				return err
			}
			if allNamespaces && namespace != "" {
				return usageErrorf("-A and -n exclude each other")
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			ctx, cancel := a.waitContext(cmd.Context())
			defer cancel()
			w := &watchPrinter{w: a.stdout, now: a.now, specs: map[string]*podsyncv1.PodSpec{}, colors: a.colors,
				spec: func(ref *podsyncv1.PodRef) *podsyncv1.PodSpec {
					gctx, gcancel := a.callContext(ctx)
					defer gcancel()
					resp, err := c.GetPod(gctx, ref.GetNamespace(), ref.GetName())
					if err != nil {
						return nil
					}
					return resp.GetPod().GetSpec()
				}}
			mw := &messageWriter{w: a.stdout, format: output}
			err = c.Watch(ctx, &podsyncv1.WatchPodsRequest{SinceRevision: since, Namespace: namespace, LabelSelector: selector},
				func(m *podsyncv1.WatchPodsResponse) error {
					if output != formatText {
						return mw.write(m)
					}
					return w.write(m)
				})
			if cmd.Context().Err() != nil && isCanceled(err) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "watch only this namespace (default: all)")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "watch every namespace (the default without -n)")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", `label selector, such as "app=web"`)
	cmd.Flags().Int64Var(&since, "since-revision", 0, "print the changes after this revision instead of the current state first")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (the API's WatchPodsResponse messages)")
	return cmd
}

// watchPrinter prints WatchPods changes as lines under a header.
type watchPrinter struct {
	w      io.Writer
	now    func() time.Time
	colors palette
	// spec looks a pod's spec up, for READY's total; nil when unknown.
	spec   func(*podsyncv1.PodRef) *podsyncv1.PodSpec
	specs  map[string]*podsyncv1.PodSpec // by uid
	header bool
}

func (p *watchPrinter) write(m *podsyncv1.WatchPodsResponse) error {
	ref := m.GetPod()
	var change string
	switch {
	case m.GetStatus() != nil:
		spec, ok := p.specs[ref.GetUid()]
		if !ok && p.spec != nil {
			spec = p.spec(ref)
			p.specs[ref.GetUid()] = spec
		}
		sum := summarizePod(spec, m.GetStatus(), p.now())
		change = fmt.Sprintf("%s %s ready, restarts %s", p.colors.bold(sum.Status), sum.Ready, sum.Restarts)
	case m.GetEvent() != nil:
		e := m.GetEvent()
		typ := "Normal"
		if e.GetType() == podsyncv1.EventType_EVENT_TYPE_WARNING {
			typ = p.colors.warn("Warning")
		}
		change = fmt.Sprintf("%s %s: %s", typ, e.GetReason(), oneLine(e.GetMessage()))
	case m.GetDeleted() != nil:
		delete(p.specs, ref.GetUid())
		change = p.colors.dim("deleted")
	default:
		// synced, the end of the initial list: nothing to print.
		return nil
	}
	var b strings.Builder
	if !p.header {
		fmt.Fprintf(&b, "%-9s %-32s %s\n", "REVISION", "POD", "CHANGE")
		p.header = true
	}
	fmt.Fprintf(&b, "%-9d %-32s %s\n", m.GetRevision(), refKey(ref), change)
	_, err := io.WriteString(p.w, b.String())
	return err
}
