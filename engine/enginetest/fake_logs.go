package enginetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	critest "k8s.io/cri-api/pkg/apis/testing"
)

// WriteLog appends lines on stream ("stdout" or "stderr") to a container's
// log in CRI format.
func (r *FakeRuntime) WriteLog(containerID, stream string, lines ...string) error {
	r.Lock()
	defer r.Unlock()
	c, ok := r.Containers[containerID]
	if !ok {
		return notFound("container", containerID)
	}
	return r.writeLog(c, stream, lines)
}

func (r *FakeRuntime) writeLog(c *critest.FakeContainer, stream string, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	if c.LogPath == "" {
		return fmt.Errorf("container %q has no log path", c.Id)
	}
	ll := make([]logLine, 0, len(lines))
	for _, l := range lines {
		ll = append(ll, logLine{stream: stream, text: l})
	}
	return appendLog(c.LogPath, ll, r.clock.Now())
}

// appendLog appends lines to a CRI log file ("<RFC3339Nano> <stream> F
// <text>"), creating it and its directory.
func appendLog(path string, lines []logLine, now time.Time) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s %s F %s\n", now.UTC().Format(time.RFC3339Nano), l.stream, l.text)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
