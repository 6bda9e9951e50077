package vk

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	nodelisters "k8s.io/client-go/listers/node/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podsync/podsync/internal/vk/provider"
)

const (
	// pushTimeout bounds one push of a changed object to podsyncd.
	pushTimeout = 30 * time.Second
	// objectResync is the object watches' resync period: a push that
	// failed (podsyncd down) is made again within it.
	objectResync = time.Minute
)

// objectKey names one watched ConfigMap (secret false) or Secret.
type objectKey struct {
	secret          bool
	namespace, name string
}

// objectWatch is the watch of one object: an informer of that object
// alone, shared by the pods that reference it, on every node the process
// serves.
type objectWatch struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	// users counts, by node, the pods that reference the object.
	users map[*nodeObjects]int
}

// objectWatches read, and watch, only the ConfigMaps and Secrets the
// nodes' pods reference, one object at a time — a list and watch of its
// namespace with a metadata.name field selector, as the kubelet's Watch
// strategy (its secret and configmap managers) — so that podsync-vk reads
// no other object of the cluster, as the Node authorizer lets a kubelet
// read none: under a node's identity (system:node:NAME) the API server
// holds podsync-vk to its node's pods' objects. One watch of an object
// serves every node of the process (all read with the same identity):
// the kube-root-ca.crt ConfigMap every pod's token volume references is
// watched once per namespace, not once per node. Each node reads them
// through its nodeObjects.
type objectWatches struct {
	ctx context.Context
	kc  kubernetes.Interface

	mu      sync.Mutex
	watches map[objectKey]*objectWatch
}

// newObjectWatches returns the watches of a process; they end with ctx.
func newObjectWatches(ctx context.Context, kc kubernetes.Interface) *objectWatches {
	return &objectWatches{ctx: ctx, kc: kc, watches: map[objectKey]*objectWatch{}}
}

// nodeObjects is one node's share of the objectWatches: its provider's
// Objects and ObjectUser. A change of an object its pods reference is
// pushed with changed, a deletion with deleted, with ctx (the node's).
type nodeObjects struct {
	w       *objectWatches
	ctx     context.Context
	changed func(ctx context.Context, secret bool, namespace, name string)
	deleted func(ctx context.Context, secret bool, namespace, name string)
	// refs are the objects each pod (namespace/name) references; w.mu.
	refs map[string][]objectKey
}

var (
	_ provider.Objects    = (*nodeObjects)(nil)
	_ provider.ObjectUser = (*nodeObjects)(nil)
)

// node returns a node's share of the watches; call its ReleaseAll when the
// node ends.
func (w *objectWatches) node(ctx context.Context, changed, deleted func(ctx context.Context, secret bool, namespace, name string)) *nodeObjects {
	return &nodeObjects{w: w, ctx: ctx, changed: changed, deleted: deleted, refs: map[string][]objectKey{}}
}

// Use sets the objects pod references and watches those no pod of any
// node did; a watch no pod needs any more ends.
func (n *nodeObjects) Use(pod, namespace string, configMaps, secrets []string) {
	var keys []objectKey
	for _, name := range configMaps {
		keys = append(keys, objectKey{false, namespace, name})
	}
	for _, name := range secrets {
		keys = append(keys, objectKey{true, namespace, name})
	}
	w := n.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		ow := w.watches[k]
		if ow == nil {
			ow = w.startLocked(k)
			w.watches[k] = ow
		}
		ow.users[n]++
	}
	n.releaseLocked(pod)
	n.refs[pod] = keys
}

// Release forgets what pod referenced, ending the watches no pod needs.
func (n *nodeObjects) Release(pod string) {
	n.w.mu.Lock()
	defer n.w.mu.Unlock()
	n.releaseLocked(pod)
	delete(n.refs, pod)
}

// ReleaseAll forgets what every pod of the node referenced: the node has
// ended.
func (n *nodeObjects) ReleaseAll() {
	n.w.mu.Lock()
	defer n.w.mu.Unlock()
	for pod := range n.refs {
		n.releaseLocked(pod)
	}
	clear(n.refs)
}

func (n *nodeObjects) releaseLocked(pod string) {
	w := n.w
	for _, k := range n.refs[pod] {
		ow := w.watches[k]
		if ow == nil {
			continue
		}
		if ow.users[n]--; ow.users[n] <= 0 {
			delete(ow.users, n)
		}
		if len(ow.users) == 0 {
			ow.stop()
			delete(w.watches, k)
		}
	}
}

