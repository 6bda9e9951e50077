package cli

import (
	"strings"
	"testing"
)

// TestKubectlVerbsAndFlags: kubectl's ways to name resources (pod/web,
// pods/web, po web) and its flags (-o name, jsonpath, custom-columns,
// --show-labels, --field-selector), get events, get nodes, get all and
// describe, against an in-process podsyncd; a resource podsync does not
// have, a field it cannot select on and an unknown -o are usage errors.
func TestKubectlVerbsAndFlags(t *testing.T) {
	d := startPodsyncd(t)
	mustSucceed(t, "run", d.run(t, "", "run", "-f", "../../examples/config.yaml"))

	for _, args := range [][]string{{"pod/config"}, {"pods/config"}, {"po", "config"}, {"pod", "config"}} {
		r := d.run(t, "", append([]string{"get"}, append(args, "-o", "name")...)...)
		if r.code != 0 || r.stdout != "pod/config\n" {
			t.Errorf("get %s -o name = %+v, want pod/config", strings.Join(args, " "), r)
		}
	}
	r := d.run(t, "", "get", "pod/config", "-o", "jsonpath={.kind} {.metadata.name} {.status.phase}")
	if r.code != 0 || r.stdout != "Pod config Running" {
		t.Errorf("get -o jsonpath = %+v", r)
	}
	r = d.run(t, "", "get", "pods", "-o", "custom-columns=NAME:.metadata.name,CONTAINERS:.spec.containers[*].name")
	if r.code != 0 || !hasRow(r.stdout, "NAME", "CONTAINERS") || !hasRow(r.stdout, "config", "app") {
		t.Errorf("get -o custom-columns = %+v", r)
	}
	r = d.run(t, "", "get", "pods", "--show-labels")
	if r.code != 0 || !strings.Contains(r.stdout, "LABELS") || !strings.Contains(r.stdout, "app=config") {
		t.Errorf("get --show-labels = %+v", r)
	}
	r = d.run(t, "", "get", "pods", "--field-selector", "status.phase=Running,spec.nodeName=node-1", "-o", "name")
	if r.code != 0 || r.stdout != "pod/config\n" {
		t.Errorf("get --field-selector status.phase=Running,spec.nodeName=node-1 = %+v", r)
	}
	r = d.run(t, "", "get", "pods", "--field-selector", "status.phase=Pending")
	if r.code != 0 || r.stdout != "" || !strings.Contains(r.stderr, "No resources found") {
		t.Errorf("get --field-selector status.phase=Pending = %+v", r)
	}
	r = d.run(t, "", "get", "all")
	if r.code != 0 || !hasRow(r.stdout, "default", "pod/config") {
		t.Errorf("get all = %+v", r)
	}
	r = d.run(t, "", "get", "nodes")
	if r.code != 0 || !hasRow(r.stdout, "NAME", "STATUS", "ROLES", "AGE", "VERSION") || !hasRow(r.stdout, "node-1", "Ready") {
		t.Errorf("get nodes = %+v", r)
	}
	r = d.run(t, "", "get", "node", "node-1", "-o", "jsonpath={.kind}/{.metadata.name}")
	if r.code != 0 || r.stdout != "Node/node-1" {
		t.Errorf("get node node-1 -o jsonpath = %+v", r)
	}
	r = d.run(t, "", "get", "events", "-n", "default")
	if r.code != 0 || !hasRow(r.stdout, "LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE") || !strings.Contains(r.stdout, "Started") ||
		!strings.Contains(r.stdout, "pod/config") {
		t.Errorf("get events = %+v", r)
	}
	r = d.run(t, "", "get", "events", "--field-selector", "involvedObject.name=config,reason=Started", "-o", "jsonpath={.items[*].reason}")
	if r.code != 0 || r.stdout != "Started" {
		t.Errorf("get events --field-selector = %+v", r)
	}
	r = d.run(t, "", "describe", "pod", "config")
	if r.code != 0 || !strings.Contains(r.stdout, "Name:") || !strings.Contains(r.stdout, "Containers:") ||
		!strings.Contains(r.stdout, "Events:") || !strings.Contains(r.stdout, "Started container app") {
		t.Errorf("describe pod config = %+v", r)
	}

	mustSucceed(t, "run init-sidecar", d.run(t, "", "run", "-f", "../../examples/init-sidecar.yaml"))
	r = d.run(t, "", "logs", "init-sidecar")
	if !strings.Contains(r.stderr, `Defaulted container "app" out of: app, `) || !strings.Contains(r.stderr, " (init)") {
		t.Errorf("logs of a pod of several containers without -c: %+v, want kubectl's Defaulted container line", r)
	}

	for _, args := range [][]string{
		{"top"},
		{"top", "pods", "a", "b"},
		{"get", "deployment/web"},
		{"get", "pods", "--field-selector", "spec.schedulerName=x"},
		{"get", "pods", "-o", "xml"},
		{"describe", "cm/x"},
	} {
		if r := d.run(t, "", args...); r.code != ExitUsage {
			t.Errorf("%s: exit %d, want %d (usage)\n%s", strings.Join(args, " "), r.code, ExitUsage, r.stderr)
		}
	}
}

