package vk

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime"
)

// Config is podsync-vk's configuration: flags, or the same keys in a YAML
// file (--config); a flag given on the command line wins over the file.
type Config struct {
	// Kubeconfig is the kubeconfig podsync-vk uses; empty means
	// $KUBECONFIG, then in-cluster.
	Kubeconfig string `yaml:"kubeconfig"`
	// ListenAddress is the IP the kubelet API of every node listens on,
	// and the InternalIP each Node reports.
	ListenAddress string `yaml:"listenAddress"`
	// ClientCAFile verifies client certificates on the kubelet API (the
	// API server's --kubelet-client-certificate); bearer tokens are
	// checked with TokenReview whether or not it is set.
	ClientCAFile string `yaml:"clientCAFile"`
	// PodSyncWorkers is how many pods of each node the node library
	// creates, updates or deletes at once (DefaultPodSyncWorkers when
	// 0). A deletion holds its worker for the pod's grace period, as
	// DeletePod waits for the containers to stop, so few workers make a
	// large delete slow.
	PodSyncWorkers int `yaml:"podSyncWorkers"`
	// LeaseTTL is the ttl of the podsync lease podsync-vk takes of each
	// node it serves (DefaultLeaseTTL when 0), renewed every third of it:
	// a standby podsync-vk takes a node over once the lease expires, and
	// the calls of the one it replaced are refused from then on.
	LeaseTTL time.Duration `yaml:"leaseTTL"`
	// KubeAPIQPS and KubeAPIBurst are the API server requests per second
	// and the burst each node served may use, as the kubelet's
	// --kube-api-qps and --kube-api-burst (DefaultKubeAPIQPS and
	// DefaultKubeAPIBurst when 0): the one client podsync-vk shares
	// between its nodes gets them times the number of nodes.
	KubeAPIQPS   float32 `yaml:"kubeAPIQPS"`
	KubeAPIBurst int     `yaml:"kubeAPIBurst"`
	// KubeAPIContentType is the content type of the requests to the API
	// server, as the kubelet's --kube-api-content-type
	// (DefaultKubeAPIContentType when empty). With protobuf, responses
	// are asked for in protobuf, then JSON, as the kubelet asks.
	KubeAPIContentType string `yaml:"kubeAPIContentType"`
	// TokenMaxAge is the age at which a pod's service-account token is
	// renewed whatever its lifetime: 0 is the kubelet's 24 hours
	// (provider.DefaultTokenMaxAge). A token is renewed at 80 % of its
	// lifetime before that; the API server's shortest is 10 minutes, so
	// tests give a few seconds here to see a rotation in their time. Not
	// for production: the API server would mint a token per pod that
	// often.
	TokenMaxAge time.Duration `yaml:"tokenMaxAge"`
	// Nodes are the podsync nodes served.
	Nodes []NodeConfig `yaml:"nodes"`
}

// DefaultKubeAPIQPS and DefaultKubeAPIBurst are the kubelet's defaults
// (KubeletConfiguration kubeAPIQPS, kubeAPIBurst), per node: client-go's
// own (5 and 10) held pod status updates back by seconds once a few dozen
// pods started at once (make bench-scale).
const (
	DefaultKubeAPIQPS   = 50
	DefaultKubeAPIBurst = 100
)

// DefaultKubeAPIContentType is the kubelet's (KubeletConfiguration
// contentType): the pods, their statuses and events podsync-vk reads
// and writes cost less to encode and decode in protobuf than in JSON,
// client-go's default.
const DefaultKubeAPIContentType = runtime.ContentTypeProtobuf

// DefaultPodSyncWorkers is Config.PodSyncWorkers' default: a deletion of
// that many pods of a node, each waiting out its grace period, runs at
// once, as a kubelet's pod workers do.
const DefaultPodSyncWorkers = 32

// DefaultLeaseTTL is Config.LeaseTTL's default.
const DefaultLeaseTTL = 15 * time.Second

