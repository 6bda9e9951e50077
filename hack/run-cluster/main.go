package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/podsync/podsync/internal/testing/localcluster"
	"github.com/podsync/podsync/internal/testing/localcri"
	"github.com/podsync/podsync/internal/testing/localkube"
)

func main() { os.Exit(run()) }

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
	var cluster *localcluster.Cluster
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
		say("building podsyncd and podsync-vk into .tmp/bin, and the Kubernetes binaries into .tmp/kube (the first time: 15-30 minutes)")
		kubeBin, err := localkube.BuildBinaries(ctx, repo, os.Stderr, append(localkube.Binaries, "metrics-server")...)
		if err != nil {
			return err
		}
		log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.WarnLevel))
		cluster, err = localcluster.Start(ctx, localcluster.Options{Dir: dir, RepoDir: repo, BinDir: filepath.Join(repo, ".tmp", "bin"),
			KubeBin: kubeBin, Nodes: *nodes, Logger: log, Say: say, MetricsServer: filepath.Join(kubeBin, "metrics-server")})
		if err != nil {
			return err
		}
		out, _ := cluster.Kubectl(ctx, "get", "nodes", "--no-headers")
		_, _ = os.Stdout.Write(out)
		say("ready. In another shell:")
		_, _ = fmt.Fprintf(os.Stdout, "export KUBECONFIG=%s\nexport PATH=%s:$PATH\nkubectl get nodes -o wide\nkubectl create deployment web --image=%s --replicas=4 -- sleep 3600\nkubectl get pods -o wide\nkubectl top pods   # after metrics-server's first scrapes (%s apart)\n",
			cluster.Kube.Kubeconfig, kubeBin, localcri.BusyboxImage, localcluster.MetricsResolution)
		if !*once {
			say("press ^C to stop podsync-vk, the nodes and the control plane and clean up")
			<-ctx.Done()
		}
		return nil
	}()
	say("cleaning up")
	errs := []error{err}
	if cluster != nil {
		errs = append(errs, cluster.Stop(context.Background()))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(os.Stderr, "run-cluster: %v\n", err)
		return 1
	}
	say("done: everything stopped; logs in .tmp/run-cluster")
	return 0
}
