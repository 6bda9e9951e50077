package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
)

// eventSource is the component of podsyncd's events, as the kubelet's.
const eventSource = "kubelet"

// kubeEvent is the core/v1 Event of a listed event: the series' name,
// count and first and last timestamps, the pod as the involved object
// (spec.containers{NAME} as its field path for a container's event).
func kubeEvent(le *podsyncv1.ListedEvent, node string) *corev1.Event {
	ev, pod := le.GetEvent(), le.GetPod()
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.GetNamespace(), Name: pod.GetName(), UID: types.UID(pod.GetUid())}
	if c := ev.GetContainer(); c != "" {
		ref.FieldPath = "spec.containers{" + c + "}"
	}
	typ := corev1.EventTypeNormal
	if ev.GetType() == podsyncv1.EventType_EVENT_TYPE_WARNING {
		typ = corev1.EventTypeWarning
	}
	last := metav1.NewTime(ev.GetTime().AsTime())
	first := last
	if ev.GetFirstTimestamp() != nil {
		first = metav1.NewTime(ev.GetFirstTimestamp().AsTime())
	}
	name := ev.GetName()
	if name == "" {
		name = fmt.Sprintf("%s.%x", pod.GetName(), last.UnixNano())
	}
	return &corev1.Event{
		TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: pod.GetNamespace(), CreationTimestamp: first},
		InvolvedObject: ref,
		Reason:         ev.GetReason(),
		Message:        ev.GetMessage(),
		Source:         corev1.EventSource{Component: eventSource, Host: node},
		FirstTimestamp: first,
		LastTimestamp:  last,
		Count:          max(ev.GetCount(), 1),
		Type:           typ,
	}
}

// eventFields are the fields an event field selector may name.
var eventFields = []string{"involvedObject.name", "involvedObject.namespace", "involvedObject.uid", "involvedObject.fieldPath", "type", "reason"}

func eventFieldSet(e *corev1.Event) fields.Set {
	return fields.Set{
		"involvedObject.name":      e.InvolvedObject.Name,
		"involvedObject.namespace": e.InvolvedObject.Namespace,
		"involvedObject.uid":       string(e.InvolvedObject.UID),
		"involvedObject.fieldPath": e.InvolvedObject.FieldPath,
		"type":                     e.Type,
		"reason":                   e.Reason,
	}
}

// listEvents lists the events of req as core/v1 Events, oldest first.
func listEvents(ctx context.Context, c *client.Client, req *podsyncv1.ListEventsRequest, node string) ([]*corev1.Event, error) {
	resp, err := c.ListEvents(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Event, 0, len(resp.GetEvents()))
	for _, e := range resp.GetEvents() {
		out = append(out, kubeEvent(e, node))
	}
	return out, nil
}

// getEvents prints the events of -n (every namespace without it), or of
// the named pods, as kubectl get events: LAST SEEN TYPE REASON OBJECT
// MESSAGE, oldest first, one line per series ("5s (x4 over 35s)").
func (a *app) getEvents(ctx context.Context, c *client.Client, f getFlags, names []string) error {
	if f.selector != "" || len(f.phases) > 0 || f.showLabels {
		return usageErrorf("-l, --phase and --show-labels select pods; events take --field-selector involvedObject.name=POD")
	}
	keep, err := fieldFilter(f.fieldSelector, eventFieldSet, eventFields)
	if err != nil {
		return err
	}
	var evs []*corev1.Event
	if len(names) == 0 {
		if evs, err = listEvents(ctx, c, &podsyncv1.ListEventsRequest{Namespace: f.namespace}, ""); err != nil {
			return err
		}
	}
	// kubectl get events NAME names an event; podsync's also take a pod.
	for _, name := range names {
		all, err := listEvents(ctx, c, &podsyncv1.ListEventsRequest{Namespace: namespaceOr(f.namespace)}, "")
		if err != nil {
			return err
		}
		found := false
		for _, e := range all {
			if e.Name == name || e.InvolvedObject.Name == name {
				evs, found = append(evs, e), true
			}
		}
		if !found {
			return failed("events %q not found in namespace %s", name, namespaceOr(f.namespace))
		}
	}
	if keep != nil {
		kept := evs[:0]
		for _, e := range evs {
			if keep(e) {
				kept = append(kept, e)
			}
		}
		evs = kept
	}
	switch {
	case f.output == formatProtoJSON || f.output == formatProtoYAML:
		return usageErrorf("-o %s: events are printed as Kubernetes Events (-o json or yaml)", f.output)
	case isKubeFormat(f.output):
		p, err := newKubePrinter(f.output, os.ReadFile)
		if err != nil {
			return err
		}
		objs := make([]runtime.Object, 0, len(evs))
		for _, e := range evs {
			objs = append(objs, e)
		}
		return p.print(a.stdout, objs, false)
	case len(evs) == 0:
		return a.noResources(f.namespace)
	}
	var header []string
	if f.namespace == "" {
		header = append(header, "NAMESPACE")
	}
	header = append(header, "LAST SEEN", "TYPE", "REASON", "OBJECT")
	wide := f.output == formatWide
	if wide {
		header = append(header, "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST SEEN", "COUNT", "NAME")
	} else {
		header = append(header, "MESSAGE")
	}
	t := newTable(a.stdout, header...)
	now := a.now()
	for _, e := range evs {
		var row []string
		if f.namespace == "" {
			row = append(row, e.Namespace)
		}
		row = append(row, eventLastSeen(e, now), e.Type, e.Reason, "pod/"+e.InvolvedObject.Name)
		if wide {
			row = append(row, e.InvolvedObject.FieldPath, e.Source.Component, strings.TrimSpace(e.Message),
				age(e.FirstTimestamp.Time, now), fmt.Sprint(e.Count), e.Name)
		} else {
			row = append(row, strings.TrimSpace(e.Message))
		}
		t.row(row...)
	}
	return t.flush()
}

