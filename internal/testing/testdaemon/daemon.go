package testdaemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	corev1 "k8s.io/api/core/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine"
	"github.com/podsync/podsync/engine/admit"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/enginetest"
	"github.com/podsync/podsync/engine/store"
	"github.com/podsync/podsync/host/cgroupfs"
	"github.com/podsync/podsync/host/mounttable"
	"github.com/podsync/podsync/server"
)

// Image is the image a Daemon's fake runtime holds unless Options.Images
// says otherwise.
const Image = "registry.local/busybox:1"

// NodeName is the node name every pod status reports.
const NodeName = "node-1"

// SystemInfo is what the node says of its machine (GetNode's system
// info); the runtime's version is the fake runtime's CRI Version.
var SystemInfo = engine.SystemInfo{
	MachineID: "3d1219c7c4c5404aaa1f6d2a48adfda4", BootID: "3834f90e-e1b6-4f78-bff4-79fbb76efc09",
	KernelVersion: "6.1.0-18-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)",
	ContainerRuntimeVersion: "fakeRuntime://0.1.0", OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH,
}

// NodeIP is the node's address (TEST-NET-1).
const NodeIP = "192.0.2.10"

// Transport is how a Daemon serves.
type Transport int

const (
	// Unix serves server.New on a unix socket: every interceptor, and the
	// caller (this process) known by its uid. The default.
	Unix Transport = iota
	// TCP serves server.New on 127.0.0.1: mutual TLS when
	// Options.Server.TLS is set, else plaintext with InsecureLoopback,
	// whose callers are "anonymous".
	TCP
	// Bufconn serves the bare service, server.NewService behind only the
	// error interceptors (no authorization, logging or rate limit), on an
	// in-memory listener.
	Bufconn
)

// Options configure a Daemon. The zero value is a daemon on a unix socket
// whose caller is admin, logging nowhere.
type Options struct {
	// Transport is how the daemon serves; the default is Unix.
	Transport Transport
	// Logger receives the logs of the store, engine, service and server
	// (named so); nil discards them.
	Logger *zap.Logger
	// Images are the images the fake runtime holds; nil means Image.
	Images []string
	// Store are the store's options; a nil Logger is Logger's "store".
	Store store.Options
	// Allocatable, when set, is the node's allocatable resources, which
	// the node admits pods against, with Policy, as podsyncd does; unset,
	// the node's resources are not limited (but the pod count's default).
	Allocatable corev1.ResourceList
	// Policy is the admission policy; nil means DefaultPolicy.
	Policy *admit.Policy
	// Service, if set, adjusts the service's options before it is built
	// (Health, Validator, …).
	Service func(*server.ServiceOptions)
	// Wrap, if set, wraps the service, for a test that injects faults:
	// the daemon serves what it returns.
	Wrap func(podsyncv1.PodSyncServiceServer) podsyncv1.PodSyncServiceServer
	// Server are server.New's options, for Unix and TCP; Service and
	// Logger are the daemon's. Zero Roles mean that this process's uid is
	// admin (Self). Its TracerProvider is the node's too.
	Server server.Options
	// Dial are further options of Conn, after plaintext credentials.
	Dial []grpc.DialOption
}

// DefaultPolicy is a test daemon's admission policy: podsyncd's default
// level, baseline, with the exemption the examples and tests declare —
// they publish unprivileged host ports (examples/web.yaml's 8080).
var DefaultPolicy = admit.Policy{AllowedHostPorts: []admit.PortRange{{From: 1024, To: 65535}}}

func (o Options) policy() admit.Policy {
	if o.Policy != nil {
		return *o.Policy
	}
	return DefaultPolicy
}

// Daemon is a running in-process podsyncd. Its fields are read-only.
type Daemon struct {
	// Runtime is the fake CRI runtime the node runs pods on.
	Runtime *enginetest.FakeRuntime
	// Node is the node the service answers for.
	Node *engine.Node
	// Store is the node's store; StorePath its file.
	Store     *store.Store
	StorePath string
	// RootDir and PodLogDir are the node's state and pod log directories.
	RootDir, PodLogDir string
	// CgroupRoot is the node's cgroup root, a name of this daemon's own
	// (its pods' cgroups, made for pods with pod-level resources, are
	// never another agent's); Close removes it.
	CgroupRoot string
	// Socket is the unix socket's path (Unix only).
	Socket string
	// Addr is the TCP listener's "127.0.0.1:port" (TCP only).
	Addr string
	// Target is the address to dial: "unix:///…/podsync.sock", Addr, or
	// "passthrough:///bufnet" (Bufconn, through Conn only).
	Target string
	// Conn is a plaintext connection to Target (with Options.Dial);
	// closed by Close. Over TCP with TLS, dial Target with credentials
	// instead.
	Conn *grpc.ClientConn
	// Client is the generated client over Conn.
	Client podsyncv1.PodSyncServiceClient

	closers []func() error
}

