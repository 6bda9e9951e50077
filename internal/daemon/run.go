package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
	"github.com/podsync/podsync/engine/metrics"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/engine/syncer"
	"github.com/podsync/podsync/engine/watch"
	"github.com/podsync/podsync/internal/ctrdevents"
	"github.com/podsync/podsync/internal/manifestdir"
	"github.com/podsync/podsync/internal/profiling"
	"github.com/podsync/podsync/internal/tracing"
	"github.com/podsync/podsync/logx"
	"github.com/podsync/podsync/server"
	"github.com/podsync/podsync/validation"
)

// Exit codes of Run.
const (
	ExitOK      = 0
	ExitFailure = 1 // startup or runtime failure
	ExitUsage   = 2 // bad flags or config file
)

// StoreFile is the store's file name under --root-dir.
const StoreFile = "podsync.db"

// Retry delays of the runtime connection.
const (
	dialBackoffMin = time.Second
	dialBackoffMax = 30 * time.Second
)

// Run is podsyncd: it parses args (flags, --config), serves the
// podsync.v1 API on every --listen address and runs the node until ctx
// ends, then shuts down gracefully. The pods keep running: podsyncd is not
// their parent. It returns the exit code: 0 after a clean shutdown, 2 for
// bad flags or configuration, 1 when podsyncd cannot start or fails.
//
// A container runtime that is not up yet is waited for: until it answers,
// grpc.health.v1 reports NOT_SERVING and calls fail with UNAVAILABLE
// (reason RUNTIME_UNAVAILABLE).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runMain(ctx, args, stdout, stderr, Host{})
}

// runMain is Run on host.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer, host Host) int {
	cfg, err := LoadConfig(ctx, args)
	if errors.Is(err, pflag.ErrHelp) {
		_, _ = io.WriteString(stdout, Usage())
		return ExitOK
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "podsyncd: %v\nRun 'podsyncd --help' for usage.\n", err)
		return ExitUsage
	}
	log, err := NewLogger(cfg.LogLevel, cfg.LogFormat, stderr)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "podsyncd: %v\n", err)
		return ExitUsage
	}
	defer func() { _ = log.Sync() }()
	defer routeKlog(log.Named("cri"))()
	if err := run(ctx, cfg, host, log); err != nil {
		log.Error("podsyncd failed", zap.Error(err))
		return ExitFailure
	}
	log.Info("podsyncd stopped")
	return ExitOK
}

// NewLogger returns a logger writing to w at level (debug, info, warn,
// error) in format (json, console).
func NewLogger(level, format string, w io.Writer) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	ec.EncodeDuration = zapcore.StringDurationEncoder
	var enc zapcore.Encoder
	switch format {
	case "json":
		enc = zapcore.NewJSONEncoder(ec)
	case "console":
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("--log-format %q: want json or console", format)
	}
	ws := zapcore.Lock(zapcore.AddSync(w))
	return zap.New(zapcore.NewCore(enc, ws, lvl), zap.AddCaller(), zap.ErrorOutput(ws)), nil
}

// daemon is one run of podsyncd.
type daemon struct {
	cfg  Config
	host Host
	// cgroupFS is where the cgroup file systems are (Host.CgroupFS).
	cgroupFS string
	log      *zap.Logger
	store    *store.Store
	health   *server.HealthChecker
	// svc is the service of the node running on the connected runtime,
	// rt that runtime (nil while there is none).
	svc   server.Service
	rt    atomic.Pointer[syncer.RemoteRuntime]
	fatal chan error // buffered; background failures that end podsyncd

	alloc    corev1.ResourceList
	memory   int64
	hostDNS  *runtimeapi.DNSConfig
	policy   admit.Policy
	hooksFor admit.Node
	// system is the machine's identity (GetNode's system info), less the
	// runtime's version, read again at each connection.
	system engine.SystemInfo
	// credentials are the node's image credentials (--image-credentials).
	credentials *syncer.Keyring
	// metrics are the engine's, on the registry --metrics-address serves.
	metrics *metrics.Metrics
	// tracer is the tracer provider of the OTEL_* environment (a no-op
	// one when it exports nothing): the server's, the node's and the CRI
	// client's.
	tracer *tracing.Provider
}

