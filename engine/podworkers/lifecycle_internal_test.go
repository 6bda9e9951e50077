package podworkers

import "testing"

// TestLifecycleMoves: a deletion and a removal are final; a syncing or
// terminated pod may go anywhere the store and the runtime put it.
func TestLifecycleMoves(t *testing.T) {
	all := []lifecycle{syncing, terminating, terminated, removed}
	allowed := map[lifecycle][]lifecycle{
		syncing:     all,
		terminating: {terminating, removed},
		terminated:  all,
		removed:     {removed},
	}
	for _, from := range all {
		for _, to := range all {
			want := false
			for _, a := range allowed[from] {
				want = want || a == to
			}
			if got := from.canEnter(to); got != want {
				t.Errorf("%s → %s allowed = %v, want %v", from, to, got, want)
			}
		}
	}
	if s := lifecycle(9).String(); s != "lifecycle(9)" {
		t.Errorf("String of an unknown state = %q", s)
	}
}
