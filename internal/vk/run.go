package vk

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	psapi "k8s.io/pod-security-admission/api"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	kubeinformers "k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	nodeinformers "k8s.io/client-go/informers/node/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/internal/profiling"
	"github.com/podsync/podsync/internal/vk/provider"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
)

// Run serves every node of cfg until ctx ends; the first node that fails
// to start or stops with an error ends them all.
func Run(ctx context.Context, cfg Config, log *zap.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	kc, err := kubeClient(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cw, err := watchCluster(ctx, kc, log)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("watch the cluster: %w", err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, n := range cfg.Nodes {
		wg.Go(func() {
			if err := runNode(ctx, cfg, n, kc, cw, log); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func dial(ctx context.Context, n NodeConfig) (*client.Client, error) {
	opts := []client.Option{client.WithRetry(3, 200*time.Millisecond), client.WithUserAgent("podsync-vk")}
	if n.Cert != "" || n.CA != "" {
		opts = append(opts, client.WithTLSFiles(n.Cert, n.Key, n.CA))
	}
	return client.New(ctx, n.Target, opts...)
}

// clusterWatches are what every node of the process reads of the
// cluster, watched once for all of them (a kubelet watches them for its
// node alone): the Services (the service environment variables), the
// RuntimeClasses (the sandboxes' handlers), the Namespaces (their Pod
// Security levels) where podsync-vk may read them, and the ConfigMaps and
// Secrets the pods reference, one object at a time (objectWatches).
type clusterWatches struct {
	informers  kubeinformers.SharedInformerFactory
	namespaces bool
	objects    *objectWatches
}

// watchCluster starts the clusterWatches and waits until the Services,
// RuntimeClasses and Namespaces are listed: the provider adds the service
// variables from the Services' lister, so a pod applied before it is
// synced would get fewer variables, and the complete spec applied later
// (after a restart of podsync-vk) would restart its containers.
func watchCluster(ctx context.Context, kc kubernetes.Interface, log *zap.Logger) (*clusterWatches, error) {
	cw := &clusterWatches{informers: kubeinformers.NewSharedInformerFactoryWithOptions(kc, objectResync), objects: newObjectWatches(ctx, kc)}
	// The namespaces' Pod Security levels, where podsync-vk may read
	// them: a node's identity (system:node:NAME) may not, as a kubelet's,
	// and its pods are then held to the node's level alone.
	ok, err := mayWatchNamespaces(ctx, kc)
	if err != nil {
		return nil, err
	}
	cw.namespaces = ok
	_ = cw.informers.Core().V1().Services().Informer()
	_ = cw.informers.Node().V1().RuntimeClasses().Informer()
	if ok {
		_ = cw.informers.Core().V1().Namespaces().Informer()
	} else {
		log.Info("namespaces' Pod Security levels not read: this identity may not list and watch namespaces; pods are held to the node's level")
	}
	cw.informers.Start(ctx.Done())
	for typ, ok := range cw.informers.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("%v informer did not sync", typ)
		}
	}
	return cw, nil
}

// runNode serves one podsync node.
func runNode(ctx context.Context, cfg Config, n NodeConfig, kc kubernetes.Interface, cw *clusterWatches, log *zap.Logger) error {
	ps, err := dial(ctx, n)
	if err != nil {
		return fmt.Errorf("podsync node %s: %w", n.Target, err)
	}
	defer func() { _ = ps.Close() }()
	// The node's podsync lease first: every call of ps carries its epoch,
	// so a podsync-vk that lost the node to another cannot change it.
	lctx, stopLease := context.WithCancel(ctx)
	defer stopLease()
	leaseErr, err := takeLease(lctx, ps, cmp.Or(cfg.LeaseTTL, DefaultLeaseTTL), log.With(zap.String("target", n.Target)))
	if err != nil {
		return fmt.Errorf("podsync node %s: %w", n.Target, err)
	}
	np, err := provider.NewNode(ctx, ps, provider.NodeOptions{Name: n.Name, InternalIP: cfg.ListenAddress, Port: int32(n.Port)}, log)
	if err != nil {
		return fmt.Errorf("podsync node %s: %w", n.Target, err)
	}
	name := np.Node().Name
	log = log.With(zap.String("node", name))
	p := provider.New(name, ps, log)
	p.UseKube(kubePods{kc})
	p.UseTokens(kubePods{kc}, cfg.TokenMaxAge)

	// No resync, as the kubelet's reflector of its pods (config.NewSourceApiserver):
	// the node library acts on a change of a pod's spec or deletion
	// only, so a resync costs every pod a comparison of its spec each
	// period and changes nothing; the library's queues retry a failed
	// sync themselves.
	podInformers := kubeinformers.NewSharedInformerFactoryWithOptions(kc, 0, nodeutil.PodInformerFilter(name))
	pods := podInformers.Core().V1().Pods()
	services := cw.informers.Core().V1().Services()
	p.UseServices(serviceLister{services.Lister()})
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	rcs := cw.informers.Node().V1().RuntimeClasses()
	rcReg, err := followRuntimeClasses(watchCtx, p, rcs)
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	defer func() { _ = rcs.Informer().RemoveEventHandler(rcReg) }()
	objects := cw.objects.node(watchCtx, p.ObjectChanged, p.ObjectDeleted)
	defer objects.ReleaseAll()
	p.UseObjects(objects)
	// The node library wants ConfigMap and Secret informers, which it
	// reads only to resolve env (SkipDownwardAPIResolution: it does not):
	// they come from a factory that is never started, so that nothing
	// lists the cluster's ConfigMaps and Secrets.
	unstarted := kubeinformers.NewSharedInformerFactory(kc, 0)
	if cw.namespaces {
		namespaces := cw.informers.Core().V1().Namespaces().Lister()
		p.UseNamespaceLevels(func(name string) string {
			ns, err := namespaces.Get(name)
			if err != nil {
				return ""
			}
			return ns.Labels[psapi.EnforceLevelLabel]
		})
	}
	if err := followReadinessGates(p, pods); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}

	eb := record.NewBroadcaster()
	eb.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kc.CoreV1().Events("")})
	defer eb.Shutdown()
	recorder := nodeLibraryRecorder{eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "podsync-vk", Host: name})}
	// podsyncd's events about the pods are the kubelet's, recorded as a
	// kubelet records them: source component "kubelet", repeats counted
	// and bursts limited by the broadcaster's correlator.
	p.UseEvents(eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: name}))

	nc, err := node.NewNodeController(np, np.Node(), kc.CoreV1().Nodes(),
		node.WithNodeEnableLeaseV1(nodeutil.NodeLeaseV1Client(kc), node.DefaultLeaseDuration),
		node.WithNodeStatusUpdateInterval(nodeStatusReportFrequency))
	if err != nil {
		return fmt.Errorf("node %s: node controller: %w", name, err)
	}
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient: kc.CoreV1(), EventRecorder: recorder, Provider: p,
		PodInformer: pods, SecretInformer: unstarted.Core().V1().Secrets(),
		ConfigMapInformer: unstarted.Core().V1().ConfigMaps(), ServiceInformer: services,
		// Env stays as the API server stores it: references to
		// ConfigMaps, Secrets and the downward API, which podsyncd
		// resolves (no Secret value in the spec it stores); the service
		// variables the provider adds.
		SkipDownwardAPIResolution: true,
		// Work at once, retries backing off (queues.go).
		SyncPodsFromKubernetesRateLimiter:    newRetryLimiter(),
		DeletePodsFromKubernetesRateLimiter:  newRetryLimiter(),
		SyncPodStatusFromProviderRateLimiter: newRetryLimiter(),
	})
	if err != nil {
		return fmt.Errorf("node %s: pod controller: %w", name, err)
	}
	srv, err := kubeletAPI(ctx, cfg, n, name, kc, p, pods.Lister().List)
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	defer func() { _ = srv.Close() }()

	podInformers.Start(ctx.Done())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The node library's lines are this node's, in podsync-vk's log.
	ctx = vklog.WithLogger(ctx, newNodeLibraryLogger(log))
	errc := make(chan error, 4)
	go func() { errc <- p.Run(ctx) }()
	go func() { errc <- nc.Run(ctx) }()
	go func() { errc <- pc.Run(ctx, cmp.Or(cfg.PodSyncWorkers, DefaultPodSyncWorkers)) }()
	go func() {
		select {
		case err := <-leaseErr:
			errc <- err
		case <-ctx.Done():
			errc <- nil
		}
	}()
	log.Info("serving podsync node", zap.String("target", n.Target), zap.Int("kubelet_port", n.Port))
	var first error
	for range 4 {
		err := <-errc
		if err != nil && first == nil && ctx.Err() == nil {
			first = fmt.Errorf("node %s: %w", name, err)
		}
		cancel()
	}
	return first
}