// TestPortForwardNamedPorts: a remote port may be a container port's
// name after a local one (18080:http), as in kubectl.
func TestPortForwardNamedPorts(t *testing.T) {
	ports, err := parsePorts([]string{"18080:http", "9090", ":8081"})
	if err != nil {
		t.Fatal(err)
	}
	want := []forwardedPort{{local: 18080, name: "http"}, {local: 9090, remote: 9090}, {local: 0, remote: 8081}}
	if len(ports) != len(want) {
		t.Fatalf("ports %+v", ports)
	}
	for i := range want {
		if ports[i] != want[i] {
			t.Errorf("port %d = %+v, want %+v", i, ports[i], want[i])
		}
	}
	if _, err := parsePorts([]string{"http"}); err == nil {
		t.Error("a name without a local port is accepted")
	}
	d := startPodsyncd(t)
	mustSucceed(t, "run", d.run(t, "", "run", "--min-ready-seconds", "0", "-f", "../../examples/web.yaml"))
	if r := d.run(t, "", "port-forward", "web", "18089:nosuch"); r.code != 1 || !strings.Contains(r.stderr, `no container port named "nosuch"`) {
		t.Errorf("port-forward of an unknown port name: %+v", r)
	}
}

// TestGetWatch: get -w prints the list, then a row for each change of
// the pods it selects, pod/NAME and -l alike, a deleted pod's last row
// as kubectl's (Terminating, or the terminal status its kill left), and
// ends with 0 on ^C.
func TestGetWatch(t *testing.T) {
	d := startPodsyncd(t)
	mustSucceed(t, "run", d.run(t, "", "run", "-f", writeManifest(t, "first.yaml", podManifest("first", "sleep 1000", ""))))
	byName, bySelector := &syncBuffer{}, &syncBuffer{}
	stopName, waitName := d.background(t, byName, "get", "pod/first", "-w")
	stopSel, waitSel := d.background(t, bySelector, "get", "-l", "app=second", "-w")
	eventually(t, "get pod/first -w lists it", func() bool { return hasRow(byName.String(), "default", "first", "1/1", "Running") })
	mustSucceed(t, "run", d.run(t, "", "run", "-f", writeManifest(t, "second.yaml", podManifest("second", "sleep 1000", ""))))
	eventually(t, "get -l app=second -w shows the new pod", func() bool { return hasRow(bySelector.String(), "default", "second", "1/1", "Running") })
	mustSucceed(t, "delete", d.run(t, "", "delete", "first", "--grace-period", "0"))
	// The deleted pod's last row, as kubectl prints it: Terminating, or
	// the terminal status the node reported once its containers were
	// killed (kubectl shows a terminal phase over the deletion).
	eventually(t, "get pod/first -w shows its last row", func() bool {
		rows := linesWith(byName.String(), "first")
		if len(rows) < 2 {
			return false
		}
		last := strings.Fields(rows[len(rows)-1])
		return len(last) > 3 && (last[3] == "Terminating" || last[3] == "Error")
	})
	if strings.Contains(byName.String(), "second") || strings.Contains(bySelector.String(), "first") {
		t.Errorf("a watch shows another pod:\n%s\n%s", byName.String(), bySelector.String())
	}
	stopName()
	stopSel()
	if a, b := waitName(), waitSel(); a != 0 || b != 0 {
		t.Errorf("get -w ended with %d, %d; want 0 on interrupt", a, b)
	}
}
