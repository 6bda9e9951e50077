//go:build integration

package cluster_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsync/podsync/internal/testing/localcri"
)

// TestWhatAClusterUserDoes is issue 36's acceptance on a real control
// plane: a cluster user's everyday things on podsync nodes, as on a
// kubelet's: a Job, a crash loop's events, an in-cluster client, a
// prompt delete, a pod waiting for a ConfigMap key, and kubectl debug (-i, -it on a terminal, kubectl attach
// to a debug container, and a debug container the node refuses).
func TestWhatAClusterUserDoes(t *testing.T) {
	u := startClusterUser(t)

	t.Run("a Job of three completions completes", func(t *testing.T) {
		u.t = t
		u.apply(`apiVersion: batch/v1
kind: Job
metadata: {name: pi, namespace: default}
spec:
  completions: 3
  parallelism: 2
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers:
      - name: pi
        image: ` + localcri.BusyboxImage + `
        command: ["sh", "-c", "echo 3.14159"]
`)
		u.kubectl("wait", "--for=condition=Complete", "job/pi", "--timeout=180s")
		if got := u.kubectl("get", "job", "pi", "-o", "jsonpath={.status.succeeded}"); got != "3" {
			t.Errorf("succeeded = %q, want 3", got)
		}
		if out := u.kubectl("logs", "job/pi"); !strings.Contains(out, "3.14159") {
			t.Errorf("kubectl logs job/pi = %q", out)
		}
	})

	t.Run("a crash-looping pod shows the kubelet's events", func(t *testing.T) {
		u.t = t
		u.apply(`apiVersion: v1
kind: Pod
metadata: {name: crasher, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: ` + localcri.BusyboxImage + `
    command: ["sh", "-c", "exit 3"]
`)
		want := []string{"Pulled", "Created", "Started", "BackOff"}
		u.eventually(2*time.Minute, "the crash loop's events", func() (bool, string) {
			out := u.kubectl("get", "events", "--field-selector", "involvedObject.name=crasher", "-o", "json")
			var list corev1.EventList
			if err := json.Unmarshal([]byte(out), &list); err != nil {
				return false, err.Error()
			}
			seen := map[string]corev1.Event{}
			for _, e := range list.Items {
				seen[e.Reason] = e
			}
			for _, r := range want {
				e, ok := seen[r]
				if !ok {
					return false, fmt.Sprintf("no %s event yet in %v", r, reasons(list.Items))
				}
				if e.Source.Component != "kubelet" || e.InvolvedObject.FieldPath != "spec.containers{c}" {
					return false, fmt.Sprintf("%s event from %q on %q, want the kubelet's on spec.containers{c}", r, e.Source.Component, e.InvolvedObject.FieldPath)
				}
			}
			return true, ""
		})
		if out := u.kubectl("describe", "pod", "crasher"); !strings.Contains(out, "Back-off restarting failed container") {
			t.Errorf("kubectl describe pod shows no back-off:\n%s", out)
		}
	})

	t.Run("kubectl debug attaches a shell and the pod keeps running", func(t *testing.T) {
		u.t = t
		u.sleeper("target")
		// kubectl debug's default profile, general: the nodes allow its
		// SYS_PTRACE (localcluster.NodeArgs), as a kubelet's node in the
		// default namespace. The output is computed, so an echo of the
		// input cannot pass for it.
		start := time.Now()
		out, err := u.session("echo debugging $(hostname) $((6*7))", "debugging target 42",
			"debug", "-i", "target", "--image="+localcri.BusyboxImage, "--target=app", "--container=debugger", "--", "sh")
		if err != nil || !strings.Contains(out, "debugging target 42") {
			t.Fatalf("kubectl debug -i: %v\n%s\ndebugger's status: %+v", err, out, ephemeralStatus(u.pod("target"), "debugger"))
		}
		t.Logf("kubectl debug -i returned the shell's output after %s", time.Since(start).Round(time.Millisecond))
		// As kubectl warns, the session is in the container's log.
		if out := u.kubectl("logs", "target", "-c", "debugger"); !strings.Contains(out, "debugging target 42") {
			t.Errorf("kubectl logs target -c debugger = %q, want the session's output", out)
		}

		// -it, on a terminal as in a user's shell.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		term := startOnTerminal(t, u.kubectlCmd(ctx, "debug", "-it", "target", "--image="+localcri.BusyboxImage, "--container=debugtty", "--", "sh"))
		if !term.typeUntil("echo tty-$((6*7))", "tty-42", time.Minute) {
			t.Fatalf("kubectl debug -it: no shell output on the terminal:\n%q\ndebugtty's status: %+v", term.out.String(), ephemeralStatus(u.pod("target"), "debugtty"))
		}
		if _, err := term.ptm.WriteString("exit\r"); err != nil {
			t.Fatal(err)
		}
		if err := term.wait(time.Minute); err != nil {
			t.Fatalf("kubectl debug -it after exit: %v\n%q", err, term.out.String())
		}

		// kubectl attach to a debug container started without attaching.
		u.kubectl("debug", "-i", "--attach=false", "target", "--image="+localcri.BusyboxImage, "--container=attached", "--", "sh")
		u.eventually(time.Minute, "the debug container attached runs", func() (bool, string) {
			st := ephemeralStatus(u.pod("target"), "attached")
			return st != nil && st.State.Running != nil, fmt.Sprintf("%+v", st)
		})
		out, err = u.session("echo attached $((6*7))", "attached 42", "attach", "-i", "target", "-c", "attached")
		if err != nil || !strings.Contains(out, "attached 42") {
			t.Fatalf("kubectl attach -i to a debug container: %v\n%s", err, out)
		}

		// The debug containers have ended with their shells; the pod runs
		// on, its container never restarted.
		u.eventually(time.Minute, "the debug containers terminated, with exit code 0", func() (bool, string) {
			p := u.pod("target")
			for _, name := range []string{"debugger", "debugtty", "attached"} {
				st := ephemeralStatus(p, name)
				if st == nil || st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
					return false, fmt.Sprintf("%s: %+v", name, st)
				}
			}
			return true, ""
		})
		u.stillRunning("target")
	})

	t.Run("a debug container the node refuses is reported, not waited for silently", func(t *testing.T) {
		u.t = t
		u.sleeper("target2")
		// The netadmin profile adds NET_ADMIN and NET_RAW: the API server
		// lets them through in the default namespace (privileged), the
		// node's Pod Security ceiling, baseline, does not.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := u.kubectlCmd(ctx, "debug", "-i", "target2", "--image="+localcri.BusyboxImage, "--container=netdebug", "--profile=netadmin", "--", "sh")
		var out lockedBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Stdin = strings.NewReader("echo should not run\nexit\n")
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// kubectl debug prints a waiting debug container's message as a
		// warning (and, as on a kubelet's node, waits on until ^C).
		u.eventually(time.Minute, "kubectl debug reports the refusal", func() (bool, string) {
			s := out.String()
			return strings.Contains(s, "container netdebug:") && strings.Contains(s, "PodSecurity") && strings.Contains(s, "NET_ADMIN"), s
		})
		t.Logf("kubectl debug reported the refusal after %s", time.Since(start).Round(time.Millisecond))
		cancel()
		_ = cmd.Wait()
		if strings.Contains(out.String(), "should not run") {
			t.Errorf("kubectl debug ran the refused container's input:\n%s", out.String())
		}

		p := u.stillRunning("target2")
		st := ephemeralStatus(p, "netdebug")
		if st == nil || st.State.Waiting == nil || st.State.Waiting.Reason != "PodSecurity" || !strings.Contains(st.State.Waiting.Message, "NET_ADMIN") {
			t.Errorf("netdebug's status = %+v, want waiting with podsync's reason PodSecurity and a message naming NET_ADMIN", st)
		}
		events := u.kubectl("get", "events", "--field-selector", "involvedObject.name=target2,reason=Failed", "-o", "json")
		var list corev1.EventList
		if err := json.Unmarshal([]byte(events), &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 || list.Items[0].Type != corev1.EventTypeWarning || list.Items[0].InvolvedObject.FieldPath != "spec.ephemeralContainers{netdebug}" ||
			list.Items[0].Source.Component != "kubelet" || !strings.Contains(list.Items[0].Message, "NET_ADMIN") {
			t.Errorf("Failed events of target2 = %+v, want one Warning from the kubelet on spec.ephemeralContainers{netdebug} naming NET_ADMIN", list.Items)
		}
		if out := u.kubectl("describe", "pod", "target2"); !strings.Contains(out, "PodSecurity") {
			t.Errorf("kubectl describe pod target2 does not show the refusal:\n%s", out)
		}
	})

	t.Run("an in-cluster client lists pods with its token", func(t *testing.T) {
		u.t = t
		u.apply(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: default-view, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: ServiceAccount, name: default, namespace: default}]
---
apiVersion: v1
kind: Pod
metadata: {name: incluster, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: ` + inClusterImage + `
`)
		u.eventually(2*time.Minute, "the in-cluster client lists pods", func() (bool, string) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			out, err := u.c.Kubectl(ctx, "logs", "incluster", "--tail=1")
			return err == nil && strings.HasPrefix(string(out), "pods "), string(out)
		})
		// The token is the pod's: bound to it, for its service account.
		claims, err := jwtClaims(u.kubectl("exec", "incluster", "--", "/incluster", "token"))
		if err != nil {
			t.Fatal(err)
		}
		k8s, _ := claims["kubernetes.io"].(map[string]any)
		pod, _ := k8s["pod"].(map[string]any)
		sa, _ := k8s["serviceaccount"].(map[string]any)
		if p := u.pod("incluster"); pod["name"] != "incluster" || pod["uid"] != string(p.UID) || sa["name"] != "default" {
			t.Errorf("token claims %v: want bound to pod incluster (%s) of service account default", k8s, p.UID)
		}

		// The token is rotated in the running pod, as the kubelet's
		// token manager rotates it (at tokenMaxAge here): the file in
		// the volume changes, the container is not restarted, and the
		// client lists pods with the new token.
		first := strings.TrimSpace(u.kubectl("exec", "incluster", "--", "/incluster", "token"))
		var second string
		u.eventually(3*tokenMaxAge, "the token file rotated", func() (bool, string) {
			second = strings.TrimSpace(u.kubectl("exec", "incluster", "--", "/incluster", "token"))
			return second != first, "the token file has the same token"
		})
		renewed, err := jwtClaims(second)
		if err != nil {
			t.Fatal(err)
		}
		iat0, _ := claims["iat"].(float64)
		iat1, _ := renewed["iat"].(float64)
		exp0, _ := claims["exp"].(float64)
		exp1, _ := renewed["exp"].(float64)
		t.Logf("token rotated: iat %.0f exp %.0f, then iat %.0f exp %.0f", iat0, exp0, iat1, exp1)
		k8s1, _ := renewed["kubernetes.io"].(map[string]any)
		pod1, _ := k8s1["pod"].(map[string]any)
		if iat1 <= iat0 || pod1["uid"] != pod["uid"] {
			t.Errorf("renewed token claims %v (iat %v), want issued after %v for the same pod", k8s1, iat1, iat0)
		}
		digest := fmt.Sprintf("%.12x", sha256.Sum256([]byte(second)))
		u.eventually(time.Minute, "the client lists pods with the new token", func() (bool, string) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			out, err := u.c.Kubectl(ctx, "logs", "incluster", "--tail=3")
			return err == nil && strings.Contains(string(out), "token "+digest), string(out)
		})
		// Once it listed pods (the RoleBinding may come after its first
		// tries), every try listed them: no error around the rotation.
		logs := u.kubectl("logs", "incluster")
		if i := strings.Index(logs, "pods "); i < 0 || strings.Contains(logs[i:], "error:") {
			t.Errorf("the client failed after it first listed pods:\n%s", logs)
		}
		if p := u.pod("incluster"); len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("container statuses %+v, want the container never restarted", p.Status.ContainerStatuses)
		}
	})

	t.Run("a non-root pod with fsGroup reads its 0440 Secret", func(t *testing.T) {
		u.t = t
		u.apply(`apiVersion: v1
kind: Secret
metadata: {name: fsgroup-secret, namespace: default}
stringData: {key: s3cret}
---
apiVersion: v1
kind: Pod
metadata: {name: fsgroup, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 1000, runAsNonRoot: true, fsGroup: 2000}
  containers:
  - name: c
    image: ` + localcri.BusyboxImage + `
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    volumeMounts: [{name: s, mountPath: /etc/secret, readOnly: true}]
  volumes:
  - name: s
    secret: {secretName: fsgroup-secret, defaultMode: 288} # 0440
`)
		u.kubectl("wait", "--for=condition=Ready", "pod/fsgroup", "--timeout=120s")
		if out := u.kubectl("exec", "fsgroup", "--", "cat", "/etc/secret/key"); out != "s3cret" {
			t.Errorf("the non-root container read %q from its Secret, want s3cret", out)
		}
		// Owned by the fsGroup, mode 0440, as the kubelet's
		// SetVolumeOwnership leaves a read-only volume's files; the
		// container runs as 1000 with 2000 among its groups.
		if out := strings.TrimSpace(u.kubectl("exec", "fsgroup", "--", "stat", "-L", "-c", "%a %g", "/etc/secret/key")); out != "440 2000" {
			t.Errorf("the Secret's file is %q (mode group), want 440 2000", out)
		}
		if out := strings.TrimSpace(u.kubectl("exec", "fsgroup", "--", "id")); !strings.HasPrefix(out, "uid=1000 ") || !strings.Contains(out, "2000") {
			t.Errorf("id = %q, want uid 1000 with group 2000", out)
		}
	})

	t.Run("kubectl get nodes -o wide shows the OS image, kernel and runtime", func(t *testing.T) {
		u.t = t
		osRelease, err := os.ReadFile("/etc/os-release")
		if err != nil {
			t.Fatal(err)
		}
		var uname unix.Utsname
		if err := unix.Uname(&uname); err != nil {
			t.Fatal(err)
		}
		wantImage, wantKernel := prettyName(string(osRelease)), unix.ByteSliceToString(uname.Release[:])
		out := u.kubectl("get", "nodes", "-o", "wide")
		t.Logf("kubectl get nodes -o wide:\n%s", out)
		for _, n := range u.c.Nodes {
			row := rowOf(out, n.Name)
			if row == "" || strings.Contains(row, "<unknown>") || !strings.Contains(row, wantImage) || !strings.Contains(row, wantKernel) ||
				!strings.Contains(row, "containerd://") {
				t.Errorf("node %s's row %q: want OS image %q, kernel %q and containerd://…", n.Name, row, wantImage, wantKernel)
			}
			var info corev1.NodeSystemInfo
			if err := json.Unmarshal([]byte(u.kubectl("get", "node", n.Name, "-o", "jsonpath={.status.nodeInfo}")), &info); err != nil {
				t.Fatal(err)
			}
			if info.MachineID == "" || info.BootID == "" || info.OperatingSystem != "linux" || info.KubeletVersion == "" {
				t.Errorf("node %s's nodeInfo = %+v: want the machine and boot IDs, linux and the kubelet version", n.Name, info)
			}
		}
	})

	t.Run("kubectl top pods and nodes answer from metrics-server", func(t *testing.T) {
		u.t = t
		u.apply(`apiVersion: v1
kind: Pod
metadata: {name: topped, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: ` + localcri.BusyboxImage + `
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
`)
		u.kubectl("wait", "--for=condition=Ready", "pod/topped", "--timeout=120s")
		// metrics-server scrapes every 15 s: a container has figures at
		// the first scrape 10 s after it started, a node at its second.
		u.eventually(90*time.Second, "kubectl top pod topped", func() (bool, string) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			out, err := u.c.Kubectl(ctx, "top", "pod", "topped", "--containers")
			return err == nil && rowOf(string(out), "topped") != "", string(out)
		})
		out := u.kubectl("top", "pod", "topped", "--containers")
		t.Logf("kubectl top pod topped --containers:\n%s", out)
		if f := strings.Fields(rowOf(out, "topped")); len(f) != 4 || f[1] != "c" || !strings.HasSuffix(f[2], "m") || !strings.HasSuffix(f[3], "Mi") {
			t.Errorf("kubectl top pod topped --containers:\n%s\nwant POD NAME CPU(cores) MEMORY(bytes) of container c", out)
		}
		var pm struct {
			Containers []struct {
				Name  string            `json:"name"`
				Usage map[string]string `json:"usage"`
			} `json:"containers"`
		}
		if err := json.Unmarshal([]byte(u.kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/topped")), &pm); err != nil {
			t.Fatal(err)
		}
		if len(pm.Containers) != 1 || pm.Containers[0].Usage["memory"] == "" || pm.Containers[0].Usage["memory"] == "0" {
			t.Errorf("PodMetrics of topped = %+v, want container c's memory", pm)
		}
		u.eventually(60*time.Second, "kubectl top nodes lists both podsync nodes", func() (bool, string) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			out, err := u.c.Kubectl(ctx, "top", "nodes")
			if err != nil {
				return false, string(out)
			}
			for _, n := range u.c.Nodes {
				f := strings.Fields(rowOf(string(out), n.Name))
				if len(f) != 5 || f[1] == "<unknown>" || !strings.HasSuffix(f[1], "m") || !strings.HasSuffix(f[3], "Mi") || f[3] == "0Mi" {
					return false, string(out)
				}
			}
			return true, string(out)
		})
		t.Logf("kubectl top nodes:\n%s", u.kubectl("top", "nodes"))
	})

	// podsync-vk sends a pod's objects with it; podsyncd checks the keys a
	// pod names in the objects a request carries, where a kubelet fails
	// the container and starts it once the key is there.
	t.Run("a pod naming a key its ConfigMap lacks waits for the key, as on a kubelet", func(t *testing.T) {
		u.t = t
		u.apply(`apiVersion: v1
kind: ConfigMap
metadata: {name: late-key, namespace: default}
data: {a: "1"}
---
apiVersion: v1
kind: Pod
metadata: {name: waits-for-key, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: ` + localcri.BusyboxImage + `
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    env:
    - name: B
      valueFrom: {configMapKeyRef: {name: late-key, key: b}}
`)
		u.eventually(2*time.Minute, "the container waiting with CreateContainerConfigError", func() (bool, string) {
			p := u.pod("waits-for-key")
			if p.Status.Phase == corev1.PodFailed {
				t.Fatalf("the pod failed (%s: %s), want it waiting for the key", p.Status.Reason, p.Status.Message)
			}
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%s %v", p.Status.Phase, p.Status.ContainerStatuses)
		})
		u.kubectl("patch", "configmap", "late-key", "-p", `{"data":{"b":"2"}}`)
		u.kubectl("wait", "--for=condition=Ready", "pod/waits-for-key", "--timeout=120s")
		if got := strings.TrimSpace(u.kubectl("exec", "waits-for-key", "--", "sh", "-c", "echo $B")); got != "2" {
			t.Errorf("B = %q in the container, want the key's value 2", got)
		}
	})

	t.Run("a deleted pod goes as soon as it has stopped, with its own exit", func(t *testing.T) {
		u.t = t
		u.apply(`apiVersion: v1
kind: Pod
metadata: {name: quitter, namespace: default}
spec:
  terminationGracePeriodSeconds: 120
  containers:
  - name: c
    image: ` + localcri.BusyboxImage + `
    command: ["sh", "-c", "trap 'exit 3' TERM; while true; do sleep 0.2; done"]
`)
		u.kubectl("wait", "--for=condition=Ready", "pod/quitter", "--timeout=120s")
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		watch := exec.CommandContext(ctx, filepath.Join(kubeBin, "kubectl"), "--kubeconfig", u.c.Kube.Kubeconfig,
			"get", "pod", "quitter", "--watch", "-o", "json", "--output-watch-events")
		var seen lockedBuffer
		watch.Stdout = &seen
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		u.kubectl("delete", "pod", "quitter", "--wait=true", "--timeout=100s")
		took := time.Since(start)
		cancel()
		_ = watch.Wait()
		// The object went long before its 120 s grace period: once the
		// container had stopped (how long is for the benchmarks).
		t.Logf("kubectl delete returned after %s", took.Round(time.Millisecond))
		exit, found := lastExit(seen.String(), "c")
		if !found || exit != 3 {
			t.Errorf("last status reported before the object went: exit %d (found %t), want the container's own 3; watch:\n%s", exit, found, seen.String())
		}
	})
}

// rowOf is the line of a kubectl table whose first column is name, "" if
// none.
func rowOf(table, name string) string {
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return l
		}
	}
	return ""
}

// prettyName is PRETTY_NAME of an os-release file, unquoted.
func prettyName(osRelease string) string {
	for _, l := range strings.Split(osRelease, "\n") {
		if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}

// reasons lists the reasons of events.
func reasons(events []corev1.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Reason)
	}
	return out
}

// lastExit is the exit code of container name in the last status of a
// kubectl --watch -o json --output-watch-events stream that shows it
// terminated.
func lastExit(stream, name string) (int32, bool) {
	dec := json.NewDecoder(strings.NewReader(stream))
	var code int32
	found := false
	for {
		var ev struct {
			Object corev1.Pod `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			return code, found
		}
		for _, cs := range ev.Object.Status.ContainerStatuses {
			if cs.Name == name && cs.State.Terminated != nil {
				code, found = cs.State.Terminated.ExitCode, true
			}
		}
	}
}

// jwtClaims decodes the claims of a JWT without checking it.
func jwtClaims(token string) (map[string]any, error) {
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	return claims, json.Unmarshal(b, &claims)
}
