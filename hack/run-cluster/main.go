package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localkube"
)

func main() { os.Exit(run()) }

type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

func start(dir, name, bin string, args ...string) (*child, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: ^C reaches this program, which stops them in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(c.done) }()
	return c, nil
}

func say(format string, args ...any) { _, _ = fmt.Fprintf(os.Stdout, "==> "+format+"\n", args...) }

func run() int {
	once := flag.Bool("once", false, "start everything, check the Nodes are Ready, clean up and exit")
	nodes := flag.Int("nodes", 2, "how many podsync nodes (each a podsyncd on its own containerd) podsync-vk serves")
	flag.Parse()
	if *nodes < 1 || *nodes > 26 {
		_, _ = fmt.Fprintf(os.Stderr, "run-cluster: --nodes %d: want 1 to 26\n", *nodes)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var children []*child
	var insts []*localcri.Instance
	var cluster *localkube.Cluster
	err := func() error {
		if os.Geteuid() != 0 {
			return errors.New("make run-cluster needs root (it starts containerd and pods): run it as root")
		}
		repo, err := localcri.RepoDir()
		if err != nil {
			return err
		}
		dir := filepath.Join(repo, ".tmp", "run-cluster")
		_ = os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		bin := filepath.Join(repo, ".tmp", "bin")
		say("building podsyncd and podsync-vk into .tmp/bin, and the Kubernetes binaries into .tmp/kube (the first time: 15-30 minutes)")
		for _, c := range []string{"podsyncd", "podsync-vk"} {
			cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, c), "./cmd/"+c)
			cmd.Dir = repo
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go build ./cmd/%s: %w\n%s", c, err, out)
			}
		}
		kubeBin, err := localkube.Build(ctx, repo, os.Stderr)
		if err != nil {
			return err
		}
		say("starting etcd, kube-apiserver, kube-scheduler and kube-controller-manager %s", localkube.Version)
		if cluster, err = localkube.Start(ctx, localkube.Options{Dir: filepath.Join(dir, "kube"), BinDir: kubeBin, NodeMonitorGracePeriod: 20 * time.Second}); err != nil {
			return err
		}
		log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.WarnLevel))
		vkArgs := []string{"--kubeconfig", cluster.Kubeconfig, "--client-ca-file", cluster.CAFile()}
		for i := range *nodes {
			name := "podsync-" + string(rune('a'+i))
			say("starting node %s: a private containerd and podsyncd", name)
			inst, err := localcri.Start(ctx, localcri.Options{Logger: log, RepoDir: repo, LogDir: dir})
			if err != nil {
				return fmt.Errorf("start containerd: %w", err)
			}
			insts = append(insts, inst)
			nd := filepath.Join(dir, name)
			if err := os.MkdirAll(nd, 0o700); err != nil {
				return err
			}
			sock := filepath.Join(nd, "podsync.sock")
			d, err := start(dir, name, filepath.Join(bin, "podsyncd"), "--listen", "unix://"+sock,
				"--runtime-endpoint", inst.Endpoint(), "--root-dir", filepath.Join(nd, "root"),
				"--pod-log-dir", filepath.Join(nd, "pods"), "--node-name", name, "--node-ip", "127.0.0.1",
				// Each node's pods under its instance's own cgroup root:
				// the nodes' default/web are one pod UID, and would be one
				// pod cgroup under a shared root.
				"--cgroup-root", inst.CgroupRoot(),
				"--log-format", "console", "--shutdown-timeout", "10s")
			if err != nil {
				return err
			}
			children = append(children, d)
			ports, err := localcri.FreePorts(1)
			if err != nil {
				return err
			}
			port := ports[0]
			vkArgs = append(vkArgs, "--node", "name="+name+",target="+sock+",port="+strconv.Itoa(port))
		}
		say("starting podsync-vk (log: .tmp/run-cluster/podsync-vk.log)")
		v, err := start(dir, "podsync-vk", filepath.Join(bin, "podsync-vk"), vkArgs...)
		if err != nil {
			return err
		}
		children = append(children, v)
		kubectl := filepath.Join(kubeBin, "kubectl")
		deadline := time.Now().Add(2 * time.Minute)
		for {
			out, _ := exec.CommandContext(ctx, kubectl, "--kubeconfig", cluster.Kubeconfig, "get", "nodes", "--no-headers").CombinedOutput()
			if strings.Count(string(out), " Ready ") == *nodes {
				_, _ = os.Stdout.Write(out)
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("the %d podsync Nodes are not Ready within 2 minutes: %s (logs in %s)", *nodes, out, dir)
			}
			time.Sleep(time.Second)
		}
		say("ready. In another shell:")
		_, _ = fmt.Fprintf(os.Stdout, "export KUBECONFIG=%s\nexport PATH=%s:$PATH\nkubectl get nodes -o wide\nkubectl create deployment web --image=%s --replicas=4 -- sleep 3600\nkubectl get pods -o wide\n",
			cluster.Kubeconfig, kubeBin, localcri.BusyboxImage)
		if !*once {
			say("press ^C to stop podsync-vk, the nodes and the control plane and clean up")
			<-ctx.Done()
		}
		return nil
	}()
	say("cleaning up")
	var errs []error
	errs = append(errs, err)
	for i := len(children) - 1; i >= 0; i-- {
		children[i].stop()
	}
	for _, inst := range insts {
		tctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		errs = append(errs, inst.Teardown(tctx))
		cancel()
	}
	if cluster != nil {
		errs = append(errs, cluster.Stop())
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "run-cluster: %v\n", err)
		return 1
	}
	say("done: everything stopped; logs in .tmp/run-cluster")
	return 0
}