// nodeStatusReportFrequency is how often a Node's unchanged status is
// written, as the kubelet's default nodeStatusReportFrequency with node
// leases: the Lease (renewed every 10 s) says the node is alive, and a
// change of its status (Ready) is written at once. The node library's
// default is a minute: a write of the whole Node, and an etcd write, per
// node and minute.
const nodeStatusReportFrequency = 5 * time.Minute

// takeLease holds the node's podsync lease (client.KeepLease) until ctx
// ends: it returns once the lease is acquired, with the channel that
// reports why it was lost (another holder took it), or the error of ctx
// ending first.
func takeLease(ctx context.Context, ps *client.Client, ttl time.Duration, log *zap.Logger) (<-chan error, error) {
	acquired := make(chan struct{})
	var once sync.Once
	lost := make(chan error, 1)
	go func() {
		err := ps.KeepLease(ctx, ttl, func(l *podsyncv1.Lease) {
			log.Info("podsync lease acquired", zap.Int64("epoch", l.GetEpoch()), zap.String("holder", l.GetHolder()))
			once.Do(func() { close(acquired) })
		})
		if err != nil {
			err = fmt.Errorf("podsync lease lost: %w", err)
		}
		lost <- err
	}()
	select {
	case <-acquired:
		return lost, nil
	case err := <-lost:
		if err == nil {
			err = ctx.Err()
		}
		return nil, err
	}
}

