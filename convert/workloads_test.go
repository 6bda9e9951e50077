package convert_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/validation"
)

const tmpl = `
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - {name: web, image: nginx}
`

func TestDecodeWorkloads(t *testing.T) {
	type podWant struct {
		Name, Namespace, Hostname, Subdomain, RestartPolicy string
		Labels                                              map[string]string
		Deadline                                            int64
		// BackoffLimit is the pod's podsync.io/backoff-limit.
		BackoffLimit string
	}
	wl := func(kind, name string) map[string]string {
		return map[string]string{"app": "web", convert.LabelWorkloadKind: kind, convert.LabelWorkloadName: name}
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name    string
		in      string
		want    []podWant
		notices []string
		claims  []convert.ClaimRef
	}{
		{name: "Deployment with replicas and a Service", in: `apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate}` + tmpl,
			want: []podWant{
				{Name: "web-0", Namespace: "shop", Labels: wl("Deployment", "web")},
				{Name: "web-1", Namespace: "shop", Labels: wl("Deployment", "web")},
				{Name: "web-2", Namespace: "shop", Labels: wl("Deployment", "web")},
			},
			notices: []string{`Service "web" skipped: podsync has no service proxy; reach pods by hostPort or hostNetwork`}},
		{name: "Deployment in extensions/v1beta1, replicas defaulted", in: `apiVersion: extensions/v1beta1
kind: Deployment
metadata: {name: web}
spec:` + tmpl,
			want: []podWant{{Name: "web-0", Labels: wl("Deployment", "web")}}},
		{name: "ReplicaSet apps/v1beta2", in: `apiVersion: apps/v1beta2
kind: ReplicaSet
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchExpressions: [{key: app, operator: In, values: [web]}]}` + tmpl,
			want: []podWant{{Name: "web-0", Labels: wl("ReplicaSet", "web")}, {Name: "web-1", Labels: wl("ReplicaSet", "web")}}},
		{name: "StatefulSet from ordinals.start, with its hostnames", in: `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  serviceName: dbs
  ordinals: {start: 1}
  selector: {matchLabels: {app: web}}` + tmpl,
			want: []podWant{
				{Name: "db-1", Hostname: "db-1", Subdomain: "dbs", Labels: with(wl("StatefulSet", "db"), "statefulset.kubernetes.io/pod-name", "db-1", "apps.kubernetes.io/pod-index", "1")},
				{Name: "db-2", Hostname: "db-2", Subdomain: "dbs", Labels: with(wl("StatefulSet", "db"), "statefulset.kubernetes.io/pod-name", "db-2", "apps.kubernetes.io/pod-index", "2")},
			}},
		{name: "DaemonSet is one pod", in: `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: web}}` + tmpl,
			want: []podWant{{Name: "agent-0", Labels: wl("DaemonSet", "agent")}}},
		{name: "ReplicationController", in: `apiVersion: v1
kind: ReplicationController
metadata: {name: web}
spec:
  replicas: 2
  selector: {app: web}` + tmpl,
			want: []podWant{{Name: "web-0", Labels: wl("ReplicationController", "web")}, {Name: "web-1", Labels: wl("ReplicationController", "web")}}},
		{name: "Job of one pod, not retried, with its deadline", in: `apiVersion: batch/v1
kind: Job
metadata: {name: migrate}
spec:
  backoffLimit: 0
  activeDeadlineSeconds: 60
  template:
    metadata:
      labels: {app: web}
    spec:
      restartPolicy: OnFailure
      containers:
      - {name: m, image: busybox}
`,
			want: []podWant{{Name: "migrate-0", RestartPolicy: "Never", Deadline: 60, BackoffLimit: "0", Labels: with(wl("Job", "migrate"), "batch.kubernetes.io/job-name", "migrate", "job-name", "migrate")}}},
		{name: "Job retried in place up to its default backoffLimit", in: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: i}]\n",
			want: []podWant{{Name: "j-0", RestartPolicy: "OnFailure", BackoffLimit: "6", Labels: with(wl("Job", "j"), "batch.kubernetes.io/job-name", "j", "job-name", "j")}}},
		{name: "Job retried in place up to its backoffLimit", in: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  backoffLimit: 2\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      restartPolicy: OnFailure\n      containers: [{name: c, image: i}]\n",
			want: []podWant{{Name: "j-0", RestartPolicy: "OnFailure", BackoffLimit: "2", Labels: with(wl("Job", "j"), "batch.kubernetes.io/job-name", "j", "job-name", "j")}}},
		{name: "replicas 0 is no pod", in: `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}` + tmpl},
		{name: "the other kinds beside workloads are skipped, a claim is a named volume", in: `apiVersion: v1
kind: ServiceAccount
metadata: {name: sa}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: rb}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
`, notices: []string{
			`ServiceAccount "sa" skipped: podsync mounts no service account token`,
			`RoleBinding "rb" skipped: podsync has no API server to authorize`,
			`Namespace "shop" skipped: namespaces need no creating on podsync`,
			`PersistentVolumeClaim "data": created as the node-local named volume "data" of namespace "default", shared by its pods ` +
				"that name the claim and kept when they are deleted; its storage class, size and access modes are not used",
		}, claims: []convert.ClaimRef{{Namespace: "default", Name: "data"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := convert.Decode(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var got []podWant
			for _, p := range m.Pods {
				w := podWant{Name: p.Name, Namespace: p.Namespace, Hostname: p.Spec.Hostname, Subdomain: p.Spec.Subdomain,
					RestartPolicy: string(p.Spec.RestartPolicy), Labels: p.Labels}
				if p.Spec.ActiveDeadlineSeconds != nil {
					w.Deadline = *p.Spec.ActiveDeadlineSeconds
				}
				w.BackoffLimit = p.Annotations[validation.AnnotationBackoffLimit]
				if a := p.Annotations[convert.AnnotationWorkload]; a != p.Labels[convert.LabelWorkloadKind]+"/"+strings.TrimSuffix(p.Name, p.Name[strings.LastIndex(p.Name, "-"):]) {
					t.Errorf("pod %s: annotation %s = %q", p.Name, convert.AnnotationWorkload, a)
				}
				if len(p.Spec.Containers) != 1 {
					t.Errorf("pod %s: %d containers, want the template's", p.Name, len(p.Spec.Containers))
				}
				got = append(got, w)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("pods (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.notices, m.Notices); d != "" {
				t.Errorf("notices (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.claims, m.Claims); d != "" {
				t.Errorf("claims (-want +got):\n%s", d)
			}
			// The pods are ones podsync takes.
			for _, p := range m.Pods {
				convert.Default(p)
				if _, err := convert.PodToProto(p); err != nil {
					t.Errorf("pod %s: %v", p.Name, err)
				}
			}
		})
	}
}

func TestDecodeWorkloadRefusals(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{name: "kind is checked before apiVersion", in: "apiVersion: v1\nkind: Deployment\nmetadata: {name: web}\n",
			want: []string{`apiVersion "v1" of a Deployment is not supported, want "apps/v1"`}},
		{name: "unknown group version", in: "apiVersion: apps/v2\nkind: StatefulSet\nmetadata: {name: web}\n",
			want: []string{`apiVersion "apps/v2" of a StatefulSet is not supported, want "apps/v1"`}},
		{name: "CronJob points at systemd timers", in: "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\n",
			want: []string{"CronJob", "systemd timer"}},
		{name: "Job of several completions", in: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  completions: 3\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: i}]\n",
			want: []string{"spec.completions 3", "one pod"}},
		{name: "Job parallelism", in: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: 2\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: i}]\n",
			want: []string{"spec.parallelism 2"}},
		{name: "suspended Job", in: "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  suspend: true\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: i}]\n",
			want: []string{"spec.suspend"}},
		{name: "Deployment's pods restart Always", in: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: i}]\n",
			want: []string{`restartPolicy "Never"`, "use a Job or a Pod"}},
		{name: "selector not matching the template", in: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: api}}" + tmpl,
			want: []string{"spec.selector app=api does not match spec.template.metadata.labels"}},
		{name: "StatefulSet volume claim named badly", in: "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  selector: {matchLabels: {app: web}}\n  volumeClaimTemplates: [{metadata: {name: Data}}]" + tmpl,
			want: []string{"spec.volumeClaimTemplates[0].metadata.name"}},
		{name: "a kind in the wrong case", in: "apiVersion: v1\nkind: pod\nmetadata: {name: web}\n",
			want: []string{`kind "pod" is not supported; did you mean Pod?`}},
		{name: "unknown field of a workload", in: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replica: 2" + tmpl,
			want: []string{`unknown field "spec.replica"`}},
		{name: "workload without a name", in: "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {}\nspec:" + tmpl,
			want: []string{"metadata.name is required"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := convert.Decode(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("Decode = %d pods, want an error", len(m.Pods))
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestStatefulSetVolumeClaimTemplates: each replica mounts, under the
// template's name, the named volume <template>-<set>-<ordinal>, as the
// StatefulSet controller names its claims (replacing a template volume
// of that name); the claims are the manifests' to create, with a notice;
// PersistentVolume, StorageClass and PodDisruptionBudget are skipped with
// a notice.
func TestStatefulSetVolumeClaimTemplates(t *testing.T) {
	in := `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  selector: {matchLabels: {app: db}}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  template:
    metadata: {labels: {app: db}}
    spec:
      volumes: [{name: data, emptyDir: {}}]
      containers: [{name: c, image: i, volumeMounts: [{name: data, mountPath: /data}]}]
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db}
`
	m, err := convert.Decode(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Pods) != 2 {
		t.Fatalf("%d pods, want 2", len(m.Pods))
	}
	for i, p := range m.Pods {
		want := fmt.Sprintf("data-db-%d", i)
		if v := p.Spec.Volumes; len(v) != 1 || v[0].Name != "data" || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != want {
			t.Errorf("pod %s volumes %+v, want data on the claim %s", p.Name, v, want)
		}
	}
	if fmt.Sprint(m.Claims) != "[{default data-db-0} {default data-db-1}]" {
		t.Errorf("claims %v", m.Claims)
	}
	notices := strings.Join(m.Notices, "\n")
	for _, want := range []string{"data-db-0, data-db-1", `PersistentVolume "pv-1" skipped`, `StorageClass "local" skipped`, `PodDisruptionBudget "db" skipped`} {
		if !strings.Contains(notices, want) {
			t.Errorf("notices lack %q:\n%s", want, notices)
		}
	}
}