// Self is this process's principal on a unix socket, "uid:N", the admin
// of a Daemon whose Options.Server.Roles are zero.
func Self() string { return "uid:" + strconv.Itoa(os.Getuid()) }

// New starts a daemon that stops, and removes its files, when the test
// ends; a failure to start or to stop cleanly fails the test.
func New(t testing.TB, o Options) *Daemon {
	t.Helper()
	d, err := Start(o)
	if err != nil {
		t.Fatalf("start podsyncd: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("stop podsyncd: %v", err)
		}
	})
	return d
}

// Start starts a daemon; Close stops it. It is New for callers without a
// testing.TB, such as examples.
func Start(o Options) (*Daemon, error) {
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	images := o.Images
	if images == nil {
		images = []string{Image}
	}
	d := &Daemon{Runtime: enginetest.NewRuntime(enginetest.WithImages(images...))}
	if err := d.start(o, log); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	return d, nil
}

// start builds the daemon; Close undoes what it did, also when it fails.
func (d *Daemon) start(o Options, log *zap.Logger) error {
	// A short directory: a socket path is limited to 107 bytes.
	dir, err := os.MkdirTemp("", "podsyncd-")
	if err != nil {
		return err
	}
	// The pods' tmpfs volumes first: the fake runtime's pods are not
	// removed when the daemon stops.
	d.closers = append(d.closers, func() error { return errors.Join(mounttable.UnmountBelow(dir), os.RemoveAll(dir)) })
	d.RootDir, d.PodLogDir = filepath.Join(dir, "root"), filepath.Join(dir, "logs")
	d.CgroupRoot = "/" + filepath.Base(dir)
	d.closers = append(d.closers, d.removeCgroupRoot)
	for _, sub := range []string{d.RootDir, d.PodLogDir} {
		if err := os.Mkdir(sub, 0o700); err != nil {
			return err
		}
	}

	storeOpts := o.Store
	if storeOpts.Logger == nil {
		storeOpts.Logger = log.Named("store")
	}
	d.StorePath = filepath.Join(dir, "podsync.db")
	if d.Store, err = store.Open(d.StorePath, storeOpts); err != nil {
		return err
	}
	d.closers = append(d.closers, d.Store.Close)

	gate, err := d.runNode(o, log)
	if err != nil {
		return err
	}
	var svc podsyncv1.PodSyncServiceServer = gate
	if o.Wrap != nil {
		// The wrapper is served behind the service's own readiness gate.
		svc = gated{PodSyncServiceServer: o.Wrap(gate), gate: gate}
	}
	if o.Transport == Bufconn {
		err = d.serveBufconn(svc, o.Dial)
	} else {
		err = d.serve(svc, o, log.Named("server"), dir)
	}
	if err != nil {
		return err
	}
	d.Client = podsyncv1.NewPodSyncServiceClient(d.Conn)
	return nil
}

// runNode starts the node on the runtime and store and returns its
// service.
func (d *Daemon) runNode(o Options, log *zap.Logger) (server.Service, error) {
	nodeOpts := engine.NodeOptions{
		Runtime: d.Runtime, Images: d.Runtime, Store: d.Store, Logger: log.Named("engine"),
		Config: criconfig.Options{RootDir: d.RootDir, PodLogDir: d.PodLogDir, CgroupRoot: d.CgroupRoot, NodeIPs: []string{NodeIP}},
		// Nothing periodic during a test: passes run on applies, hints and
		// timers.
		RelistPeriod: time.Hour, EventedRelistPeriod: time.Hour,
		LogRotation: engine.LogRotation{Period: time.Hour}, GC: engine.GCPolicy{Period: time.Hour},
		SystemInfo: SystemInfo,
	}
	info := admit.Node{Name: NodeName, Labels: admit.NodeLabels(NodeName, goruntime.GOOS, goruntime.GOARCH, nil), Allocatable: o.Allocatable}
	nodeOpts.Admission = &engine.AdmissionConfig{Node: info, Policy: o.policy()}
	nodeOpts.TracerProvider = o.Server.TracerProvider
	node, err := engine.NewNode(nodeOpts)
	if err != nil {
		return nil, err
	}
	d.Node = node
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- node.Run(ctx) }()
	d.closers = append(d.closers, func() error {
		stop()
		if err := <-ran; err != nil {
			return fmt.Errorf("node: %w", err)
		}
		return nil
	})

	svcOpts := server.ServiceOptions{Backend: server.BackendOf(node), NodeName: NodeName, Logger: log.Named("service")}
	if o.Service != nil {
		o.Service(&svcOpts)
	}
	return server.NewService(svcOpts), nil
}

