package failpoint

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		want    map[string]Action
		wantErr string
	}{
		{name: "empty", spec: "", want: map[string]Action{}},
		{name: "only separators", spec: " ; ;", want: map[string]Action{}},
		{name: "exit", spec: "after-sandbox-created=exit", want: map[string]Action{
			AfterSandboxCreated: {Kind: Exit},
		}},
		{name: "several with hits and spaces", spec: " after-sandbox-created = exit@8 ; before-image-pull=sleep(1.5s) ;gc-remove-sandbox=hang@2", want: map[string]Action{
			AfterSandboxCreated: {Kind: Exit, Hit: 8},
			BeforeImagePull:     {Kind: Sleep, Duration: 1500 * time.Millisecond},
			GCRemoveSandbox:     {Kind: Hang, Hit: 2},
		}},
		{name: "delayed exit", spec: "after-container-created=exit(20ms)@6", want: map[string]Action{
			AfterContainerCreated: {Kind: Exit, Duration: 20 * time.Millisecond, Hit: 6},
		}},
		{name: "unknown name", spec: "after-everything=exit", wantErr: "unknown name"},
		{name: "no action", spec: "after-store-put", wantErr: "want name=action"},
		{name: "empty action", spec: "after-store-put=", wantErr: "want name=action"},
		{name: "twice", spec: "after-store-put=exit;after-store-put=hang", wantErr: "armed twice"},
		{name: "unknown action", spec: "after-store-put=explode", wantErr: "want exit, exit(DURATION), sleep(DURATION), hang or off"},
		{name: "off", spec: "skip-preconditions=off", want: map[string]Action{SkipPreconditions: {Kind: Off}}},
		{name: "off with duration", spec: "skip-preconditions=off(1s)", wantErr: "want exit"},
		{name: "sleep without duration", spec: "after-store-put=sleep", wantErr: "want exit"},
		{name: "hang with duration", spec: "after-store-put=hang(1s)", wantErr: "want exit"},
		{name: "unbalanced", spec: "after-store-put=sleep(1s", wantErr: "unbalanced"},
		{name: "hit zero", spec: "after-store-put=exit@0", wantErr: "at least 1"},
		{name: "hit not a number", spec: "after-store-put=exit@x", wantErr: "at least 1"},
		{name: "bad duration", spec: "after-store-put=sleep(soon)", wantErr: "invalid duration"},
		{name: "negative duration", spec: "after-store-put=sleep(-1s)", wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error %v, want one containing %q", tt.spec, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.spec, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.spec, diff)
			}
		})
	}
}

// TestActionStringRoundTrips: String spells an action as Parse reads it.
func TestActionStringRoundTrips(t *testing.T) {
	for _, a := range []Action{{Kind: Exit}, {Kind: Exit, Hit: 3}, {Kind: Exit, Duration: time.Millisecond}, {Kind: Sleep, Duration: 2 * time.Second}, {Kind: Hang, Hit: 1}} {
		got, err := Parse(AfterStorePut + "=" + a.String())
		if err != nil {
			t.Fatalf("Parse(%s): %v", a, err)
		}
		if got[AfterStorePut] != a {
			t.Errorf("round trip of %s gave %s", a, got[AfterStorePut])
		}
	}
}

// TestPointsAreUnique: every name is armable and spelled once.
func TestPointsAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Points() {
		if seen[p] {
			t.Errorf("point %q listed twice", p)
		}
		seen[p] = true
		if _, err := Parse(p + "=exit"); err != nil {
			t.Errorf("point %q: %v", p, err)
		}
	}
	if len(seen) < 10 {
		t.Errorf("%d points, want at least 10", len(seen))
	}
}
