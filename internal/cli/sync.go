package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
)

func (a *app) newSyncCommand() *cobra.Command {
	var files []string
	var output string
	cmd := &cobra.Command{
		Use:   "sync -f FILE",
		Short: "Apply one pod and run one sync pass now, showing each step",
		Long: "sync sends one Pod (with the ConfigMaps and Secrets of the manifests) to podsyncd,\n" +
			"which stores it and runs one kubelet-faithful sync pass at once: each step is\n" +
			"printed as it finishes (create sandbox, start containers, kill changed ones,\n" +
			"back-offs), then the pod's status. It does not wait for the pod to become\n" +
			"ready; podsyncd keeps it converged afterwards. Use run to wait.\n\n" +
			"The exit code is 1 when a step failed (a back-off is not a failure).",
		Example: "  podsyncctl sync -f examples/crashloop.yaml\n" +
			"  podsyncctl plan -f web.yaml && podsyncctl sync -f web.yaml",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usageErrorf("sync needs -f")
			}
			if err := checkFormat(output, formatText, formatJSON, formatYAML); err != nil {
				return err
			}
			m, err := a.readManifests(files, false)
			if err != nil {
				return err
			}
			if len(m.Pods) != 1 {
				return fmt.Errorf("sync takes exactly one Pod, the manifests hold %d; use run for several", len(m.Pods))
			}
			req, err := client.SyncPodRequestFromPod(m.Pods[0], m.ConfigMaps, m.Secrets)
			if err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			if err := a.createClaims(cmd.Context(), c, m.Claims, a.stderr); err != nil {
				return err
			}
			ctx, cancel := a.waitContext(cmd.Context())
			defer cancel()
			mw := &messageWriter{w: a.stdout, format: output}
			var werr error
			var failedSteps []string
			res, err := c.SyncPod(ctx, req, func(s *podsyncv1.SyncStep) {
				if s.GetOutcome() == podsyncv1.StepOutcome_STEP_OUTCOME_FAILED {
					failedSteps = append(failedSteps, fmt.Sprintf("%s (%s)", stepPhrase(s), s.GetReason()))
				}
				if werr != nil {
					return
				}
				if output != formatText {
					werr = mw.write(&podsyncv1.SyncPodResponse{Event: &podsyncv1.SyncPodResponse_Step{Step: s}})
					return
				}
				werr = writeStep(a.stdout, "", s, a.now(), a.colors)
			})
			if err != nil {
				return err
			}
			if werr != nil {
				return werr
			}
			if output != formatText {
				err = mw.write(&podsyncv1.SyncPodResponse{Event: &podsyncv1.SyncPodResponse_Result{Result: res}})
			} else {
				err = writeSyncResult(a.stdout, res, req.GetPod().GetSpec(), a.now(), a.colors)
			}
			if err != nil {
				return err
			}
			if len(failedSteps) > 0 {
				return failed("sync of %s: %s failed", refKey(res.GetPod()), strings.Join(failedSteps, ", "))
			}
			return nil
		},
	}
	addFileFlag(cmd, &files, "manifest file, directory or - for stdin, holding one Pod; repeatable")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (the API's SyncPodResponse messages)")
	return cmd
}

// writeSyncResult prints the end of a sync: the pod, its status and when
// podsyncd syncs it next.
func writeSyncResult(w io.Writer, res *podsyncv1.SyncPodResult, spec *podsyncv1.PodSpec, now time.Time, colors palette) error {
	st := res.GetStatus()
	sum := summarizePod(spec, st, now)
	verb := "synced"
	if res.GetCreated() {
		verb = "created"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\npod %s %s: %s, %s ready, restarts %s\n", refKey(res.GetPod()), verb, colors.bold(sum.Status), sum.Ready, sum.Restarts)
	var facts []string
	if id := st.GetSandboxId(); id != "" {
		facts = append(facts, fmt.Sprintf("sandbox %s (attempt %d)", shortID(id), st.GetSandboxAttempt()))
	}
	if ip := st.GetPodIp(); ip != "" {
		facts = append(facts, "IP "+ip)
	}
	if t := res.GetNextSyncTime(); t != nil {
		facts = append(facts, "next sync "+until(t.AsTime(), now))
	}
	if len(facts) > 0 {
		fmt.Fprintf(&b, "  %s\n", strings.Join(facts, ", "))
	}
	if m := st.GetMessage(); m != "" {
		fmt.Fprintf(&b, "  %s\n", oneLine(m))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (a *app) newPlanCommand() *cobra.Command {
	var files []string
	var output string
	cmd := &cobra.Command{
		Use:   "plan -f FILE...",
		Short: "Show what a sync of the pods would do now, and why, without doing it",
		Long: "plan asks podsyncd what a sync pass of each Pod of the manifests would do now,\n" +
			"compared with what runs on the node: nothing is changed or stored. Each line\n" +
			"is one action with its reason, like a diff:\n\n" +
			"  + create sandbox, start a container\n" +
			"  - kill a container (with the spec fields that changed) or the pod\n" +
			"  ~ re-create the sandbox, with the new attempt number\n" +
			"  ! a container waits for a back-off (CrashLoopBackOff, ImagePullBackOff)\n" +
			"  = nothing to do",
		Example: "  podsyncctl plan -f examples/web.yaml\n" +
			"  podsyncctl plan -f examples/crashloop.yaml -o yaml",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usageErrorf("plan needs at least one -f")
			}
			if err := checkFormat(output, formatText, formatJSON, formatYAML); err != nil {
				return err
			}
			m, err := a.readManifests(files, false)
			if err != nil {
				return err
			}
			if len(m.Pods) == 0 {
				return errors.New("no Pod in the manifests")
			}
			reqs := make([]*podsyncv1.PlanPodRequest, 0, len(m.Pods))
			for _, pod := range m.Pods {
				req, err := client.PlanPodRequestFromPod(pod, m.ConfigMaps, m.Secrets)
				if err != nil {
					return err
				}
				reqs = append(reqs, req)
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			mw := &messageWriter{w: a.stdout, format: output}
			for i, req := range reqs {
				ctx, cancel := a.callContext(cmd.Context())
				resp, err := c.PlanPod(ctx, req)
				cancel()
				if err != nil {
					return err
				}
				if output != formatText {
					err = mw.write(resp)
				} else {
					if i > 0 {
						_, _ = io.WriteString(a.stdout, "\n")
					}
					err = writePlan(a.stdout, resp, a.now(), a.colors)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	addFileFlag(cmd, &files, "manifest file, directory or - for stdin; repeatable")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (the API's PlanPodResponse messages)")
	return cmd
}

// manifestRefs are the namespace/name of the pods of manifests.
func manifestRefs(m *convert.Manifests) [][2]string {
	out := make([][2]string, 0, len(m.Pods))
	for _, p := range m.Pods {
		out = append(out, [2]string{p.Namespace, p.Name})
	}
	return out
}
