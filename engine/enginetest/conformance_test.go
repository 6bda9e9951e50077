package enginetest

import "testing"

func TestRuntimeConformanceOnFakeRuntime(t *testing.T) {
	RuntimeConformance(t, func(*testing.T) Runtime { return NewRuntime() })
}
