package convert

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	appsv1beta1 "k8s.io/api/apps/v1beta1"
	appsv1beta2 "k8s.io/api/apps/v1beta2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	podsyncvalidation "github.com/podsync/podsync/validation"
)

// Workload kinds: Decode runs their pod template as pods named after the
// workload, as their controllers would on a one-node cluster.
const (
	KindDeployment            = "Deployment"
	KindReplicaSet            = "ReplicaSet"
	KindStatefulSet           = "StatefulSet"
	KindDaemonSet             = "DaemonSet"
	KindReplicationController = "ReplicationController"
	KindJob                   = "Job"
	kindCronJob               = "CronJob"
)

// Labels and the annotation a workload's pods carry: `podsyncctl delete -f`
// of the workload's file removes them, and re-applying it updates them.
const (
	LabelWorkloadKind          = "podsync.io/workload-kind"
	LabelWorkloadName          = "podsync.io/workload-name"
	AnnotationWorkload         = "podsync.io/workload"
	labelStatefulSetPod        = "statefulset.kubernetes.io/pod-name"
	labelPodIndex              = "apps.kubernetes.io/pod-index"
	labelJobName               = "batch.kubernetes.io/job-name"
	labelJobNameLegacy         = "job-name"
	labelJobCompletionIdx      = "batch.kubernetes.io/job-completion-index"
	annotationJobCompletionIdx = "batch.kubernetes.io/job-completion-index"
)

// workloadAPIVersions are the group versions each workload kind is read
// in: the current one and the old ones manifests still carry.
var workloadAPIVersions = map[string][]string{
	KindDeployment:            {"apps/v1", "apps/v1beta2", "apps/v1beta1", "extensions/v1beta1"},
	KindReplicaSet:            {"apps/v1", "apps/v1beta2", "extensions/v1beta1"},
	KindStatefulSet:           {"apps/v1", "apps/v1beta2", "apps/v1beta1"},
	KindDaemonSet:             {"apps/v1", "apps/v1beta2", "extensions/v1beta1"},
	KindReplicationController: {"v1"},
	KindJob:                   {"batch/v1"},
}

// skippedKinds are the kinds found beside workloads that mean nothing on
// one node without an API server; Decode skips them with a notice.
var skippedKinds = map[string]string{
	"Service":             "podsync has no service proxy; reach pods by hostPort or hostNetwork",
	"ServiceAccount":      "podsync mounts no service account token",
	"Role":                "podsync has no API server to authorize",
	"ClusterRole":         "podsync has no API server to authorize",
	"RoleBinding":         "podsync has no API server to authorize",
	"ClusterRoleBinding":  "podsync has no API server to authorize",
	"Namespace":           "namespaces need no creating on podsync",
	"PersistentVolume":    "podsync binds no volumes: a persistentVolumeClaim is a node-local named volume",
	"StorageClass":        "podsync provisions no volumes: a persistentVolumeClaim is a node-local named volume",
	"PodDisruptionBudget": "podsync evicts no pods for a drain: there is no eviction API on one node",
}

// kindPersistentVolumeClaim documents become named volumes (addClaim).
const kindPersistentVolumeClaim = "PersistentVolumeClaim"

// isOtherKind reports whether Decode handles kind in this file: a workload,
// CronJob or a skipped kind.
func isOtherKind(kind string) bool {
	_, workload := workloadAPIVersions[kind]
	_, skipped := skippedKinds[kind]
	return workload || skipped || kind == kindCronJob || kind == kindPersistentVolumeClaim
}

// checkOtherAPIVersion checks the apiVersion of a kind isOtherKind accepts.
// Skipped kinds are skipped whatever their version.
func checkOtherAPIVersion(h manifestHeader) error {
	want, ok := workloadAPIVersions[h.Kind]
	if !ok {
		return nil
	}
	for _, v := range want {
		if h.APIVersion == v {
			return nil
		}
	}
	if h.APIVersion == "" {
		return fmt.Errorf("apiVersion is missing, want %q", want[0])
	}
	return fmt.Errorf("apiVersion %q of a %s is not supported, want %q", h.APIVersion, h.Kind, want[0])
}

