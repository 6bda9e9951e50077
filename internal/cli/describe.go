package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
)

func (a *app) newDescribeCommand() *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "describe (pod NAME... | pod/NAME... | node)",
		Short: "Show a pod in detail, with its events",
		Long: "describe prints a pod as kubectl describe pod does: its containers with their\n" +
			"state, last state, readiness and restarts, its conditions, volumes, and the\n" +
			"events podsyncd still holds for it, one line per series with its count and\n" +
			"age (\"Warning  Unhealthy  3s (x5 over 15s)  kubelet  Readiness probe failed\").\n" +
			"That is where to look first when a pod does not start or become ready.\n\n" +
			"describe node prints the node (as podsyncctl node).",
		Example: "  podsyncctl describe pod web\n" +
			"  podsyncctl describe pod/web -n demo",
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, names, err := parseResourceArgs(args)
			if err != nil {
				return err
			}
			switch {
			case kind == resourceNodes:
			case kind != resourcePods:
				return usageErrorf("describe shows pods and the node")
			case len(names) == 0:
				return usageErrorf("describe pod needs a pod name")
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			defer func() { _ = c.Close() }()
			ctx, cancel := a.callContext(cmd.Context())
			defer cancel()
			if kind == resourceNodes {
				n, err := c.GetNode(ctx)
				if err != nil {
					return err
				}
				return printNode(a.stdout, n)
			}
			for i, name := range names {
				if i > 0 {
					if _, err := io.WriteString(a.stdout, "\n\n"); err != nil {
						return err
					}
				}
				if err := a.describePod(ctx, c, namespaceOr(namespace), name); err != nil {
					return err
				}
			}
			return nil
		},
		ValidArgsFunction: a.completePodNames(&namespace),
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", `namespace of the pods (default "default")`)
	return cmd
}

// describePod prints one pod and its events.
func (a *app) describePod(ctx context.Context, c *client.Client, namespace, name string) error {
	resp, err := c.GetPod(ctx, namespace, name)
	if err != nil {
		return err
	}
	p := resp.GetPod()
	pod, err := kubePod(p)
	if err != nil {
		return err
	}
	evs, err := listEvents(ctx, c, &podsyncv1.ListEventsRequest{Namespace: namespace, PodName: name, PodUid: p.GetMetadata().GetUid()}, p.GetStatus().GetNodeName())
	if err != nil {
		return err
	}
	return writeDescribePod(a.stdout, pod, p.GetStatus(), evs, a.now(), time.Local)
}

// writeDescribePod writes describe's page of one pod, times in loc.
func writeDescribePod(w io.Writer, pod *corev1.Pod, st *podsyncv1.PodStatus, evs []*corev1.Event, now time.Time, loc *time.Location) error {
	d := &describer{w: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0), now: now, loc: loc}
	d.pod(pod, st, evs)
	return d.w.Flush()
}

// describer writes kubectl describe's layout: "Key:\tvalue" lines at
// indentation levels, aligned by a tabwriter.
type describer struct {
	w   *tabwriter.Writer
	now time.Time
	loc *time.Location
}

func (d *describer) line(level int, format string, args ...any) {
	_, _ = fmt.Fprintf(d.w, strings.Repeat("  ", level)+format+"\n", args...)
}

// block writes a key with several values on the lines below it, one
// level deeper, or <none>.
func (d *describer) block(level int, key string, values []string) {
	if len(values) == 0 {
		d.line(level, "%s:\t<none>", key)
		return
	}
	d.line(level, "%s:", key)
	for _, v := range values {
		d.line(level+1, "%s", v)
	}
}

// list writes a key with several values, one a line, or <none>.
func (d *describer) list(level int, key string, values []string) {
	if len(values) == 0 {
		d.line(level, "%s:\t<none>", key)
		return
	}
	for i, v := range values {
		if i == 0 {
			d.line(level, "%s:\t%s", key, v)
		} else {
			d.line(level, "\t%s", v)
		}
	}
}

func sortedPairs(m map[string]string, sep string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+sep+m[k])
	}
	return out
}

// time is kubectl describe's time format.
func (d *describer) time(t time.Time) string { return t.In(d.loc).Format(time.RFC1123Z) }