// kubeletAPI serves the node's kubelet API (/containerLogs, /exec,
// /attach, /portforward, /stats/summary, /metrics/resource, /pods) on its
// port, authenticated and authorised by the API server (TokenReview,
// SubjectAccessReview) as the kubelet's webhook mode.
func kubeletAPI(ctx context.Context, cfg Config, n NodeConfig, name string, kc kubernetes.Interface,
	p *provider.Provider, fromKube func(labels.Selector) ([]*corev1.Pod, error)) (*http.Server, error) {
	var opts []nodeutil.WebhookAuthOption
	if cfg.ClientCAFile != "" {
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca", cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("kubelet API client CA: %w", err)
		}
		opts = append(opts, func(c *nodeutil.WebhookAuthConfig) error {
			c.AuthnConfig.ClientCertificateCAContentProvider = ca
			return nil
		})
	}
	auth, err := nodeutil.WebhookAuth(kc, name, opts...)
	if err != nil {
		return nil, fmt.Errorf("kubelet API authentication: %w", err)
	}
	h := api.PodHandler(api.PodHandlerConfig{
		GetContainerLogs:   p.GetContainerLogs,
		RunInContainer:     p.RunInContainer,
		AttachToContainer:  p.AttachToContainer,
		PortForward:        p.PortForward,
		GetStatsSummary:    p.GetStatsSummary,
		GetMetricsResource: p.GetMetricsResource,
		GetPods:            p.GetPods,
		GetPodsFromKubernetes: func(context.Context) ([]*corev1.Pod, error) {
			return fromKube(labels.Everything())
		},
	}, false)
	var cert tls.Certificate
	if n.TLSCert != "" {
		cert, err = tls.LoadX509KeyPair(n.TLSCert, n.TLSKey)
	} else {
		cert, err = selfSigned(name, cfg.ListenAddress)
	}
	if err != nil {
		return nil, fmt.Errorf("kubelet API certificate: %w", err)
	}
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	addr := net.JoinHostPort(cfg.ListenAddress, strconv.Itoa(n.Port))
	l, err := tls.Listen("tcp", addr, tlsCfg)
	if err != nil {
		return nil, fmt.Errorf("kubelet API: listen on %s: %w", addr, err)
	}
	// As the kubelet's (enableProfilingHandler, on by default): Go's
	// profiles of the podsync-vk process, every node it serves, for
	// whoever may use the node's proxy subresource (nodes/proxy, as
	// exec).
	mux := http.NewServeMux()
	mux.Handle("/", h)
	profiling.Register(mux)
	srv := &http.Server{Handler: nodeutil.WithAuth(auth, mux), ReadHeaderTimeout: 30 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() { _ = srv.Serve(l) }()
	return srv, nil
}