// workload is what Decode uses of a workload, whatever its group version.
type workload struct {
	kind      string
	meta      metav1.ObjectMeta
	replicas  *int32 // nil: 1
	selector  *metav1.LabelSelector
	template  corev1.PodTemplateSpec
	ordinal   int32                          // StatefulSet ordinals.start
	subdomain string                         // StatefulSet serviceName
	claims    []corev1.PersistentVolumeClaim // StatefulSet volumeClaimTemplates
	job       *batchv1.JobSpec
}

// addOther decodes a kind isOtherKind accepts: a workload's pods are added
// to m, a PersistentVolumeClaim to its claims, a skipped kind gives a
// notice, CronJob an error.
func (m *Manifests) addOther(h manifestHeader, doc []byte) error {
	if h.Kind == kindPersistentVolumeClaim {
		return m.addClaim(h)
	}
	if h.Kind == kindCronJob {
		return errors.New("a CronJob is not run: podsync has no controller to start its Jobs on a schedule; " +
			"run the Job's pod from a systemd timer (podsyncctl run -f job.yaml in the timer's service)")
	}
	if why, ok := skippedKinds[h.Kind]; ok {
		m.Notices = append(m.Notices, fmt.Sprintf("%s %q skipped: %s", h.Kind, h.Name, why))
		return nil
	}
	w, err := decodeWorkload(h, doc)
	if err != nil {
		return err
	}
	pods, err := w.pods()
	if err != nil {
		return err
	}
	m.Pods = append(m.Pods, pods...)
	if len(w.claims) > 0 {
		var names []string
		for _, p := range pods {
			for _, c := range w.claims {
				ref := ClaimRef{Namespace: p.Namespace, Name: fmt.Sprintf("%s-%s", c.Name, p.Name)}
				if ref.Namespace == "" {
					ref.Namespace = metav1.NamespaceDefault
				}
				if !slices.Contains(m.Claims, ref) {
					m.Claims = append(m.Claims, ref)
					names = append(names, ref.Name)
				}
			}
		}
		m.Notices = append(m.Notices, fmt.Sprintf("%s %q: volumeClaimTemplates are the node-local named volumes %s, one per replica "+
			"as the StatefulSet controller names its claims, kept when the pods are deleted; their storage class, size and access modes are not used",
			h.Kind, h.Name, strings.Join(names, ", ")))
	}
	m.Notices = append(m.Notices, schedulingNotices(h.Kind, h.Name, &w.template.Spec)...)
	return nil
}

