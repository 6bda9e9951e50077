package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// WaitReady waits until every podsync Node is schedulable (Schedulable):
// Ready, and untainted by the node-lifecycle controller. A Node reports
// Ready some seconds before the controller takes away the not-ready
// taint it had from its registration: with a hundred Nodes registering at
// once, and the controller manager's client limit shared with the
// workload's pod creations, one run saw 68 of 100 Nodes Ready and still
// tainted 15 s on, and pods pinned to them unscheduled that long.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	ours := map[string]bool{}
	for _, n := range c.Nodes {
		ours[n.Name] = true
	}
	for {
		out, err := c.Kubectl(ctx, "get", "nodes", "-o", "json")
		var list corev1.NodeList
		if err == nil {
			err = json.Unmarshal(out, &list)
		}
		ready, why := 0, []string{}
		if err == nil {
			seen := map[string]bool{}
			for i := range list.Items {
				n := &list.Items[i]
				if !ours[n.Name] {
					continue
				}
				seen[n.Name] = true
				if ok, reason := Schedulable(n); ok {
					ready++
				} else {
					why = append(why, n.Name+": "+reason)
				}
			}
			for name := range ours {
				if !seen[name] {
					why = append(why, name+": not registered")
				}
			}
		} else {
			why = append(why, fmt.Sprintf("kubectl get nodes: %v: %s", err, out))
		}
		if ready == len(ours) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d of the %d podsync Nodes schedulable within %s (%s; logs in %s)", ready, len(c.Nodes), timeout,
				strings.Join(why[:min(len(why), 5)], "; "), c.opts.Dir)
		}
		time.Sleep(time.Second)
	}
}

// Schedulable reports whether node takes new pods: Ready, not cordoned,
// and none of the taints Kubernetes itself puts on a Node for its state
// (node.kubernetes.io/not-ready, unreachable, unschedulable, the
// pressures) with effect NoSchedule or NoExecute, as the e2e framework's
// wait for schedulable nodes; a taint of the node's own configuration
// (podsyncd's --node-taints) is the pods' to tolerate and does not count.
// If not, it says why.
func Schedulable(node *corev1.Node) (bool, string) {
	ready, notReady := false, "no Ready condition"
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready, notReady = c.Status == corev1.ConditionTrue, strings.TrimSuffix(fmt.Sprintf("Ready %s: %s", c.Status, c.Message), ": ")
		}
	}
	switch {
	case !ready:
		return false, notReady
	case node.Spec.Unschedulable:
		return false, "cordoned"
	}
	for _, t := range node.Spec.Taints {
		if strings.HasPrefix(t.Key, "node.kubernetes.io/") && (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) {
			return false, "tainted " + t.ToString()
		}
	}
	return true, ""
}