// selfSigned makes a serving certificate for the node's kubelet API.
func selfSigned(name, ip string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if addr := net.ParseIP(ip); addr != nil {
		tmpl.IPAddresses = []net.IP{addr}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// mayWatchNamespaces says whether podsync-vk's identity may list and
// watch namespaces (SelfSubjectAccessReviews, which every authenticated
// identity may create).
func mayWatchNamespaces(ctx context.Context, kc kubernetes.Interface) (bool, error) {
	for _, verb := range []string{"list", "watch"} {
		r, err := kc.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "namespaces"}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("may podsync-vk %s namespaces: %w", verb, err)
		}
		if !r.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}

// followReadinessGates gives p the pods' conditions as the API server
// holds them, and reports a change of a readiness gate's condition (set
// by its owner, a load balancer controller say), which the node library
// does not pass on: only a spec change reaches the provider.
func followReadinessGates(p *provider.Provider, pods coreinformers.PodInformer) error {
	lister := pods.Lister()
	p.UseKubeConditions(func(namespace, name string) []corev1.PodCondition {
		pod, err := lister.Pods(namespace).Get(name)
		if err != nil {
			return nil
		}
		return pod.Status.DeepCopy().Conditions
	})
	_, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*corev1.Pod)
			pod, ok2 := newObj.(*corev1.Pod)
			if ok1 && ok2 && gatesChanged(old, pod) {
				p.GateChanged(pod.Namespace, pod.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("follow readiness gates: %w", err)
	}
	return nil
}

// gatesChanged says whether a condition of one of pod's readiness gates
// differs between old and pod.
func gatesChanged(old, pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		a, b := condition(old, g.ConditionType), condition(pod, g.ConditionType)
		if (a == nil) != (b == nil) || a != nil && a.Status != b.Status {
			return true
		}
	}
	return false
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// followRuntimeClasses gives p the RuntimeClasses, whose handlers the
// pods' sandboxes run with, as the kubelet's runtimeclass manager watches
// them, and tells it of each one created or changed, for the pods that
// wait for it.
func followRuntimeClasses(ctx context.Context, p *provider.Provider, rcs nodeinformers.RuntimeClassInformer) (cache.ResourceEventHandlerRegistration, error) {
	p.UseRuntimeClasses(runtimeClassLister{rcs.Lister()})
	changed := func(obj any) {
		if rc, ok := obj.(*nodev1.RuntimeClass); ok {
			p.RuntimeClassChanged(ctx, rc.Name)
		}
	}
	reg, err := rcs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("follow RuntimeClasses: %w", err)
	}
	return reg, nil
}