// ConfigMap reads a referenced ConfigMap from its watch, or, before the
// watch has listed it, from the API server (one get of that name).
func (n *nodeObjects) ConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	if inf := n.w.synced(objectKey{false, namespace, name}); inf != nil {
		return corelisters.NewConfigMapLister(inf.GetIndexer()).ConfigMaps(namespace).Get(name)
	}
	ctx, cancel := context.WithTimeout(n.ctx, pushTimeout)
	defer cancel()
	cm, err := n.w.kc.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get configmap: %w", err)
	}
	return cm, nil
}

// Secret reads a referenced Secret as ConfigMap reads a ConfigMap.
func (n *nodeObjects) Secret(namespace, name string) (*corev1.Secret, error) {
	if inf := n.w.synced(objectKey{true, namespace, name}); inf != nil {
		return corelisters.NewSecretLister(inf.GetIndexer()).Secrets(namespace).Get(name)
	}
	ctx, cancel := context.WithTimeout(n.ctx, pushTimeout)
	defer cancel()
	s, err := n.w.kc.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get secret: %w", err)
	}
	return s, nil
}

// startLocked starts the informer of the object k alone.
func (w *objectWatches) startLocked(k objectKey) *objectWatch {
	sel := fields.OneTermEqualSelector("metadata.name", k.name).String()
	var lw *cache.ListWatch
	var obj runtime.Object
	if k.secret {
		obj = &corev1.Secret{}
		lw = &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = sel
				return w.kc.CoreV1().Secrets(k.namespace).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = sel
				return w.kc.CoreV1().Secrets(k.namespace).Watch(ctx, o)
			},
		}
	} else {
		obj = &corev1.ConfigMap{}
		lw = &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = sel
				return w.kc.CoreV1().ConfigMaps(k.namespace).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = sel
				return w.kc.CoreV1().ConfigMaps(k.namespace).Watch(ctx, o)
			},
		}
	}
	inf := cache.NewSharedIndexInformer(lw, obj, objectResync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	ow := &objectWatch{informer: inf, users: map[*nodeObjects]int{}}
	// Adds, changes and resyncs are pushed to every node whose pods
	// reference the object, at once (a push that failed is made again);
	// a deletion is passed on: as the kubelet's volumes, an optional
	// object's files leave the pods' volumes, and a required one's keep
	// the pods' new containers waiting until it is back.
	tell := func(deleted bool) {
		w.mu.Lock()
		users := make([]*nodeObjects, 0, len(ow.users))
		for n := range ow.users {
			users = append(users, n)
		}
		w.mu.Unlock()
		var wg sync.WaitGroup
		for _, n := range users {
			fn := n.changed
			if deleted {
				fn = n.deleted
			}
			if fn == nil {
				continue
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(n.ctx, pushTimeout)
				defer cancel()
				fn(ctx, k.secret, k.namespace, k.name)
			})
		}
		wg.Wait()
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { tell(false) },
		UpdateFunc: func(_, _ any) { tell(false) },
		DeleteFunc: func(any) { tell(true) },
	})
	ctx, stop := context.WithCancel(w.ctx)
	ow.stop = stop
	go inf.RunWithContext(ctx)
	return ow
}

// synced returns the informer of k once it has listed the object, nil
// before (or when no pod references k).
func (w *objectWatches) synced(k objectKey) cache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ow := w.watches[k]; ow != nil && ow.informer.HasSynced() {
		return ow.informer
	}
	return nil
}

// watched lists the objects watched, for tests.
func (w *objectWatches) watched() []objectKey {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []objectKey
	for k := range w.watches {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b objectKey) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name), cmp.Compare(fmt.Sprint(a.secret), fmt.Sprint(b.secret)))
	})
	return out
}

// serviceLister gives the provider the Services of an informer's cache.
type serviceLister struct{ l corelisters.ServiceLister }

func (s serviceLister) Services(namespace string) ([]*corev1.Service, error) {
	return s.l.Services(namespace).List(labels.Everything())
}

// runtimeClassLister gives the provider the RuntimeClasses of an
// informer's cache, as the kubelet's runtimeclass manager reads them.
type runtimeClassLister struct {
	l nodelisters.RuntimeClassLister
}

func (r runtimeClassLister) Handler(name string) (string, error) {
	rc, err := r.l.Get(name)
	if err != nil {
		return "", err
	}
	return rc.Handler, nil
}