// pod is kubectl's describePod (k8s.io/kubectl/pkg/describe) for the
// fields a podsync pod has.
func (d *describer) pod(pod *corev1.Pod, pst *podsyncv1.PodStatus, evs []*corev1.Event) {
	d.line(0, "Name:\t%s", pod.Name)
	d.line(0, "Namespace:\t%s", pod.Namespace)
	if pod.Spec.Priority != nil {
		d.line(0, "Priority:\t%d", *pod.Spec.Priority)
	}
	if pod.Spec.PriorityClassName != "" {
		d.line(0, "Priority Class Name:\t%s", pod.Spec.PriorityClassName)
	}
	node := pst.GetNodeName()
	if ip := pod.Status.HostIP; ip != "" {
		node += "/" + ip
	}
	d.line(0, "Node:\t%s", orNone(node))
	if st := pod.Status.StartTime; st != nil {
		d.line(0, "Start Time:\t%s", d.time(st.Time))
	}
	d.list(0, "Labels", sortedPairs(pod.Labels, "="))
	d.list(0, "Annotations", sortedPairs(pod.Annotations, ": "))
	if pod.DeletionTimestamp != nil {
		d.line(0, "Status:\tTerminating (lasts %s)", age(pod.DeletionTimestamp.Time, d.now))
	} else {
		d.line(0, "Status:\t%s", pod.Status.Phase)
	}
	if pod.Status.Reason != "" {
		d.line(0, "Reason:\t%s", pod.Status.Reason)
	}
	if pod.Status.Message != "" {
		d.line(0, "Message:\t%s", pod.Status.Message)
	}
	d.line(0, "IP:\t%s", pod.Status.PodIP)
	if len(pod.Status.PodIPs) > 0 {
		d.line(0, "IPs:")
		for _, ip := range pod.Status.PodIPs {
			d.line(1, "IP:\t%s", ip.IP)
		}
	} else {
		d.line(0, "IPs:\t<none>")
	}
	if sb := pst.GetSandboxId(); sb != "" {
		d.line(0, "Sandbox:\t%s (attempt %d)", shortID(sb), pst.GetSandboxAttempt())
	}
	if len(pod.Spec.InitContainers) > 0 {
		d.containers("Init Containers", pod.Spec.InitContainers, pod.Status.InitContainerStatuses)
	}
	d.containers("Containers", pod.Spec.Containers, pod.Status.ContainerStatuses)
	if len(pod.Status.Conditions) > 0 {
		d.line(0, "Conditions:")
		d.line(1, "Type\tStatus")
		for _, c := range pod.Status.Conditions {
			d.line(1, "%s \t%s ", c.Type, c.Status)
		}
	}
	d.volumes(pod.Spec.Volumes)
	d.line(0, "QoS Class:\t%s", orNone(string(pod.Status.QOSClass)))
	d.list(0, "Node-Selectors", sortedPairs(pod.Spec.NodeSelector, "="))
	var tols []string
	for _, t := range pod.Spec.Tolerations {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		if t.Operator == corev1.TolerationOpExists && t.Value == "" {
			s += ":" + string(t.Effect) + " op=Exists"
		} else if t.Effect != "" {
			s += ":" + string(t.Effect)
		}
		if t.TolerationSeconds != nil {
			s += fmt.Sprintf(" for %ds", *t.TolerationSeconds)
		}
		tols = append(tols, s)
	}
	d.list(0, "Tolerations", tols)
	d.events(evs)
}

// containers is kubectl's describeContainers.
func (d *describer) containers(title string, cs []corev1.Container, statuses []corev1.ContainerStatus) {
	d.line(0, "%s:", title)
	for _, c := range cs {
		var st *corev1.ContainerStatus
		for i := range statuses {
			if statuses[i].Name == c.Name {
				st = &statuses[i]
			}
		}
		d.line(1, "%s:", c.Name)
		if st != nil {
			d.line(2, "Container ID:\t%s", st.ContainerID)
		}
		d.line(2, "Image:\t%s", c.Image)
		if st != nil {
			d.line(2, "Image ID:\t%s", st.ImageID)
		}
		ports, hostPorts := []string{}, []string{}
		for _, p := range c.Ports {
			ports = append(ports, fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol))
			hostPorts = append(hostPorts, fmt.Sprintf("%d/%s", p.HostPort, p.Protocol))
		}
		if len(ports) == 0 {
			d.line(2, "Port:\t<none>")
			d.line(2, "Host Port:\t<none>")
		} else {
			d.line(2, "Port%s:\t%s", plural(len(ports)), strings.Join(ports, ", "))
			d.line(2, "Host Port%s:\t%s", plural(len(ports)), strings.Join(hostPorts, ", "))
		}
		d.args(2, "Command", c.Command)
		d.args(2, "Args", c.Args)
		if st != nil {
			d.state(2, "State", st.State)
			if st.LastTerminationState.Terminated != nil {
				d.state(2, "Last State", st.LastTerminationState)
			}
			d.line(2, "Ready:\t%s", titleBool(st.Ready))
			d.line(2, "Restart Count:\t%d", st.RestartCount)
		} else {
			d.line(2, "State:\tWaiting")
			d.line(2, "Ready:\tFalse")
			d.line(2, "Restart Count:\t0")
		}
		for _, r := range []struct {
			kind string
			res  corev1.ResourceList
		}{{"Limits", c.Resources.Limits}, {"Requests", c.Resources.Requests}} {
			if len(r.res) == 0 {
				continue
			}
			d.line(2, "%s:", r.kind)
			for _, k := range slices.Sorted(maps.Keys(r.res)) {
				q := r.res[k]
				d.line(3, "%s:\t%s", k, q.String())
			}
		}
		for _, p := range []struct {
			kind  string
			probe *corev1.Probe
		}{{"Liveness", c.LivenessProbe}, {"Readiness", c.ReadinessProbe}, {"Startup", c.StartupProbe}} {
			if p.probe != nil {
				d.line(2, "%s:\t%s", p.kind, probeText(p.probe))
			}
		}
		var env []string
		for _, e := range c.EnvFrom {
			switch {
			case e.ConfigMapRef != nil:
				env = append(env, fmt.Sprintf("%s\tConfigMap\tOptional: %t", e.ConfigMapRef.Name, e.ConfigMapRef.Optional != nil && *e.ConfigMapRef.Optional))
			case e.SecretRef != nil:
				env = append(env, fmt.Sprintf("%s\tSecret\tOptional: %t", e.SecretRef.Name, e.SecretRef.Optional != nil && *e.SecretRef.Optional))
			}
		}
		if len(env) > 0 {
			d.list(2, "Environment Variables from", env)
		}
		var vars []string
		for _, e := range c.Env {
			vars = append(vars, e.Name+":\t"+envValueText(e))
		}
		d.block(2, "Environment", vars)
		var mounts []string
		for _, m := range c.VolumeMounts {
			mode := "rw"
			if m.ReadOnly {
				mode = "ro"
			}
			s := fmt.Sprintf("%s from %s (%s", m.MountPath, m.Name, mode)
			if m.SubPath != "" {
				s += ",path=\"" + m.SubPath + "\""
			}
			mounts = append(mounts, s+")")
		}
		d.block(2, "Mounts", mounts)
	}
}

