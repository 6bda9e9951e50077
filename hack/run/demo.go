package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// demo runs the examples.
func (r *runner) demo(ctx context.Context) error {
	r.say("running the examples (podsyncctl is .tmp/bin/podsyncctl with PODSYNC_ADDRESS=%s)", r.address())
	steps := [][]string{
		{"run", "--wait-for", "ready", "--timeout", "2m", "-f", "examples/web.yaml", "-f", "examples/init-sidecar.yaml", "-f", "examples/config.yaml"},
		{"run", "--wait-for", "succeeded", "--timeout", "2m", "-f", "examples/job.yaml"},
		{"sync", "-f", "examples/crashloop.yaml"},
	}
	for _, args := range steps {
		if err := r.podsyncctl(ctx, true, args...); err != nil {
			return err
		}
	}
	r.printf("\n")
	r.say("waiting for crashloop to crash twice and back off (its container exits 1 after 2 s)")
	if err := r.waitCrashLoop(ctx); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"get", "crashloop"},
		{"plan", "-f", "examples/crashloop.yaml"},
		{"logs", "crashloop", "--previous"},
		{"logs", "job"},
		{"logs", "config"},
	} {
		if err := r.podsyncctl(ctx, true, args...); err != nil {
			return err
		}
	}
	if err := r.getWeb(ctx); err != nil {
		return err
	}
	return r.podsyncctl(ctx, true, "ls", "-o", "wide")
}

// waitCrashLoop waits until the crashloop pod's container waits in
// CrashLoopBackOff.
func (r *runner) waitCrashLoop(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := r.api.GetPod(ctx, "default", "crashloop")
		if err == nil {
			for _, cs := range resp.GetPod().GetStatus().GetContainerStatuses() {
				if cs.GetState().GetWaiting().GetReason() == "CrashLoopBackOff" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crashloop did not reach CrashLoopBackOff: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// getWeb fetches the web example's page through its host port.
func (r *runner) getWeb(ctx context.Context) error {
	// The host port, from the node itself (the private pod network has no
	// route to the node's other addresses).
	url := "http://127.0.0.1:8080/"
	line := "$ wget -qO- " + url
	if r.tty {
		line = "\x1b[36m" + line + "\x1b[0m"
	}
	r.printf("\n%s\n", line)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("web's host port: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(res.Body, 4096))
	if err != nil {
		return fmt.Errorf("web's host port: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("web's host port: GET %s: %s", url, res.Status)
	}
	_, err = r.out.Write(body)
	return err
}

// nextSteps prints the commands to try.
func (r *runner) nextSteps() {
	ctl := "podsyncctl"
	rel, err := filepath.Rel(mustGetwd(), r.ctl())
	if err == nil && !strings.HasPrefix(rel, "..") {
		ctl = "./" + rel
	}
	sock := strings.TrimPrefix(r.address(), "unix://")
	r.printf(`
podsync is running: podsyncd on %[1]s, containerd on %[3]s.
Try, in another terminal (as root):

  %[2]s --address %[1]s ls -o wide
  export PODSYNC_ADDRESS=%[1]s PATH=%[4]s:$PATH
  podsyncctl logs init-sidecar -c log-shipper -f          # ^C to stop following
  podsyncctl watch                                        # status changes and events, as they happen
  podsyncctl get web -o yaml
  podsyncctl plan -f examples/web.yaml                    # edit it first: the plan names what changed
  podsyncctl sync -f examples/web.yaml
  podsyncctl delete crashloop
  podsyncctl delete job && podsyncctl run -f examples/job.yaml --wait-for succeeded
%[5]s
Logs: .tmp/run/podsyncd.log (podsyncd), %[6]s (containerd).
`, r.address(), ctl, r.inst.Endpoint(), r.bin, toolHints(r.bin, sock, r.inst.CrictlHint()), relOrAbs(r.inst.LogPath()))
}

// toolHints are the lines of the hints that use grpcurl and crictl
// (crictl is the instance's crictl command line), each only when the tool
// is in bin (make run installs both): a hint that names a command the
// machine lacks is no hint.
func toolHints(bin, sock, crictl string) string {
	var b strings.Builder
	if fileExists(filepath.Join(bin, "grpcurl")) {
		fmt.Fprintf(&b, "\n  grpcurl -unix -plaintext %[1]s list podsync.v1.PodSyncService\n"+
			"  grpcurl -unix -plaintext -d '{\"name\": \"web\"}' %[1]s podsync.v1.PodSyncService/GetPod\n", sock)
	}
	if fileExists(filepath.Join(bin, "crictl")) {
		if b.Len() == 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "  %s pods\n", crictl)
	}
	return b.String()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func mustGetwd() string {
	wd, err := os.Getwd()
	if err != nil {
		return "/"
	}
	return wd
}

func relOrAbs(p string) string {
	if rel, err := filepath.Rel(mustGetwd(), p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}