func run(ctx context.Context, cfg Config, host Host, log *zap.Logger) (err error) {
	log.Info("podsyncd starting", zap.String("node", cfg.NodeName), zap.Strings("node_ips", cfg.NodeIPs),
		zap.String("runtime_endpoint", cfg.RuntimeEndpoint), zap.String("image_endpoint", cfg.ImageEndpoint),
		zap.Strings("listen", cfg.Listen))
	d := &daemon{cfg: cfg, host: host, log: log, fatal: make(chan error, 4), policy: cfg.Policy.Admit()}
	if err := d.machine(); err != nil {
		return err
	}
	if d.cgroupFS, err = host.cgroupFS(cfg); err != nil {
		return err
	}
	// The pods' cgroups are podsyncd's alone while it runs.
	cgroupLock, err := claimCgroupRoot(d.cgroupFS, criconfig.Options{CgroupDriver: cfg.CgroupDriver, CgroupRoot: cfg.CgroupRoot})
	if err != nil {
		return err
	}
	defer func() { _ = cgroupLock.Close() }()
	if d.tracer, err = tracing.Setup(ctx, "podsyncd", ""); err != nil {
		return err
	}
	if d.tracer.Exporting() {
		log.Info("tracing: exporting spans over OTLP")
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if serr := d.tracer.Shutdown(sctx); serr != nil {
			log.Warn("tracing: spans not exported at exit", zap.Error(serr))
		}
	}()

	var opts server.Options
	tlsReloader, err := cfg.Apply(&opts, log.Named("tls"))
	if err != nil {
		return err
	}
	st, err := openStore(cfg, log)
	if err != nil {
		return err
	}
	d.store = st
	defer func() {
		if cerr := st.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close store: %w", cerr))
		}
	}()

	reg := prometheus.NewRegistry()
	srv, err := d.newServer(opts, reg)
	if err != nil {
		return err
	}
	if tlsReloader != nil {
		// Certificates, CAs and the CRL rotate without a restart: read
		// every DefaultTLSReloadInterval and on SIGHUP.
		if err := tlsReloader.Register(reg); err != nil {
			return err
		}
		defer tlsReloader.Start(ctx, DefaultTLSReloadInterval)()
	} else {
		// Nothing to reload: a SIGHUP (systemctl reload) must not end
		// podsyncd, as it would by default.
		signal.Ignore(syscall.SIGHUP)
	}
	listeners, err := listenAll(ctx, cfg.Listen, cfg.Security)
	if err != nil {
		return err
	}
	metrics, metricsL, err := listenMetrics(ctx, cfg, reg)
	if err != nil {
		closeAll(listeners)
		return err
	}
	return d.serve(ctx, srv, listeners, metrics, metricsL)
}

// openStore opens the store under the root directory. A corrupt file is
// refused, whether or not the runtime holds podsync's pods (a corrupt
// store is not a new one), and left as it is, unless --adopt-runtime or
// --remove-orphans, which move it aside and start a new store that the
// node then fills from the runtime or empties the runtime for.
func openStore(cfg Config, log *zap.Logger) (*store.Store, error) {
	path := filepath.Join(cfg.RootDir, StoreFile)
	opts := store.Options{Logger: log.Named("store"), MaxRecordBytes: cfg.MaxRecordBytes, KeepBytes: cfg.RevisionLogMaxBytes}
	st, err := store.Open(path, opts)
	if err == nil || !errors.Is(err, errdefs.ErrStoreCorrupt) {
		return st, err
	}
	if !cfg.AdoptRuntime && !cfg.RemoveOrphans {
		return nil, fmt.Errorf("%w; podsyncd changed nothing and the file is left as it is, and the pods keep running: "+
			"restore %s from a backup, or start with --adopt-runtime to move it aside and rebuild the pods' records "+
			"from the container runtime, or with --remove-orphans to move it aside and remove the pods", err, path)
	}
	aside, merr := store.MoveAside(path, time.Now())
	if merr != nil {
		return nil, errors.Join(err, merr)
	}
	log.Warn("corrupt store moved aside; starting a new one", zap.String(logx.Path, path),
		zap.String("moved_to", aside), zap.Error(err), zap.Bool("adopt_runtime", cfg.AdoptRuntime))
	return store.Open(path, opts)
}

