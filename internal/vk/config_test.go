package vk

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
)

func TestParseNode(t *testing.T) {
	got, err := ParseNode("name=a,target=/run/p.sock,port=10250,cert=c.pem,key=k.pem,ca=ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	want := NodeConfig{Name: "a", Target: "/run/p.sock", Port: 10250, Cert: "c.pem", Key: "k.pem", CA: "ca.pem"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseNode (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"name", "port=x,target=s", "colour=red,target=s"} {
		if _, err := ParseNode(bad); err == nil {
			t.Errorf("ParseNode(%q): nil error", bad)
		}
	}
}

func TestValidateSaysEverythingAtOnce(t *testing.T) {
	c := Config{Nodes: []NodeConfig{{Port: 10250}, {Target: "s", Port: 10250, TLSCert: "x"}}}
	err := c.Validate()
	if err == nil {
		t.Fatal("nil error")
	}
	for _, want := range []string{"node 1: no target", "node 2: port 10250 is another node's", "node 2: give tlsCert and tlsKey together"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := (&Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "no podsync node") {
		t.Errorf("empty config: %v", err)
	}
	neg := Config{PodSyncWorkers: -1, Nodes: []NodeConfig{{Target: "s", Port: 1}}}
	if err := neg.Validate(); err == nil || !strings.Contains(err.Error(), "--pod-sync-workers -1") {
		t.Errorf("negative pod sync workers: %v", err)
	}
	for _, age := range []time.Duration{time.Second, 48 * time.Hour} {
		c := Config{TokenMaxAge: age, Nodes: []NodeConfig{{Target: "s", Port: 1}}}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--token-max-age "+age.String()+": give 4s to 24h") {
			t.Errorf("token max age %s: %v", age, err)
		}
	}
	if err := (&Config{TokenMaxAge: 20 * time.Second, Nodes: []NodeConfig{{Target: "s", Port: 1}}}).Validate(); err != nil {
		t.Errorf("token max age 20s: %v", err)
	}
}

func TestConfigFileAndFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vk.yaml")
	if err := os.WriteFile(path, []byte("kubeconfig: /file/kubeconfig\npodSyncWorkers: 8\nnodes:\n- {name: a, target: /a.sock, port: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var c Config
	if err := c.LoadFile(path); err != nil {
		t.Fatal(err)
	}
	if c.Kubeconfig != "/file/kubeconfig" || c.PodSyncWorkers != 8 || len(c.Nodes) != 1 || c.Nodes[0].Target != "/a.sock" {
		t.Errorf("loaded %+v", c)
	}
	if err := os.WriteFile(path, []byte("kubeconfg: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadFile(path); err == nil {
		t.Error("a misspelt key: nil error")
	}
	var stderr bytes.Buffer
	if code := Main(context.Background(), []string{"--node", "name=a"}, &stderr); code != 2 {
		t.Errorf("Main with a bad --node = %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), "no target") && !strings.Contains(stderr.String(), "not key=value") {
		t.Errorf("stderr = %q", stderr.String())
	}
}

// TestClientLimitsAreTheKubeletsPerNode: the client podsync-vk shares
// between its nodes gets the kubelet's QPS and burst for each of them,
// not client-go's 5 and 10.
func TestClientLimitsAreTheKubeletsPerNode(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		qps   float32
		burst int
	}{
		{Config{}, 50, 100},
		{Config{Nodes: make([]NodeConfig, 3)}, 150, 300},
		{Config{KubeAPIQPS: 10, KubeAPIBurst: 20, Nodes: make([]NodeConfig, 2)}, 20, 40},
	} {
		qps, burst := clientLimits(tc.cfg)
		if qps != tc.qps || burst != tc.burst {
			t.Errorf("clientLimits(%d nodes, qps %v, burst %d) = %v, %d; want %v, %d",
				len(tc.cfg.Nodes), tc.cfg.KubeAPIQPS, tc.cfg.KubeAPIBurst, qps, burst, tc.qps, tc.burst)
		}
	}
}

// TestClientContentTypeIsTheKubelets: podsync-vk's client speaks protobuf
// and accepts protobuf, then JSON, as the kubelet's; JSON when asked.
func TestClientContentTypeIsTheKubelets(t *testing.T) {
	for _, tc := range []struct {
		contentType, wantType, wantAccept string
	}{
		{"", "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"},
		{"application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"},
		{"application/json", "application/json", ""},
	} {
		rc := &rest.Config{}
		setContentType(rc, tc.contentType)
		if rc.ContentType != tc.wantType || rc.AcceptContentTypes != tc.wantAccept {
			t.Errorf("setContentType(%q): content type %q, accept %q; want %q, %q", tc.contentType,
				rc.ContentType, rc.AcceptContentTypes, tc.wantType, tc.wantAccept)
		}
	}
	bad := Config{KubeAPIContentType: "application/yaml", Nodes: []NodeConfig{{Target: "/run/p.sock", Port: 10250}}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "--kube-api-content-type") {
		t.Errorf("Validate with application/yaml = %v; want an error naming --kube-api-content-type", err)
	}
}
