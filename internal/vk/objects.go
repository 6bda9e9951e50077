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
// alone, shared by the pods that reference it.
type objectWatch struct {
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	pods     int
}

// objectWatches read, and watch, only the ConfigMaps and Secrets the
// node's pods reference, one object at a time — a list and watch of its
// namespace with a metadata.name field selector, as the kubelet's Watch
// strategy (its secret and configmap managers) — so that podsync-vk reads
// no other object of the cluster, as the Node authorizer lets a kubelet
// read none: under a node's identity (system:node:NAME) the API server
// holds podsync-vk to its node's pods' objects. It is the provider's
// Objects and ObjectUser; a change is pushed with changed, a deletion
// with deleted.
type objectWatches struct {
	ctx     context.Context
	kc      kubernetes.Interface
	changed func(ctx context.Context, secret bool, namespace, name string)
	deleted func(ctx context.Context, secret bool, namespace, name string)

	mu      sync.Mutex
	watches map[objectKey]*objectWatch
	refs    map[string][]objectKey // by pod (namespace/name)
}

var (
	_ provider.Objects    = (*objectWatches)(nil)
	_ provider.ObjectUser = (*objectWatches)(nil)
)

// newObjectWatches returns the watches of a node; they end with ctx.
func newObjectWatches(ctx context.Context, kc kubernetes.Interface, changed, deleted func(ctx context.Context, secret bool, namespace, name string)) *objectWatches {
	return &objectWatches{ctx: ctx, kc: kc, changed: changed, deleted: deleted, watches: map[objectKey]*objectWatch{}, refs: map[string][]objectKey{}}
}

// Use sets the objects pod references and watches those no other pod
// did; a watch no pod needs any more ends.
func (w *objectWatches) Use(pod, namespace string, configMaps, secrets []string) {
	var keys []objectKey
	for _, n := range configMaps {
		keys = append(keys, objectKey{false, namespace, n})
	}
	for _, n := range secrets {
		keys = append(keys, objectKey{true, namespace, n})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		ow := w.watches[k]
		if ow == nil {
			ow = w.startLocked(k)
			w.watches[k] = ow
		}
		ow.pods++
	}
	w.releaseLocked(pod)
	w.refs[pod] = keys
}

// Release forgets what pod referenced, ending the watches no pod needs.
func (w *objectWatches) Release(pod string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.releaseLocked(pod)
	delete(w.refs, pod)
}

func (w *objectWatches) releaseLocked(pod string) {
	for _, k := range w.refs[pod] {
		ow := w.watches[k]
		if ow == nil {
			continue
		}
		if ow.pods--; ow.pods == 0 {
			ow.stop()
			delete(w.watches, k)
		}
	}
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
	push := func(any) {
		ctx, cancel := context.WithTimeout(w.ctx, pushTimeout)
		defer cancel()
		w.changed(ctx, k.secret, k.namespace, k.name)
	}
	// Adds, changes and resyncs are pushed (a push that failed is made
	// again); a deletion is passed on: as the kubelet's volumes, an
	// optional object's files leave the pods' volumes, and a required
	// one's keep the pods' new containers waiting until it is back.
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    push,
		UpdateFunc: func(_, o any) { push(o) },
		DeleteFunc: func(any) {
			if w.deleted == nil {
				return
			}
			ctx, cancel := context.WithTimeout(w.ctx, pushTimeout)
			defer cancel()
			w.deleted(ctx, k.secret, k.namespace, k.name)
		},
	})
	ctx, stop := context.WithCancel(w.ctx)
	go inf.RunWithContext(ctx)
	return &objectWatch{informer: inf, stop: stop}
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

// ConfigMap reads a referenced ConfigMap from its watch, or, before the
// watch has listed it, from the API server (one get of that name).
func (w *objectWatches) ConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	if inf := w.synced(objectKey{false, namespace, name}); inf != nil {
		return corelisters.NewConfigMapLister(inf.GetIndexer()).ConfigMaps(namespace).Get(name)
	}
	ctx, cancel := context.WithTimeout(w.ctx, pushTimeout)
	defer cancel()
	cm, err := w.kc.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get configmap: %w", err)
	}
	return cm, nil
}

// Secret reads a referenced Secret as ConfigMap reads a ConfigMap.
func (w *objectWatches) Secret(namespace, name string) (*corev1.Secret, error) {
	if inf := w.synced(objectKey{true, namespace, name}); inf != nil {
		return corelisters.NewSecretLister(inf.GetIndexer()).Secrets(namespace).Get(name)
	}
	ctx, cancel := context.WithTimeout(w.ctx, pushTimeout)
	defer cancel()
	s, err := w.kc.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get secret: %w", err)
	}
	return s, nil
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