// serve serves svc with server.New on a unix socket in dir or on TCP.
func (d *Daemon) serve(svc podsyncv1.PodSyncServiceServer, o Options, log *zap.Logger, dir string) error {
	opts := o.Server
	opts.Service, opts.Logger = svc, log
	if len(opts.Roles.Admin)+len(opts.Roles.Debug)+len(opts.Roles.Exec)+len(opts.Roles.Read) == 0 {
		opts.Roles = server.Roles{Admin: []string{Self()}}
	}
	var (
		l   net.Listener
		err error
	)
	if o.Transport == TCP {
		opts.InsecureLoopback = opts.TLS == nil
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return err
		}
		d.Addr = l.Addr().String()
		d.Target = d.Addr
	} else {
		d.Socket = filepath.Join(dir, "podsync.sock")
		if l, err = net.Listen("unix", d.Socket); err != nil {
			return err
		}
		d.Target = "unix://" + d.Socket
	}
	srv, err := server.New(opts)
	if err != nil {
		_ = l.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	d.closers = append(d.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		if serr := <-served; serr != nil {
			err = errors.Join(err, fmt.Errorf("serve: %w", serr))
		}
		return err
	})
	return d.dial(o.Dial)
}

// removeCgroupRoot removes the daemon's cgroup root from every hierarchy
// where the node made it.
func (d *Daemon) removeCgroupRoot() error {
	hs, _ := cgroupfs.Hierarchies(criconfig.DefaultCgroupFS) // none to clean without them
	var errs []error
	for _, h := range hs {
		errs = append(errs, cgroupfs.RemoveTree(filepath.Join(h, d.CgroupRoot), nil))
	}
	return errors.Join(errs...)
}

// gated serves a wrapped service behind the readiness gate of the service
// it wraps.
type gated struct {
	podsyncv1.PodSyncServiceServer
	gate server.Service
}

func (g gated) UnaryReady() grpc.UnaryServerInterceptor   { return g.gate.UnaryReady() }
func (g gated) StreamReady() grpc.StreamServerInterceptor { return g.gate.StreamReady() }

// readinessGate is the readiness gate of a service (server.Service, or a
// gated wrapper).
type readinessGate interface {
	UnaryReady() grpc.UnaryServerInterceptor
	StreamReady() grpc.StreamServerInterceptor
}

// serveBufconn serves svc bare, behind its readiness gate and the error
// interceptors, in memory.
func (d *Daemon) serveBufconn(svc podsyncv1.PodSyncServiceServer, dial []grpc.DialOption) error {
	lis := bufconn.Listen(1 << 20)
	g := svc.(readinessGate)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(g.UnaryReady(), server.UnaryErrorInterceptor()),
		grpc.ChainStreamInterceptor(g.StreamReady(), server.StreamErrorInterceptor()))
	podsyncv1.RegisterPodSyncServiceServer(srv, svc)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	d.closers = append(d.closers, func() error {
		srv.Stop()
		// ErrServerStopped: Stop came before Serve began.
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve: %w", err)
		}
		return nil
	})
	d.Target = "passthrough:///bufnet"
	return d.dial(append([]grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return lis.DialContext(ctx)
	})}, dial...))
}

// dial makes Conn, a plaintext connection to Target.
func (d *Daemon) dial(opts []grpc.DialOption) error {
	conn, err := grpc.NewClient(d.Target,
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		return err
	}
	d.closers = append(d.closers, conn.Close)
	d.Conn = conn
	return nil
}

// Close stops what Start started, last first: the connection, the
// server, the node and the store, and removes the daemon's files. It
// returns every error, and does nothing the second time.
func (d *Daemon) Close() error {
	var errs []error
	for i := len(d.closers) - 1; i >= 0; i-- {
		errs = append(errs, d.closers[i]())
	}
	d.closers = nil
	return errors.Join(errs...)
}
