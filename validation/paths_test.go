package validation_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podsync/podsync/validation"
)

// pathsPod is a pod with one of each name CheckPodPaths looks at.
func pathsPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "0f8fad5b-d9cb-469f-a165-70867728950e"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "busybox",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: "sub/dir"}}}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/app"}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
					Items:                []corev1.KeyToPath{{Key: "k", Path: "conf/k.txt"}}}}},
				{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: "sec", Items: []corev1.KeyToPath{{Key: "k", Path: "k"}}}}},
			},
		},
	}
}

// TestCheckPodPaths: every name the engine turns into a path is refused
// when it could leave its directory or cannot be a file name.
func TestCheckPodPaths(t *testing.T) {
	long := strings.Repeat("a", 256)
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Pod)
		ok     bool
	}{
		{"valid", func(*corev1.Pod) {}, true},
		{"uid ..", func(p *corev1.Pod) { p.UID = ".." }, false},
		{"uid .", func(p *corev1.Pod) { p.UID = "." }, false},
		{"uid with slash", func(p *corev1.Pod) { p.UID = "../../etc" }, false},
		{"uid absolute", func(p *corev1.Pod) { p.UID = "/etc" }, false},
		{"uid with NUL", func(p *corev1.Pod) { p.UID = "a\x00b" }, false},
		{"uid too long", func(p *corev1.Pod) { p.UID = types.UID("u" + long) }, false},
		{"namespace with slash", func(p *corev1.Pod) { p.Namespace = "../x" }, false},
		{"name with slash", func(p *corev1.Pod) { p.Name = "a/b" }, false},
		{"name with NUL", func(p *corev1.Pod) { p.Name = "a\x00" }, false},
		{"name ..", func(p *corev1.Pod) { p.Name = ".." }, true}, // "shop_.._uid" is one name
		{"log directory name too long", func(p *corev1.Pod) { p.Name = strings.Repeat("n", 253) }, false},
		{"container ..", func(p *corev1.Pod) { p.Spec.Containers[0].Name = ".." }, false},
		{"container with slash", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "../../x" }, false},
		{"init container with NUL", func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "i\x00"}}
		}, false},
		{"volume ..", func(p *corev1.Pod) { p.Spec.Volumes[0].Name = ".." }, false},
		{"volume with slash", func(p *corev1.Pod) { p.Spec.Volumes[0].Name = "a/../../b" }, false},
		{"volume name too long", func(p *corev1.Pod) { p.Spec.Volumes[0].Name = long }, false},
		{"hostPath relative", func(p *corev1.Pod) { p.Spec.Volumes[1].HostPath.Path = "etc" }, false},
		{"hostPath with ..", func(p *corev1.Pod) { p.Spec.Volumes[1].HostPath.Path = "/var/../etc" }, false},
		{"hostPath with NUL", func(p *corev1.Pod) { p.Spec.Volumes[1].HostPath.Path = "/var/\x00" }, false},
		{"subPath absolute", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "/etc" }, false},
		{"subPath ..", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "a/../../etc" }, false},
		{"subPath with NUL", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "a\x00" }, false},
		{"subPath element too long", func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "a/" + long }, false},
		{"subPath too long", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts[0].SubPath = strings.Repeat("a/", 2100)
		}, false},
		{"configMap item ..", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Items[0].Path = "../k" }, false},
		{"configMap item absolute", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Items[0].Path = "/etc/k" }, false},
		{"configMap item empty", func(p *corev1.Pod) { p.Spec.Volumes[2].ConfigMap.Items[0].Path = "" }, false},
		{"secret item ..", func(p *corev1.Pod) { p.Spec.Volumes[3].Secret.Items[0].Path = "a/../../k" }, false},
		{"secret item with NUL", func(p *corev1.Pod) { p.Spec.Volumes[3].Secret.Items[0].Path = "k\x00" }, false},
		{"seccomp localhost ..", func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{
				Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("../../etc/shadow")}}
		}, false},
		{"seccomp localhost absolute", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{
				Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("/etc/shadow")}}
		}, false},
		{"seccomp localhost relative", func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{
				Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/audit.json")}}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pathsPod()
			tc.mutate(p)
			errs := validation.CheckPodPaths(p)
			if (len(errs) == 0) != tc.ok {
				t.Fatalf("CheckPodPaths = %v, want ok=%v", errs, tc.ok)
			}
			for _, err := range errs {
				if pe := (*validation.PathError)(nil); !errors.As(err, &pe) {
					t.Errorf("error %v is not a *PathError", err)
				}
			}
		})
	}
	if errs := validation.CheckPodPaths(nil); len(errs) != 1 || errs[0].Error() != "no pod" {
		t.Errorf("CheckPodPaths(nil) = %v, want [no pod]", errs)
	}
}

// TestCheckPodPathsMessages: each problem is one error, in the order of
// the pod's fields, naming the value and what is wrong with it.
func TestCheckPodPathsMessages(t *testing.T) {
	p := pathsPod()
	p.UID = ".."
	p.Namespace = "a/b"
	p.Spec.Containers[0].Name = ""
	p.Spec.Containers[0].VolumeMounts[0].SubPath = "/etc"
	p.Spec.Volumes[1].HostPath.Path = "etc"
	p.Spec.Volumes[2].ConfigMap.Items[0].Path = "../k"
	p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{
		Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("a\x00")}}
	want := []string{
		`pod uid ".." is a relative directory name`,
		`pod namespace "a/b" is empty or contains '/' or a NUL byte`,
		`container name "" is empty`,
		`subPath of volume mount "data" of container "" "/etc" is absolute`,
		`localhost seccomp profile "a\x00" contains a NUL byte`,
		`hostPath "etc" of volume "host" must be an absolute path without '..' or NUL`,
		`item path of key "k" of volume "cfg" "../k" contains '..'`,
	}
	errs := validation.CheckPodPaths(p)
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckFileName(t *testing.T) {
	for _, tc := range []struct{ v, want string }{
		{"web", ""},
		{strings.Repeat("x", validation.MaxFileNameBytes), ""},
		{"", `pod uid "" is empty`},
		{".", `pod uid "." is a relative directory name`},
		{"..", `pod uid ".." is a relative directory name`},
		{"a/b", `pod uid "a/b" contains '/' or a NUL byte`},
		{"x\x00", `pod uid "x\x00" contains '/' or a NUL byte`},
		{strings.Repeat("x", validation.MaxFileNameBytes+1), `pod uid "` + strings.Repeat("x", 256) + `" is longer than 255 bytes`},
	} {
		err := validation.CheckFileName("pod uid", tc.v)
		if got := errString(err); got != tc.want {
			t.Errorf("CheckFileName(%q) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestCheckLocalPath(t *testing.T) {
	for _, tc := range []struct{ v, want string }{
		{"a", ""},
		{"./a//b/", ""},
		{"a/..b", ""},
		{"", `path "" is empty`},
		{"a\x00", `path "a\x00" contains a NUL byte`},
		{"/x", `path "/x" is absolute`},
		{"a/../..", `path "a/../.." contains '..'`},
		{"a/../b", `path "a/../b" contains '..'`},
		{"..", `path ".." contains '..'`},
		{strings.Repeat("a/", 2048), `path "` + strings.Repeat("a/", 2048) + `" is longer than 4095 bytes`},
		{"a/" + strings.Repeat("x", 256), `path "a/` + strings.Repeat("x", 256) + `" has an element longer than 255 bytes`},
	} {
		err := validation.CheckLocalPath("path", tc.v)
		if got := errString(err); got != tc.want {
			t.Errorf("CheckLocalPath(%q) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