// NodeConfig is one podsync node.
type NodeConfig struct {
	// Name is the Kubernetes Node's name; empty means podsyncd's
	// --node-name.
	Name string `yaml:"name"`
	// Target is podsyncd's address: a unix socket path or unix:// URL,
	// or host:port (mutual TLS with Cert, Key and CA).
	Target string `yaml:"target"`
	// Cert, Key and CA are the client certificate, its key and the CA
	// of podsyncd's serving certificate, for a TCP target.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	CA   string `yaml:"ca"`
	// Port is the node's kubelet API port; each node needs its own.
	Port int `yaml:"port"`
	// TLSCert and TLSKey are the kubelet API's serving certificate; empty
	// means a self-signed one made at start.
	TLSCert string `yaml:"tlsCert"`
	TLSKey  string `yaml:"tlsKey"`
}

// ParseNode parses a --node value: comma-separated key=value pairs with
// the NodeConfig keys (target and port required), such as
// "name=n1,target=/run/podsync/podsync.sock,port=10250".
func ParseNode(s string) (NodeConfig, error) {
	var n NodeConfig
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return n, fmt.Errorf("--node %q: %q is not key=value", s, kv)
		}
		switch k {
		case "name":
			n.Name = v
		case "target":
			n.Target = v
		case "cert":
			n.Cert = v
		case "key":
			n.Key = v
		case "ca":
			n.CA = v
		case "tlsCert":
			n.TLSCert = v
		case "tlsKey":
			n.TLSKey = v
		case "port":
			p, err := strconv.Atoi(v)
			if err != nil {
				return n, fmt.Errorf("--node %q: port %q is not a number", s, v)
			}
			n.Port = p
		default:
			return n, fmt.Errorf("--node %q: unknown key %q (want name, target, port, cert, key, ca, tlsCert, tlsKey)", s, k)
		}
	}
	return n, nil
}

// LoadFile reads a config file over c.
func (c *Config) LoadFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// Validate says everything wrong with c at once.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Nodes) == 0 {
		errs = append(errs, errors.New("no podsync node: give --node (or nodes: in --config)"))
	}
	if c.LeaseTTL != 0 && (c.LeaseTTL < time.Second || c.LeaseTTL > time.Hour) {
		errs = append(errs, fmt.Errorf("--lease-ttl %s: give 1s to 1h", c.LeaseTTL))
	}
	if c.TokenMaxAge != 0 && (c.TokenMaxAge < 4*time.Second || c.TokenMaxAge > 24*time.Hour) {
		errs = append(errs, fmt.Errorf("--token-max-age %s: give 4s to 24h", c.TokenMaxAge))
	}
	if c.PodSyncWorkers < 0 {
		errs = append(errs, fmt.Errorf("--pod-sync-workers %d: give 1 or more (0: %d)", c.PodSyncWorkers, DefaultPodSyncWorkers))
	}
	switch c.KubeAPIContentType {
	case "", runtime.ContentTypeProtobuf, runtime.ContentTypeJSON:
	default:
		errs = append(errs, fmt.Errorf("--kube-api-content-type %q: give %s or %s", c.KubeAPIContentType,
			runtime.ContentTypeProtobuf, runtime.ContentTypeJSON))
	}
	ports := map[int]bool{}
	for i, n := range c.Nodes {
		if n.Target == "" {
			errs = append(errs, fmt.Errorf("node %d: no target: give the podsyncd socket or host:port", i+1))
		}
		if n.Port <= 0 || n.Port > 65535 {
			errs = append(errs, fmt.Errorf("node %d: port %d: give the kubelet API port, 1-65535", i+1, n.Port))
		} else if ports[n.Port] {
			errs = append(errs, fmt.Errorf("node %d: port %d is another node's: each node needs its own", i+1, n.Port))
		}
		ports[n.Port] = true
		if (n.TLSCert == "") != (n.TLSKey == "") {
			errs = append(errs, fmt.Errorf("node %d: give tlsCert and tlsKey together", i+1))
		}
	}
	return errors.Join(errs...)
}
