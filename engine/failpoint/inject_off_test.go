//go:build !failpoints

package failpoint

import "testing"

// TestInjectWithoutTagDoesNothing: without the tag even an armed-looking
// environment does nothing, and a call allocates nothing.
func TestInjectWithoutTagDoesNothing(t *testing.T) {
	t.Setenv(EnvVar, AfterSandboxCreated+"=exit")
	if Enabled {
		t.Fatal("Enabled without the failpoints tag")
	}
	if n := testing.AllocsPerRun(100, func() { Inject(AfterSandboxCreated) }); n != 0 {
		t.Errorf("Inject allocates %v times per call", n)
	}
}
