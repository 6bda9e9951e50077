package localcritest

import (
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPodsyncdEnviron: podsyncd inherits the test's environment but the
// unset and overridden variables, with GORACE's exit sleep off unless the
// options set GORACE.
func TestPodsyncdEnviron(t *testing.T) {
	t.Setenv("PODSYNC_FAILPOINTS", "from-the-test")
	t.Setenv("PODSYNCD_TEST_KEPT", "1")
	t.Setenv("GORACE", "halt_on_error=1")
	for _, tc := range []struct {
		name       string
		env, unset []string
		want, not  []string
	}{
		{name: "inherited",
			want: []string{"PODSYNC_FAILPOINTS=from-the-test", "PODSYNCD_TEST_KEPT=1", "GORACE=atexit_sleep_ms=0"},
			not:  []string{"GORACE=halt_on_error=1"}},
		{name: "unset", unset: []string{"PODSYNC_FAILPOINTS"},
			want: []string{"PODSYNCD_TEST_KEPT=1"}, not: []string{"PODSYNC_FAILPOINTS=from-the-test"}},
		{name: "overridden", env: []string{"PODSYNC_FAILPOINTS=armed", "GORACE=log_path=x"}, unset: []string{"PODSYNC_FAILPOINTS"},
			want: []string{"PODSYNC_FAILPOINTS=armed", "GORACE=log_path=x"},
			not:  []string{"PODSYNC_FAILPOINTS=from-the-test", "GORACE=atexit_sleep_ms=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := PodsyncdOptions{Env: tc.env, Unset: tc.unset}
			env := o.environ()
			for _, kv := range tc.want {
				if !slices.Contains(env, kv) {
					t.Errorf("no %s in %q", kv, env)
				}
			}
			for _, kv := range tc.not {
				if slices.Contains(env, kv) {
					t.Errorf("%s in %q", kv, env)
				}
			}
		})
	}
}
