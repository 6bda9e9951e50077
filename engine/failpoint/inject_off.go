//go:build !failpoints

package failpoint

// Enabled reports whether failpoints are compiled in (build tag
// failpoints).
const Enabled = false

// Inject marks the failpoint name. Without the failpoints build tag it
// does nothing, and calls to it compile to nothing.
func Inject(string) {}