// eventLastSeen is kubectl's LAST SEEN (and describe's Age): the time
// since the last occurrence, with the count and the time since the first
// for a repeated event, "5s (x4 over 35s)".
func eventLastSeen(e *corev1.Event, now time.Time) string {
	last := age(e.LastTimestamp.Time, now)
	if e.Count > 1 {
		return fmt.Sprintf("%s (x%d over %s)", last, e.Count, age(e.FirstTimestamp.Time, now))
	}
	return last
}

// kubeNode is the core/v1 Node of what podsyncd says of its node: its
// labels, taints, capacity and allocatable resources, Ready while podsyncd
// answers.
func kubeNode(n *podsyncv1.Node) *corev1.Node {
	node := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: n.GetName(), Labels: n.GetLabels()},
		Status: corev1.NodeStatus{
			Capacity:    statusResources(n.GetCapacity()),
			Allocatable: statusResources(n.GetAllocatable()),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "podsyncd is posting ready status"}},
		},
	}
	for _, t := range n.GetTaints() {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: t.GetKey(), Value: t.GetValue(), Effect: corev1.TaintEffect(t.GetEffect())})
	}
	return node
}

// getNodes prints the node as kubectl get nodes: NAME STATUS ROLES AGE
// VERSION, or as a core/v1 Node.
func (a *app) getNodes(ctx context.Context, c *client.Client, f getFlags, names []string) error {
	if f.selector != "" || f.fieldSelector != "" || len(f.phases) > 0 {
		return usageErrorf("-l, --field-selector and --phase select pods; a podsync node is one")
	}
	n, err := c.GetNode(ctx)
	if err != nil {
		return err
	}
	for _, name := range names {
		if name != n.GetName() {
			return failed("node %q not found: podsyncd runs node %q", name, n.GetName())
		}
	}
	switch {
	case f.output == formatProtoJSON || f.output == formatProtoYAML:
		return (&messageWriter{w: a.stdout, format: protoFormat(f.output)}).write(n)
	case isKubeFormat(f.output):
		p, err := newKubePrinter(f.output, os.ReadFile)
		if err != nil {
			return err
		}
		return p.print(a.stdout, []runtime.Object{kubeNode(n)}, len(names) == 1)
	}
	header := []string{"NAME", "STATUS", "ROLES", "AGE", "VERSION"}
	if f.showLabels {
		header = append(header, "LABELS")
	}
	t := newTable(a.stdout, header...)
	row := []string{n.GetName(), "Ready", "<none>", "<unknown>", "podsync"}
	if f.showLabels {
		row = append(row, labelsText(n.GetLabels()))
	}
	t.row(row...)
	return t.flush()
}

// statusResources parses the node's quantities; one that does not parse
// is left out.
func statusResources(in map[string]string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for k, v := range in {
		if q, err := apiresource.ParseQuantity(v); err == nil {
			out[corev1.ResourceName(k)] = q
		}
	}
	return out
}
