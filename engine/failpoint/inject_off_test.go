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

// TestSkipWithoutTagIsFalse: without the tag no check can be turned off.
func TestSkipWithoutTagIsFalse(t *testing.T) {
	t.Setenv(EnvVar, SkipPreconditions+"=off")
	if Skip(SkipPreconditions) {
		t.Fatal("Skip is true without the failpoints tag")
	}
}
