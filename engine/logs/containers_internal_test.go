package logs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsync/podsync/engine/criconfig"
	"github.com/podsync/podsync/engine/errdefs"
)

func TestLogsContainer(t *testing.T) {
	one := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}, InitContainers: []corev1.Container{{Name: "init"}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}}}
	two := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}}}}
	tests := []struct {
		name    string
		pod     *corev1.Pod
		in      string
		want    string
		wantErr error
	}{
		{"the only container by default", one, "", "app", nil},
		{"an init container by name", one, "init", "init", nil},
		{"an ephemeral container by name", one, "debug", "debug", nil},
		{"a named regular container", two, "b", "b", nil},
		{"several containers need a name", two, "", "", errdefs.ErrInvalidSpec},
		{"an unknown container", one, "nope", "", errdefs.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PodContainer(tt.pod, tt.in)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("logsContainer = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestContainerLogFilesAreInInstanceOrder(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
	opts := criconfig.Options{PodLogDir: t.TempDir()}
	dir := filepath.Join(criconfig.PodLogDirectory(pod, opts), "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"10.log", "2.log", "0.log", "2.log.20261129-101010", "x.log", "1.log"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, p := range ContainerLogFiles(pod, opts, "app") {
		got = append(got, filepath.Base(p))
	}
	if diff := cmp.Diff([]string{"0.log", "1.log", "2.log", "10.log"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if files := ContainerLogFiles(pod, opts, "none"); len(files) != 0 {
		t.Errorf("files of a container without logs: %v", files)
	}
}