func decodeWorkload(h manifestHeader, doc []byte) (*workload, error) {
	w := &workload{kind: h.Kind}
	var v any
	switch h.Kind + " " + h.APIVersion {
	case "Deployment apps/v1":
		v = &appsv1.Deployment{}
	case "Deployment apps/v1beta2":
		v = &appsv1beta2.Deployment{}
	case "Deployment apps/v1beta1":
		v = &appsv1beta1.Deployment{}
	case "Deployment extensions/v1beta1":
		v = &extensionsv1beta1.Deployment{}
	case "ReplicaSet apps/v1":
		v = &appsv1.ReplicaSet{}
	case "ReplicaSet apps/v1beta2":
		v = &appsv1beta2.ReplicaSet{}
	case "ReplicaSet extensions/v1beta1":
		v = &extensionsv1beta1.ReplicaSet{}
	case "StatefulSet apps/v1":
		v = &appsv1.StatefulSet{}
	case "StatefulSet apps/v1beta2":
		v = &appsv1beta2.StatefulSet{}
	case "StatefulSet apps/v1beta1":
		v = &appsv1beta1.StatefulSet{}
	case "DaemonSet apps/v1":
		v = &appsv1.DaemonSet{}
	case "DaemonSet apps/v1beta2":
		v = &appsv1beta2.DaemonSet{}
	case "DaemonSet extensions/v1beta1":
		v = &extensionsv1beta1.DaemonSet{}
	case "ReplicationController v1":
		v = &corev1.ReplicationController{}
	case "Job batch/v1":
		v = &batchv1.Job{}
	default:
		// checkOtherAPIVersion admits no other pair.
		return nil, fmt.Errorf("apiVersion %q of a %s is not supported", h.APIVersion, h.Kind)
	}
	if err := unmarshalStrict(doc, v); err != nil {
		return nil, err
	}
	switch o := v.(type) {
	case *appsv1.Deployment:
		w.meta, w.replicas, w.selector, w.template = o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Spec.Template
	case *appsv1beta2.Deployment:
		w.meta, w.replicas, w.selector, w.template = o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Spec.Template
	case *appsv1beta1.Deployment:
		w.meta, w.replicas, w.selector, w.template = o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Spec.Template
	case *extensionsv1beta1.Deployment:
		w.meta, w.replicas, w.selector, w.template = o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Spec.Template
	case *appsv1.ReplicaSet:
		w.meta, w.replicas, w.selector, w.template = o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Spec.Template
	case *appsv1beta2.ReplicaSet:
		w.meta, w.replicas, w.selector, w.template = o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Spec.Template
	case *extensionsv1beta1.ReplicaSet:
		w.meta, w.replicas, w.selector, w.template = o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Spec.Template
	case *appsv1.StatefulSet:
		w.meta, w.replicas, w.selector, w.template = o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Spec.Template
		w.subdomain, w.claims = o.Spec.ServiceName, o.Spec.VolumeClaimTemplates
		if o.Spec.Ordinals != nil {
			w.ordinal = o.Spec.Ordinals.Start
		}
	case *appsv1beta2.StatefulSet:
		w.meta, w.replicas, w.selector, w.template = o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Spec.Template
		w.subdomain, w.claims = o.Spec.ServiceName, o.Spec.VolumeClaimTemplates
		if o.Spec.Ordinals != nil {
			w.ordinal = o.Spec.Ordinals.Start
		}
	case *appsv1beta1.StatefulSet:
		w.meta, w.replicas, w.selector, w.template = o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Spec.Template
		w.subdomain, w.claims = o.Spec.ServiceName, o.Spec.VolumeClaimTemplates
		if o.Spec.Ordinals != nil {
			w.ordinal = o.Spec.Ordinals.Start
		}
	case *appsv1.DaemonSet:
		w.meta, w.selector, w.template = o.ObjectMeta, o.Spec.Selector, o.Spec.Template
	case *appsv1beta2.DaemonSet:
		w.meta, w.selector, w.template = o.ObjectMeta, o.Spec.Selector, o.Spec.Template
	case *extensionsv1beta1.DaemonSet:
		w.meta, w.selector, w.template = o.ObjectMeta, o.Spec.Selector, o.Spec.Template
	case *corev1.ReplicationController:
		w.meta, w.replicas = o.ObjectMeta, o.Spec.Replicas
		if o.Spec.Template == nil {
			return nil, errors.New("spec.template is required")
		}
		w.template = *o.Spec.Template
		if o.Spec.Selector != nil {
			w.selector = &metav1.LabelSelector{MatchLabels: o.Spec.Selector}
		}
	case *batchv1.Job:
		w.meta, w.selector, w.template = o.ObjectMeta, o.Spec.Selector, o.Spec.Template
		w.job = &o.Spec
		if o.Spec.ManualSelector == nil || !*o.Spec.ManualSelector {
			// The Job controller makes the selector itself.
			w.selector = nil
		}
	}
	return w, nil
}

