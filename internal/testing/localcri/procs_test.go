package localcri

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestProcessHelpers(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Error("Alive(self) = false")
	}
	if Alive(0) || Alive(-1) {
		t.Error("alive of an impossible pid")
	}
	if got := Cmdline(os.Getpid()); !strings.Contains(got, filepath.Base(os.Args[0])) {
		t.Errorf("Cmdline(self) = %q", got)
	}
	if len(processes()) == 0 {
		t.Error("processes() lists nothing")
	}
	// Nothing runs under a fresh directory.
	if ps := processesOf(t.TempDir(), []string{"0123456789abcdef"}); len(ps) != 0 {
		t.Errorf("processesOf a fresh dir = %v", ps)
	}
}

func TestStages(t *testing.T) {
	s := Stages{{"images", 40 * time.Millisecond}, {"containerd ready", 1500 * time.Millisecond}}
	if got, want := s.String(), "images 40ms, containerd ready 1.5s, total 1.54s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	sw := newStopwatch()
	sw.lap("a")
	sw.lap("b")
	if len(sw.stages) != 2 || sw.stages[0].Name != "a" || sw.stages[1].Name != "b" {
		t.Errorf("stopwatch stages = %v", sw.stages)
	}
}

func TestFindRepoDir(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+modulePath+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findRepoDir(deep); err != nil || got != root {
		t.Errorf("findRepoDir = %q, %v; want %q", got, err, root)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findRepoDir(other); err == nil {
		t.Error("findRepoDir outside a podsync checkout: no error")
	}
}

// TestZombiesAreNotProcesses: an exited child nobody reaped yet is not
// listed (it holds nothing), a live one is.
func TestZombiesAreNotProcesses(t *testing.T) {
	live := exec.Command("sleep", "30")
	dead := exec.Command("true")
	for _, c := range []*exec.Cmd{live, dead} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		_ = live.Process.Kill()
		_ = live.Wait()
		_ = dead.Wait()
	}()
	for !zombie(dead.Process.Pid) {
		time.Sleep(time.Millisecond)
	}
	var sawLive, sawDead bool
	for _, p := range processes() {
		sawLive = sawLive || p.pid == live.Process.Pid
		sawDead = sawDead || p.pid == dead.Process.Pid
	}
	if !sawLive || sawDead {
		t.Errorf("processes: live child listed %v, zombie listed %v", sawLive, sawDead)
	}
}