// newServer builds the gRPC server from opts, with the engine's metrics
// and the Go and process collectors on reg and the health checker,
// serving the service, whose backend runNode sets once the runtime is
// connected.
func (d *daemon) newServer(opts server.Options, reg *prometheus.Registry) (*server.Server, error) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var err error
	d.metrics, err = metrics.New(reg, metrics.Options{ErrorCode: criErrorCode})
	if err != nil {
		return nil, err
	}
	if err := metrics.RegisterStore(reg, d.store); err != nil {
		return nil, err
	}
	sessions, err := server.NewSessionMetrics(reg)
	if err != nil {
		return nil, err
	}
	d.health = server.NewHealthChecker(d.probe, 0, d.log.Named("health"))
	d.svc = server.NewService(server.ServiceOptions{
		Validator: &server.Validator{Limits: server.Limits{
			MaxContainersPerPod:   d.cfg.MaxContainersPerPod,
			MaxGracePeriodSeconds: d.cfg.MaxGracePeriodSeconds,
		}},
		Health:            d.health,
		NodeName:          d.cfg.NodeName,
		StreamIdleTimeout: d.cfg.StreamIdleTimeout.Duration,
		Sessions:          sessions,
		Logger:            d.log.Named("service"),
		RequireLease:      d.cfg.RequireLease,
	})
	if err := server.RegisterLeaseMetrics(reg, d.svc); err != nil {
		return nil, err
	}
	opts.Service = d.svc
	opts.TracerProvider = d.tracer
	opts.Logger = d.log.Named("grpc")
	opts.Registerer = reg
	opts.Health = d.health
	return server.New(opts)
}

// listenMetrics listens on --metrics-address and returns the HTTP server
// of /metrics (reg) and, with --enable-profiling, /debug/pprof. Both are
// nil without --metrics-address.
func listenMetrics(ctx context.Context, cfg Config, reg *prometheus.Registry) (*http.Server, net.Listener, error) {
	if cfg.MetricsAddress == "" {
		return nil, nil, nil
	}
	addr := cfg.MetricsAddress
	if !cfg.MetricsAllowRemote {
		// A host name must resolve to loopback only; listen on the
		// address checked, never on the name resolved again.
		host, port, _ := net.SplitHostPort(addr)
		ip, err := loopbackIP(ctx, host)
		if err != nil {
			return nil, nil, fmt.Errorf("metrics: listen on %s: %w (or add --metrics-allow-remote)", addr, err)
		}
		addr = net.JoinHostPort(ip.String(), port)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: listen on %s: %w", cfg.MetricsAddress, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", server.MetricsHandler(reg))
	if cfg.EnableProfiling {
		profiling.Register(mux)
	}
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, l, nil
}

// serve runs the health checker, the node and the servers (metrics may be
// nil) until ctx ends or a background failure, then shuts down in order:
// health first, then the servers within --shutdown-timeout, then the node.
// It returns the failure, or nil when ctx ended.
func (d *daemon) serve(ctx context.Context, srv *server.Server, listeners []net.Listener, metrics *http.Server, metricsL net.Listener) error {
	// The health checker and the node outlive ctx: they stop after the
	// server has drained.
	healthCtx, stopHealth := context.WithCancel(context.WithoutCancel(ctx))
	nodeCtx, stopNode := context.WithCancel(context.WithoutCancel(ctx))
	var healthWG, nodeWG, serveWG sync.WaitGroup
	healthWG.Go(func() { _ = d.health.Run(healthCtx) })
	nodeWG.Go(func() { d.supervise(nodeCtx) })
	for _, l := range listeners {
		d.log.Info("serving", zap.String("address", l.Addr().Network()+"://"+l.Addr().String()))
		serveWG.Go(func() {
			if err := srv.Serve(l); err != nil {
				d.fail(err)
			}
		})
	}
	if metrics != nil {
		d.log.Info("serving metrics", zap.String("address", metricsL.Addr().String()))
		serveWG.Go(func() {
			if err := metrics.Serve(metricsL); !errors.Is(err, http.ErrServerClosed) {
				d.fail(fmt.Errorf("metrics: %w", err))
			}
		})
	}

	var runErr error
	select {
	case <-ctx.Done():
		d.log.Info("shutting down", zap.Duration("timeout", d.cfg.ShutdownTimeout.Duration))
	case runErr = <-d.fatal:
		d.log.Error("shutting down after a failure", zap.Error(runErr))
	}

	// Health first: Shutdown sets NOT_SERVING, nothing may set it back.
	stopHealth()
	healthWG.Wait()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.ShutdownTimeout.Duration)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		d.log.Warn("graceful shutdown incomplete", zap.Error(err))
	}
	if metrics != nil {
		if err := metrics.Shutdown(sctx); err != nil {
			_ = metrics.Close()
		}
	}
	serveWG.Wait()
	stopNode()
	nodeWG.Wait()
	return runErr
}