func plural(n int) string {
	if n > 1 {
		return "s"
	}
	return ""
}

func titleBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func (d *describer) args(level int, key string, args []string) {
	if len(args) == 0 {
		return
	}
	d.line(level, "%s:", key)
	for _, a := range args {
		for _, l := range strings.Split(a, "\n") {
			d.line(level+1, "%s", l)
		}
	}
}

// state is kubectl's describeContainerState.
func (d *describer) state(level int, key string, s corev1.ContainerState) {
	switch {
	case s.Running != nil:
		d.line(level, "%s:\tRunning", key)
		d.line(level+1, "Started:\t%s", d.time(s.Running.StartedAt.Time))
	case s.Waiting != nil:
		d.line(level, "%s:\tWaiting", key)
		if s.Waiting.Reason != "" {
			d.line(level+1, "Reason:\t%s", s.Waiting.Reason)
		}
		if s.Waiting.Message != "" {
			d.line(level+1, "Message:\t%s", oneLine(s.Waiting.Message))
		}
	case s.Terminated != nil:
		t := s.Terminated
		d.line(level, "%s:\tTerminated", key)
		if t.Reason != "" {
			d.line(level+1, "Reason:\t%s", t.Reason)
		}
		if t.Message != "" {
			d.line(level+1, "Message:\t%s", oneLine(t.Message))
		}
		d.line(level+1, "Exit Code:\t%d", t.ExitCode)
		if t.Signal > 0 {
			d.line(level+1, "Signal:\t%d", t.Signal)
		}
		d.line(level+1, "Started:\t%s", d.time(t.StartedAt.Time))
		d.line(level+1, "Finished:\t%s", d.time(t.FinishedAt.Time))
	default:
		d.line(level, "%s:\tWaiting", key)
	}
}

