//go:build !failpoints

package failpoint

// Enabled reports whether failpoints are compiled in (build tag
// failpoints).
const Enabled = false

// Inject marks the failpoint name. Without the failpoints build tag it
// does nothing, and calls to it compile to nothing.
func Inject(string) {}

// Skip reports whether the check the failpoint name guards is turned off
// (armed "off"). Without the failpoints build tag it is always false.
func Skip(string) bool { return false }
