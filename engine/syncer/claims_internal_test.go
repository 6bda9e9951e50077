package syncer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/podsync/podsync/engine/criconfig"
)

// TestMigrateClaimVolumes: each legacy volume moves to the namespace owner
// names, what a deletion left behind goes, and a volume whose namespace
// already holds one of its name stays where it was, reported; a second
// run moves nothing more and leaves the legacy directory while it holds
// something.
func TestMigrateClaimVolumes(t *testing.T) {
	opts := criconfig.Options{RootDir: t.TempDir()}
	legacy := criconfig.LegacyClaimVolumesRoot(opts)
	for _, d := range []string{"data", "taken", ".deleting-old-abc123"} {
		if err := os.MkdirAll(filepath.Join(legacy, d), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := EnsureClaimVolume("team-a", "taken", opts); err != nil {
		t.Fatal(err)
	}
	owner := func(string) (string, []string) { return "team-a", []string{"team-b"} }
	done, err := MigrateClaimVolumes(opts, owner)
	if err == nil || !strings.Contains(err.Error(), `migrate named volume "taken"`) {
		t.Errorf("error %v, want the collision of taken reported", err)
	}
	if len(done) != 1 || done[0].Claim != "data" || done[0].Namespace != "team-a" || !slices.Equal(done[0].Left, []string{"team-b"}) {
		t.Errorf("migrated %+v, want data to team-a, team-b left", done)
	}
	left, _ := os.ReadDir(legacy)
	if len(left) != 1 || left[0].Name() != "taken" {
		t.Errorf("legacy directory holds %v, want taken alone", left)
	}
	if _, err := os.Stat(criconfig.ClaimVolumeDir("team-a", "data", opts)); err != nil {
		t.Errorf("moved volume: %v", err)
	}
}
