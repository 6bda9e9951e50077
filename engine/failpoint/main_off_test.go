//go:build !failpoints

package failpoint

import "testing"

func TestMain(m *testing.M) {
	mainWithLeakCheck(m)
}