// fail reports a failure that ends podsyncd.
func (d *daemon) fail(err error) {
	select {
	case d.fatal <- err:
	default:
	}
}

// supervise connects to the runtime, retrying with back-off until it
// answers, and runs the node until ctx ends. If the node cannot start (its
// recovery fails), it reconnects and starts a new one.
func (d *daemon) supervise(ctx context.Context) {
	backoff := dialBackoffMin
	waiting := false
	for {
		rt, closeRT, err := d.dial(ctx)
		if err == nil {
			backoff = dialBackoffMin
			waiting = false
			err = d.runNode(ctx, rt)
			closeRT()
		}
		if ctx.Err() != nil {
			return
		}
		// A configuration the node cannot run, or a store it must not
		// run on (lost: new or emptied while the runtime holds podsync's
		// pods), is not fixed by waiting: podsyncd exits 1, with the
		// message that says what to do (--adopt-runtime, --remove-orphans),
		// as docs/security.md promises and an operator can alert on.
		if errors.Is(err, errdefs.ErrInvalidSpec) || errors.Is(err, errdefs.ErrStoreLost) || errors.Is(err, errdefs.ErrStoreCorrupt) {
			d.fail(err)
			return
		}
		if !waiting {
			d.log.Warn("waiting for the container runtime", zap.Error(err), zap.Duration("retry", backoff))
			waiting = true
		} else {
			d.log.Debug("container runtime still unavailable", zap.Error(err), zap.Duration("retry", backoff))
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, dialBackoffMax)
	}
}