// probeText is kubectl's DescribeProbe: "http-get http://:8080/ delay=0s
// timeout=1s period=10s #success=1 #failure=3".
func probeText(p *corev1.Probe) string {
	attrs := fmt.Sprintf("delay=%ds timeout=%ds period=%ds #success=%d #failure=%d",
		p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold)
	switch {
	case p.Exec != nil:
		return fmt.Sprintf("exec %v %s", p.Exec.Command, attrs)
	case p.HTTPGet != nil:
		scheme := strings.ToLower(string(p.HTTPGet.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		return fmt.Sprintf("http-get %s://%s:%s%s %s", scheme, p.HTTPGet.Host, p.HTTPGet.Port.String(), p.HTTPGet.Path, attrs)
	case p.TCPSocket != nil:
		return fmt.Sprintf("tcp-socket %s:%s %s", p.TCPSocket.Host, p.TCPSocket.Port.String(), attrs)
	case p.GRPC != nil:
		return fmt.Sprintf("grpc <pod>:%d %s %s", p.GRPC.Port, ptrString(p.GRPC.Service), attrs)
	}
	return fmt.Sprintf("unknown %s", attrs)
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// envValueText is how kubectl describe shows an env value's source.
func envValueText(e corev1.EnvVar) string {
	vf := e.ValueFrom
	switch {
	case vf == nil:
		return e.Value
	case vf.FieldRef != nil:
		return fmt.Sprintf("(%s:%s)", vf.FieldRef.APIVersion, vf.FieldRef.FieldPath)
	case vf.ResourceFieldRef != nil:
		return fmt.Sprintf("%s (%s)", vf.ResourceFieldRef.Resource, orNone(vf.ResourceFieldRef.ContainerName))
	case vf.SecretKeyRef != nil:
		return fmt.Sprintf("<set to the key '%s' in secret '%s'>\tOptional: %t", vf.SecretKeyRef.Key, vf.SecretKeyRef.Name,
			vf.SecretKeyRef.Optional != nil && *vf.SecretKeyRef.Optional)
	case vf.ConfigMapKeyRef != nil:
		return fmt.Sprintf("<set to the key '%s' of config map '%s'>\tOptional: %t", vf.ConfigMapKeyRef.Key, vf.ConfigMapKeyRef.Name,
			vf.ConfigMapKeyRef.Optional != nil && *vf.ConfigMapKeyRef.Optional)
	}
	return ""
}

// volumes is kubectl's describeVolumes for the volume types podsync runs.
func (d *describer) volumes(vs []corev1.Volume) {
	if len(vs) == 0 {
		d.line(0, "Volumes:\t<none>")
		return
	}
	d.line(0, "Volumes:")
	for _, v := range vs {
		d.line(1, "%s:", v.Name)
		switch s := v.VolumeSource; {
		case s.EmptyDir != nil:
			d.line(2, "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)")
			d.line(2, "Medium:\t%s", s.EmptyDir.Medium)
			limit := "<unset>"
			if s.EmptyDir.SizeLimit != nil {
				limit = s.EmptyDir.SizeLimit.String()
			}
			d.line(2, "SizeLimit:\t%s", limit)
		case s.HostPath != nil:
			d.line(2, "Type:\tHostPath (bare host directory volume)")
			d.line(2, "Path:\t%s", s.HostPath.Path)
			if s.HostPath.Type != nil {
				d.line(2, "HostPathType:\t%s", *s.HostPath.Type)
			}
		case s.ConfigMap != nil:
			d.line(2, "Type:\tConfigMap (a volume populated by a ConfigMap)")
			d.line(2, "Name:\t%s", s.ConfigMap.Name)
			d.line(2, "Optional:\t%t", s.ConfigMap.Optional != nil && *s.ConfigMap.Optional)
		case s.Secret != nil:
			d.line(2, "Type:\tSecret (a volume populated by a Secret)")
			d.line(2, "SecretName:\t%s", s.Secret.SecretName)
			d.line(2, "Optional:\t%t", s.Secret.Optional != nil && *s.Secret.Optional)
		case s.Projected != nil:
			d.line(2, "Type:\tProjected (a volume that contains injected data from multiple sources)")
		case s.DownwardAPI != nil:
			d.line(2, "Type:\tDownwardAPI (a volume populated by information about the pod)")
			var items []string
			for _, it := range s.DownwardAPI.Items {
				if it.FieldRef != nil {
					items = append(items, it.FieldRef.FieldPath+" -> "+it.Path)
				} else if it.ResourceFieldRef != nil {
					items = append(items, it.ResourceFieldRef.Resource+" -> "+it.Path)
				}
			}
			d.list(2, "Items", items)
		case s.PersistentVolumeClaim != nil:
			d.line(2, "Type:\tPersistentVolumeClaim (a node-local named volume of podsync)")
			d.line(2, "ClaimName:\t%s", s.PersistentVolumeClaim.ClaimName)
			d.line(2, "ReadOnly:\t%t", s.PersistentVolumeClaim.ReadOnly)
		case s.Image != nil:
			d.line(2, "Type:\tImage (a container image or OCI artifact)")
			d.line(2, "Reference:\t%s", s.Image.Reference)
			d.line(2, "PullPolicy:\t%s", s.Image.PullPolicy)
		}
	}
}

// events is kubectl's DescribeEvents: Type Reason Age From Message, one
// line per series, its age "5s (x4 over 35s)" when it repeated.
func (d *describer) events(evs []*corev1.Event) {
	if len(evs) == 0 {
		d.line(0, "Events:\t<none>")
		return
	}
	_ = d.w.Flush()
	d.line(0, "Events:")
	d.line(1, "Type\tReason\tAge\tFrom\tMessage")
	d.line(1, "----\t------\t----\t----\t-------")
	for _, e := range evs {
		d.line(1, "%s\t%s\t%s\t%s\t%s", e.Type, e.Reason, eventLastSeen(e, d.now), e.Source.Component, strings.TrimSpace(e.Message))
	}
}
