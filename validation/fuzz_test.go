package validation_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/validation"
)

// volumesInput is testdata/manifests/volumes.yaml decoded and defaulted as
// podsyncctl does: a pod with every volume type, items, subPaths and env
// from a ConfigMap and a Secret.
func volumesInput(tb testing.TB) *input {
	data, err := os.ReadFile(filepath.Join("..", "testdata", "manifests", "volumes.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	m, err := convert.Decode(bytes.NewReader(data))
	if err != nil {
		tb.Fatal(err)
	}
	convert.Default(m.Pods[0])
	for _, c := range m.ConfigMaps {
		convert.DefaultConfigMap(c)
	}
	for _, s := range m.Secrets {
		convert.DefaultSecret(s)
	}
	return &input{pod: m.Pods[0], configMaps: m.ConfigMaps, secrets: m.Secrets}
}

func (in *input) clone() *input {
	out := &input{pod: in.pod.DeepCopy()}
	for _, c := range in.configMaps {
		out.configMaps = append(out.configMaps, c.DeepCopy())
	}
	for _, s := range in.secrets {
		out.secrets = append(out.secrets, s.DeepCopy())
	}
	return out
}

// validate defaults the input and validates it as the server validates a
// SyncPod request carrying it.
func (in *input) validate(opts validation.Options) field.ErrorList {
	var errs field.ErrorList
	for i, c := range in.configMaps {
		convert.DefaultConfigMap(c)
		errs = append(errs, validation.ValidateConfigMap(c, field.NewPath("configMaps").Index(i), opts)...)
	}
	for i, s := range in.secrets {
		errs = append(errs, validation.ValidateSecret(s, field.NewPath("secrets").Index(i), opts)...)
		convert.DefaultSecret(s)
	}
	opts.Objects = validation.NewObjects(in.configMaps, in.secrets)
	convert.Default(in.pod)
	return append(errs, validation.ValidatePod(in.pod, field.NewPath("pod"), opts)...)
}

// podStringFields set one string of volumesInput's pod that ends up in a
// path, a file name or a label on the node.
var podStringFields = []func(in *input, v string){
	func(in *input, v string) { in.pod.Name = v },
	func(in *input, v string) {
		in.pod.Namespace = v
		for _, c := range in.configMaps {
			c.Namespace = v
		}
		for _, s := range in.secrets {
			s.Namespace = v
		}
	},
	func(in *input, v string) { in.pod.UID = types.UID(v) },
	func(in *input, v string) { in.pod.Spec.Containers[0].Name = v },
	func(in *input, v string) { in.pod.Spec.Containers[0].VolumeMounts[1].SubPath = v },
	func(in *input, v string) { in.pod.Spec.Containers[0].VolumeMounts[0].MountPath = v },
	func(in *input, v string) { in.pod.Spec.Volumes[0].ConfigMap.Items[0].Path = v },
	func(in *input, v string) { in.pod.Spec.Volumes[1].Secret.Items[1].Path = v },
	func(in *input, v string) { in.pod.Spec.Volumes[4].HostPath.Path = v },
	func(in *input, v string) {
		in.pod.Spec.Volumes[2].Name = v
		in.pod.Spec.Containers[0].VolumeMounts[2].Name = v
	},
	func(in *input, v string) { in.pod.Spec.Containers[0].Image = v },
	func(in *input, v string) { in.pod.Spec.Containers[0].WorkingDir = v },
	func(in *input, v string) { in.pod.Spec.Containers[0].TerminationMessagePath = v },
	func(in *input, v string) { in.pod.Labels = map[string]string{v: "x"} },
	func(in *input, v string) { in.pod.Labels = map[string]string{"app": v} },
	func(in *input, v string) { in.pod.Spec.Hostname = v },
	func(in *input, v string) { in.pod.Spec.Containers[0].Env[0].Name = v },
	func(in *input, v string) { in.configMaps[0].Data = map[string]string{v: "x"} },
	func(in *input, v string) {
		in.pod.Spec.Containers[0].VolumeMounts[1].SubPath = ""
		in.pod.Spec.Containers[0].VolumeMounts[1].SubPathExpr = v
	},
}

// FuzzValidatePodStrings sets one string of a valid pod that reaches the
// node's file system (names, UID, subPath, subPathExpr, item paths,
// hostPath, mount and working directories, labels) to arbitrary text.
// Validation never panics, and a pod it accepts passes the engine's own
// path checks (CheckPodPaths) and builds its sandbox and container configs
// (but for a subPathExpr variable without a value, known at the start).
func FuzzValidatePodStrings(f *testing.F) {
	for i, s := range []string{"..", "../../etc", "/etc/passwd", "a\x00b", "web", "a/b", strings.Repeat("x", 300), ".", "~", "$(POD_NAME)", "a//b", "./x", "\u00e9", " "} {
		f.Add(uint8(i), s)
	}
	base := volumesInput(f)
	opts := criconfig.Options{RootDir: "/var/lib/podsync", PodLogDir: "/var/log/pods"}
	f.Fuzz(func(t *testing.T, field uint8, value string) {
		in := base.clone()
		podStringFields[int(field)%len(podStringFields)](in, value)
		if errs := in.validate(validation.Options{}); len(errs) > 0 {
			return
		}
		pod := in.pod
		if errs := validation.CheckPodPaths(pod); len(errs) > 0 {
			t.Fatalf("field %d = %q: validation accepted a pod the engine refuses: %v", int(field)%len(podStringFields), value, errs)
		}
		if _, err := criconfig.SandboxConfig(pod, 0, opts); err != nil {
			t.Fatalf("field %d = %q: no sandbox config: %v", int(field)%len(podStringFields), value, err)
		}
		for i := range pod.Spec.Containers {
			cfg := criconfig.ContainerConfigInput{Pod: pod, Container: &pod.Spec.Containers[i], ConfigMaps: in.configMaps, Secrets: in.secrets}
			// A subPathExpr's variables get their values at the start.
			if _, err := criconfig.ContainerConfig(cfg, opts); err != nil && !errors.Is(err, criconfig.ErrSubPathExprUnset) {
				t.Fatalf("field %d = %q: no container config: %v", int(field)%len(podStringFields), value, err)
			}
		}
	})
}

// TestValidateVolumesInput: the base of FuzzValidatePodStrings is valid, so
// that the fuzzer explores the strings, not a pod refused anyway.
func TestValidateVolumesInput(t *testing.T) {
	if errs := volumesInput(t).validate(validation.Options{}); len(errs) > 0 {
		t.Fatalf("volumes.yaml: %v", errs.ToAggregate())
	}
}
