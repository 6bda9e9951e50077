package vk

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vktrace "github.com/virtual-kubelet/virtual-kubelet/trace"
	"github.com/virtual-kubelet/virtual-kubelet/trace/opentelemetry"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/podsync/podsync/internal/tracing"
)

// Main parses args and runs podsync-vk until ctx ends; it returns the exit
// code (0, 1 on failure, 2 on bad usage).
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("podsync-vk", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg        Config
		configFile string
		nodes      []string
	)
	fs.StringVar(&configFile, "config", "", "YAML config file with the same keys as the flags (kubeconfig, listenAddress, clientCAFile, podSyncWorkers, leaseTTL, kubeAPIQPS, kubeAPIBurst, kubeAPIContentType, nodes)")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig to reach the API server (default $KUBECONFIG, then in-cluster)")
	fs.StringVar(&cfg.ListenAddress, "listen-address", "127.0.0.1", "IP the nodes' kubelet APIs listen on and the Nodes report as InternalIP")
	fs.StringVar(&cfg.ClientCAFile, "client-ca-file", "", "CA of the client certificates the kubelet API accepts (the API server's --kubelet-client-certificate)")
	fs.IntVar(&cfg.PodSyncWorkers, "pod-sync-workers", DefaultPodSyncWorkers, "pods of each node created, updated or deleted at once (a deletion holds one for the pod's grace period)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", DefaultLeaseTTL, "ttl of the podsync lease taken of each node (renewed every third of it); a standby takes a node over once it expires")
	fs.Float32Var(&cfg.KubeAPIQPS, "kube-api-qps", DefaultKubeAPIQPS, "API server requests per second for each node served, as the kubelet's --kube-api-qps")
	fs.IntVar(&cfg.KubeAPIBurst, "kube-api-burst", DefaultKubeAPIBurst, "API server request burst for each node served, as the kubelet's --kube-api-burst")
	fs.StringVar(&cfg.KubeAPIContentType, "kube-api-content-type", DefaultKubeAPIContentType, "content type of the requests to the API server, as the kubelet's --kube-api-content-type")
	fs.DurationVar(&cfg.TokenMaxAge, "token-max-age", 0, "age at which a service-account token is renewed whatever its lifetime (0: the kubelet's 24h); for tests")
	_ = fs.MarkHidden("token-max-age")
	fs.StringArrayVar(&nodes, "node", nil, "a podsync node: name=NAME,target=SOCKET|HOST:PORT,port=KUBELET_PORT[,cert=,key=,ca=] (repeat for more)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if configFile != "" {
		var file Config
		if err := file.LoadFile(configFile); err != nil {
			_, _ = fmt.Fprintf(stderr, "podsync-vk: %v\n", err)
			return 2
		}
		fs.Visit(func(f *pflag.Flag) {
			switch f.Name {
			case "kubeconfig":
				file.Kubeconfig = cfg.Kubeconfig
			case "listen-address":
				file.ListenAddress = cfg.ListenAddress
			case "client-ca-file":
				file.ClientCAFile = cfg.ClientCAFile
			case "pod-sync-workers":
				file.PodSyncWorkers = cfg.PodSyncWorkers
			case "lease-ttl":
				file.LeaseTTL = cfg.LeaseTTL
			case "kube-api-qps":
				file.KubeAPIQPS = cfg.KubeAPIQPS
			case "kube-api-burst":
				file.KubeAPIBurst = cfg.KubeAPIBurst
			case "kube-api-content-type":
				file.KubeAPIContentType = cfg.KubeAPIContentType
			case "token-max-age":
				file.TokenMaxAge = cfg.TokenMaxAge
			}
		})
		if file.ListenAddress == "" {
			file.ListenAddress = cfg.ListenAddress
		}
		cfg = file
	}
	for _, s := range nodes {
		n, err := ParseNode(s)
		if err != nil {
			_, _ = fmt.Fprintf(stderr, "podsync-vk: %v\n", err)
			return 2
		}
		cfg.Nodes = append(cfg.Nodes, n)
	}
	if err := cfg.Validate(); err != nil {
		_, _ = fmt.Fprintf(stderr, "podsync-vk: %v\n", err)
		return 2
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(stderr), zap.InfoLevel))
	defer func() { _ = log.Sync() }()
	vklog.L = newNodeLibraryLogger(log)
	// Spans over OTLP when the OTEL_* environment asks for them; the
	// node library's spans (its pod controller's) are otel's then, and
	// every call to podsyncd carries its trace context either way.
	tp, err := tracing.Setup(ctx, "podsync-vk", "")
	if err != nil {
		log.Error("podsync-vk tracing", zap.Error(err))
		return 1
	}
	if tp.Exporting() {
		vktrace.T = opentelemetry.Adapter{}
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}()
	if err := Run(ctx, cfg, log); err != nil {
		log.Error("podsync-vk stopped", zap.Error(err))
		return 1
	}
	return 0
}