// runNode runs a node on rt until ctx ends (nil) or its start fails.
func (d *daemon) runNode(ctx context.Context, rt *syncer.RemoteRuntime) error {
	policy := withDenied(d.policy, append(ownDeniedPaths(d.cfg), runtimeDeniedPaths(ctx, rt, d.log)...), d.log)
	warnCostlyStatsPeriod(ctx, rt, d.log)
	nodeInfo := d.hooksFor
	if st, err := rt.Status(ctx, false); err == nil {
		nodeInfo.UserNamespaces = syncer.SupportsUserNamespaces(st)
	} else {
		d.log.Warn("runtime status unavailable: pods with hostUsers false are refused", zap.Error(err))
	}
	d.log.Info("runtime features", zap.Bool("userNamespaces", nodeInfo.UserNamespaces))
	system := d.system
	version, err := runtimeVersion(ctx, rt)
	if err != nil {
		// The node runs without it: GetNode reports it unknown.
		d.log.Warn("runtime version unavailable", zap.Error(err))
	}
	system.ContainerRuntimeVersion = version
	threshold, err := d.cfg.StoreThreshold()
	if err != nil {
		return err
	}
	// containerd's own events stand in for CRI's on containerd 1.6,
	// over the same socket; a Host's runtime offers CRI's.
	var events watch.RuntimeEvents
	if d.host.Runtime == nil {
		src, err := ctrdevents.Dial(d.cfg.RuntimeEndpoint)
		if err != nil {
			return err
		}
		defer func() { _ = src.Close() }()
		events = src
	}
	node, err := engine.NewNode(engine.NodeOptions{
		TracerProvider: d.tracer,
		RuntimeEvents:  events,
		Mounter:        d.host.Mounter,
		Runtime:        d.metrics.InstrumentRuntime(rt),
		Stats:          rt,
		Images:         d.metrics.InstrumentImages(rt),
		Metrics:        d.metrics,
		Store:          d.store,
		Logger:         d.log.Named("engine"),
		Config: criconfig.Options{
			RootDir:        d.cfg.RootDir,
			PodLogDir:      d.cfg.PodLogDir,
			ClusterDNS:     d.cfg.ClusterDNS,
			ClusterDomain:  d.cfg.ClusterDomain,
			HostDNS:        d.hostDNS,
			CgroupDriver:   d.cfg.CgroupDriver,
			CgroupRoot:     d.cfg.CgroupRoot,
			CgroupFS:       d.cgroupFS,
			SeccompDefault: d.cfg.SeccompDefault,
			// Localhost seccomp profiles live in <root-dir>/seccomp, as
			// the kubelet's in <root-dir>/seccomp (--seccomp-profile-root).
			SeccompProfileRoot: filepath.Join(d.cfg.RootDir, "seccomp"),
			NodeName:           d.cfg.NodeName,
			NodeIPs:            d.cfg.NodeIPs,
			NodeAllocatable:    d.alloc,
			MemoryCapacity:     d.memory,
		},
		Admission:          &engine.AdmissionConfig{Node: nodeInfo, Policy: policy},
		SystemInfo:         system,
		Credentials:        d.credentials,
		ImagePulls:         d.cfg.ImagePullVerification(),
		RuntimeUnavailable: runtimeUnavailable,
		RemoveOrphans:      d.cfg.RemoveOrphans,
		AdoptRuntime:       d.cfg.AdoptRuntime,
		Eviction:           engine.EvictionPolicy{Period: d.cfg.HousekeepingInterval.Duration, StoreMinAvailable: threshold},
	})
	if err != nil {
		return err
	}
	d.log.Info("connected to the container runtime")
	d.rt.Store(rt)
	d.svc.SetBackend(server.BackendOf(node))
	defer func() {
		d.svc.SetBackend(nil)
		d.rt.Store(nil)
	}()
	d.health.ProbeNow()
	if d.cfg.ManifestDir != "" {
		src, err := manifestdir.New(manifestdir.Options{Dir: d.cfg.ManifestDir, Node: node, Rescan: d.cfg.ManifestRescan.Duration,
			Validation: validation.Options{NodeName: d.cfg.NodeName}, Logger: d.log.Named("manifests")})
		if err != nil {
			return err
		}
		srcCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := src.Run(srcCtx); err != nil {
				d.log.Error("manifest directory stopped", zap.Error(err))
			}
		}()
		defer func() { stop(); <-done }()
	}
	if err := node.Run(ctx); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	return nil
}

// dialRuntime connects to the runtime and, if it is another endpoint, the
// image service. The returned func closes what was opened.
func dialRuntime(ctx context.Context, runtimeEP, imageEP string, tp trace.TracerProvider) (*syncer.RemoteRuntime, func(), error) {
	closeCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	}
	rt, err := syncer.DialRuntimeWith(ctx, runtimeEP, 0, tp)
	if err != nil {
		return nil, nil, err
	}
	closeRT := func() {
		cctx, cancel := closeCtx()
		defer cancel()
		_ = rt.Close(cctx)
	}
	if imageEP == "" || imageEP == runtimeEP {
		return rt, closeRT, nil
	}
	img, err := syncer.DialRuntimeWith(ctx, imageEP, 0, tp)
	if err != nil {
		closeRT()
		return nil, nil, fmt.Errorf("image endpoint: %w", err)
	}
	both := &syncer.RemoteRuntime{RuntimeService: rt.RuntimeService, ImageManagerService: img.ImageManagerService}
	return both, func() {
		closeRT()
		cctx, cancel := closeCtx()
		defer cancel()
		_ = img.Close(cctx)
	}, nil
}

// probe is the health probe: CRI Version of the connected runtime.
func (d *daemon) probe(ctx context.Context) error {
	rt := d.rt.Load()
	if rt == nil {
		return errors.New("not connected to the container runtime")
	}
	_, err := rt.Version(ctx, "v1")
	return err
}

// criErrorCode names the gRPC code of a failed CRI call for the engine's
// metrics: k8s.io/cri-client returns gRPC status errors.
func criErrorCode(err error) string { return status.Code(err).String() }

// runtimeUnavailable reports whether a CRI call failed because the runtime
// did not answer (UNAVAILABLE: containerd stopped or restarting).
func runtimeUnavailable(err error) bool { return status.Code(err) == codes.Unavailable }