// pods are the workload's pods: replicas of them (one for a DaemonSet or
// Job), named <name>-<i> (from ordinals.start for a StatefulSet), each the
// pod template with the workload's namespace and its kind and name in
// labels and an annotation.
func (w *workload) pods() ([]*corev1.Pod, error) {
	if w.meta.Name == "" {
		return nil, errors.New("metadata.name is required: the pods are named after it")
	}
	for i, c := range w.claims {
		if errs := validation.IsDNS1123Subdomain(c.Name); len(errs) > 0 {
			return nil, fmt.Errorf("spec.volumeClaimTemplates[%d].metadata.name %q: %s", i, c.Name, strings.Join(errs, "; "))
		}
	}
	if w.selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		if err != nil {
			return nil, fmt.Errorf("spec.selector: %w", err)
		}
		if !sel.Matches(labels.Set(w.template.Labels)) {
			return nil, fmt.Errorf("spec.selector %s does not match spec.template.metadata.labels", sel)
		}
	}
	replicas := int32(1)
	if w.replicas != nil {
		replicas = *w.replicas
	}
	template := w.template.DeepCopy()
	if w.job != nil {
		if err := jobTemplate(w.job, template); err != nil {
			return nil, err
		}
	} else if rp := template.Spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyAlways {
		return nil, fmt.Errorf("spec.template.spec.restartPolicy %q: a %s's pods restart Always; use a Job or a Pod for %s", rp, w.kind, rp)
	}
	pods := make([]*corev1.Pod, 0, replicas)
	for i := w.ordinal; i < w.ordinal+replicas; i++ {
		name := w.meta.Name + "-" + strconv.Itoa(int(i))
		pod := &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: *template.ObjectMeta.DeepCopy(),
			Spec:       *template.Spec.DeepCopy(),
		}
		pod.Name = name
		pod.Namespace = w.meta.Namespace
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Labels[LabelWorkloadKind] = w.kind
		if len(validation.IsValidLabelValue(w.meta.Name)) == 0 {
			pod.Labels[LabelWorkloadName] = w.meta.Name
		}
		pod.Annotations[AnnotationWorkload] = w.kind + "/" + w.meta.Name
		switch {
		case w.kind == KindStatefulSet:
			// The StatefulSet controller's updateStorage: a volume per
			// claim template, named as the template, over the claim
			// <template>-<set>-<ordinal> (getPersistentVolumeClaimName),
			// replacing a template volume of that name.
			for _, c := range w.claims {
				v := corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
					ClaimName: fmt.Sprintf("%s-%s-%d", c.Name, w.meta.Name, i)}}}
				if j := slices.IndexFunc(pod.Spec.Volumes, func(pv corev1.Volume) bool { return pv.Name == c.Name }); j >= 0 {
					pod.Spec.Volumes[j] = v
				} else {
					pod.Spec.Volumes = append(pod.Spec.Volumes, v)
				}
			}
			pod.Labels[labelStatefulSetPod] = name
			pod.Labels[labelPodIndex] = strconv.Itoa(int(i))
			if pod.Spec.Hostname == "" {
				pod.Spec.Hostname = name
			}
			if pod.Spec.Subdomain == "" {
				pod.Spec.Subdomain = w.subdomain
			}
		case w.job != nil:
			if len(validation.IsValidLabelValue(w.meta.Name)) == 0 {
				pod.Labels[labelJobName] = w.meta.Name
				pod.Labels[labelJobNameLegacy] = w.meta.Name
			}
			if w.job.CompletionMode != nil && *w.job.CompletionMode == batchv1.IndexedCompletion {
				pod.Labels[labelJobCompletionIdx] = "0"
				pod.Annotations[annotationJobCompletionIdx] = "0"
			}
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// jobTemplate checks that the Job is one podsync runs as its controller
// would, one pod, and sets the Job's backoff limit and deadline on the pod
// template.
func jobTemplate(spec *batchv1.JobSpec, t *corev1.PodTemplateSpec) error {
	one := func(field string, v *int32) error {
		if v != nil && *v != 1 {
			return fmt.Errorf("spec.%s %d: podsync runs a Job as one pod; set %s: 1 or leave it out", field, *v, field)
		}
		return nil
	}
	if err := errors.Join(one("completions", spec.Completions), one("parallelism", spec.Parallelism)); err != nil {
		return err
	}
	switch {
	case spec.Suspend != nil && *spec.Suspend:
		return errors.New("spec.suspend: a suspended Job runs no pod; remove suspend to run it")
	case spec.PodFailurePolicy != nil:
		return errors.New("spec.podFailurePolicy: podsync counts every failed run of a Job's pod against backoffLimit; remove the policy")
	case spec.SuccessPolicy != nil:
		return errors.New("spec.successPolicy: for an indexed Job of several completions, which podsync does not run; remove it")
	case spec.BackoffLimitPerIndex != nil || spec.MaxFailedIndexes != nil:
		return errors.New("spec.backoffLimitPerIndex, spec.maxFailedIndexes: for an indexed Job of several completions, which podsync does not run; use backoffLimit")
	}
	// The controller makes a new pod after each failure until backoffLimit
	// (default 6) pods failed; podsync, with no controller, retries the
	// one pod in place (restartPolicy OnFailure) and fails it at the
	// failed run that would make the controller give up
	// (podsyncvalidation.AnnotationBackoffLimit). With backoffLimit 0 the pod
	// is not retried: restartPolicy Never.
	limit := int32(6)
	if spec.BackoffLimit != nil {
		limit = *spec.BackoffLimit
	}
	switch t.Spec.RestartPolicy {
	case corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
		t.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		if limit == 0 {
			t.Spec.RestartPolicy = corev1.RestartPolicyNever
		}
	default:
		return fmt.Errorf("spec.template.spec.restartPolicy %q: a Job's pod restarts OnFailure or Never", t.Spec.RestartPolicy)
	}
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[podsyncvalidation.AnnotationBackoffLimit] = strconv.Itoa(int(limit))
	// The Job's deadline counts from the Job's start, the pod's from the
	// pod's: on one node, the pod starts with the Job.
	if d := spec.ActiveDeadlineSeconds; d != nil {
		if p := t.Spec.ActiveDeadlineSeconds; p == nil || *d < *p {
			t.Spec.ActiveDeadlineSeconds = d
		}
	}
	return nil
}

