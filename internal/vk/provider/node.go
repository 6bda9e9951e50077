package provider

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"go.uber.org/zap"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/virtual-kubelet/virtual-kubelet/node"
)

// KubeletVersion is what the Node reports as its kubelet's version.
const KubeletVersion = "v1.37.2-podsync"

var _ node.NodeProvider = (*NodeProvider)(nil)

// NodeProvider keeps a Node's status true to its podsyncd, as a kubelet
// whose container runtime is down: the lease keeps being renewed while
// podsync-vk runs (Ping answers for podsync-vk itself), and a change of
// podsyncd's health is pushed as the Ready condition at once (False,
// reason PodsyncUnavailable, with the error). If podsync-vk itself stops,
// the lease lapses and the node-lifecycle controller marks the Node
// NotReady after its grace period.
type NodeProvider struct {
	ps       Podsync
	log      *zap.Logger
	interval time.Duration

	mu   sync.Mutex
	node *corev1.Node
}

// NodeOptions describe the Node besides what podsyncd says.
type NodeOptions struct {
	// Name is the Kubernetes node's name; empty means podsyncd's node
	// name.
	Name string
	// InternalIP is the address the API server reaches the kubelet API
	// at.
	InternalIP string
	// Port is the kubelet API's port.
	Port int32
	// HealthInterval is how often podsyncd's health is checked; zero
	// means 5 s.
	HealthInterval time.Duration
}

// NewNode builds the Node from podsyncd's GetNode (labels, taints,
// capacity, allocatable) and o, Ready as podsyncd's health says.
func NewNode(ctx context.Context, ps Podsync, o NodeOptions, log *zap.Logger) (*NodeProvider, error) {
	pn, err := ps.GetNode(ctx)
	if err != nil {
		return nil, fmt.Errorf("get node from podsync: %w", err)
	}
	name := o.Name
	if name == "" {
		name = pn.GetName()
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"type": "virtual-kubelet", "kubernetes.io/role": "agent", "node.podsync.io/node": pn.GetName(),
		}},
		Spec: corev1.NodeSpec{},
		Status: corev1.NodeStatus{
			Phase:           corev1.NodeRunning,
			Capacity:        corev1.ResourceList{},
			Allocatable:     corev1.ResourceList{},
			NodeInfo:        nodeSystemInfo(pn.GetSystemInfo()),
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: o.Port}},
		},
	}
	for k, v := range pn.GetLabels() {
		n.Labels[k] = v
	}
	n.Labels["kubernetes.io/hostname"] = name
	for _, t := range pn.GetTaints() {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: t.GetKey(), Value: t.GetValue(), Effect: corev1.TaintEffect(t.GetEffect())})
	}
	for res, in := range map[*corev1.ResourceList]map[string]string{&n.Status.Capacity: pn.GetCapacity(), &n.Status.Allocatable: pn.GetAllocatable()} {
		for k, v := range in {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("podsync node %s: resource %s: %w", pn.GetName(), k, err)
			}
			(*res)[corev1.ResourceName(k)] = q
		}
	}
	if o.InternalIP != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: o.InternalIP}, {Type: corev1.NodeHostName, Address: name}}
	}
	np := &NodeProvider{ps: ps, log: log, interval: o.HealthInterval, node: n}
	if np.interval == 0 {
		np.interval = 5 * time.Second
	}
	np.setConditions(np.health(ctx))
	return np, nil
}

// nodeSystemInfo is the Node's status.nodeInfo from podsyncd's system
// info, KubeletVersion podsync-vk's; the operating system and
// architecture are podsync-vk's own when podsyncd does not say (an older
// podsyncd).
func nodeSystemInfo(si *podsyncv1.NodeSystemInfo) corev1.NodeSystemInfo {
	return corev1.NodeSystemInfo{
		MachineID: si.GetMachineId(), SystemUUID: si.GetSystemUuid(), BootID: si.GetBootId(),
		KernelVersion: si.GetKernelVersion(), OSImage: si.GetOsImage(), ContainerRuntimeVersion: si.GetContainerRuntimeVersion(),
		KubeletVersion:  KubeletVersion,
		OperatingSystem: cmp.Or(si.GetOperatingSystem(), runtime.GOOS), Architecture: cmp.Or(si.GetArchitecture(), runtime.GOARCH),
	}
}

// Node is the Node to register.
func (np *NodeProvider) Node() *corev1.Node {
	np.mu.Lock()
	defer np.mu.Unlock()
	return np.node.DeepCopy()
}

func (np *NodeProvider) health(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := np.ps.Health(ctx)
	if err != nil {
		return err
	}
	if st != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("podsyncd reports %s", st)
	}
	return nil
}

// setConditions sets the Node's conditions for health err; it reports
// whether Ready changed.
func (np *NodeProvider) setConditions(err error) bool {
	np.mu.Lock()
	defer np.mu.Unlock()
	now := metav1.Now()
	ready := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "podsyncd is serving", LastHeartbeatTime: now, LastTransitionTime: now,
	}
	if err != nil {
		ready.Status, ready.Reason, ready.Message = corev1.ConditionFalse, "PodsyncUnavailable", err.Error()
	}
	changed := true
	for _, c := range np.node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == ready.Status {
			changed = false
			ready.LastTransitionTime = c.LastTransitionTime
		}
	}
	conds := []corev1.NodeCondition{ready}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable} {
		conds = append(conds, corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: "PodsyncHasNo" + string(t),
			LastHeartbeatTime: now, LastTransitionTime: ready.LastTransitionTime})
	}
	np.node.Status.Conditions = conds
	return changed
}

// Ping says podsync-vk serves the node: it fails only when ctx has
// ended. podsyncd's own health is the Ready condition: a failed ping
// would stop the node library from posting it.
func (np *NodeProvider) Ping(ctx context.Context) error {
	return ctx.Err()
}

// NotifyNodeStatus checks podsyncd's health every interval until ctx
// ends and calls cb when Ready changes.
func (np *NodeProvider) NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node)) {
	go func() {
		t := time.NewTicker(np.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := np.health(ctx)
			if np.setConditions(err) {
				np.log.Info("podsync node readiness changed", zap.Bool("ready", err == nil), zap.Error(err))
				cb(np.Node())
			}
		}
	}()
}