const workloadKindList = "Deployment, ReplicaSet, StatefulSet, DaemonSet, ReplicationController, Job"

// addClaim adds a PersistentVolumeClaim document to m.Claims: the
// node-local named volume a persistentVolumeClaim volume of that claimName
// mounts in the pods of its namespace, podman kube play's semantics.
// Nothing provisions, sizes or binds it, which a notice says.
func (m *Manifests) addClaim(h manifestHeader) error {
	if h.APIVersion != "v1" {
		return fmt.Errorf("apiVersion %q: a PersistentVolumeClaim is v1", h.APIVersion)
	}
	if errs := validation.IsDNS1123Subdomain(h.Name); len(errs) > 0 {
		return fmt.Errorf("metadata.name %q: %s", h.Name, strings.Join(errs, "; "))
	}
	ref := ClaimRef{Namespace: h.Namespace, Name: h.Name}
	if ref.Namespace == "" {
		ref.Namespace = metav1.NamespaceDefault
	}
	if errs := validation.IsDNS1123Label(ref.Namespace); len(errs) > 0 {
		return fmt.Errorf("metadata.namespace %q: %s", ref.Namespace, strings.Join(errs, "; "))
	}
	if !slices.Contains(m.Claims, ref) {
		m.Claims = append(m.Claims, ref)
	}
	m.Notices = append(m.Notices, fmt.Sprintf("%s %q: created as the node-local named volume %q of namespace %q, shared by its pods "+
		"that name the claim and kept when they are deleted; its storage class, size and access modes are not used", h.Kind, h.Name, h.Name, ref.Namespace))
	return nil
}
