package sessions

import (
	"strings"
	"testing"
	"time"
)

// TestIdleTimerFiresOnlyWithoutTraffic: reads keep a session alive; the
// timer fires once they stop for its duration.
func TestIdleTimerFiresOnlyWithoutTraffic(t *testing.T) {
	fired := make(chan struct{})
	idle := newIdleTimer(200*time.Millisecond, func() { close(fired) })
	defer idle.stop()
	r := idleReader{r: strings.NewReader(strings.Repeat("x", 10)), t: idle}
	for range 10 {
		time.Sleep(50 * time.Millisecond)
		if _, err := r.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-fired:
			t.Fatal("fired while bytes moved")
		default:
		}
	}
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Fatal("did not fire after the traffic stopped")
	}
}
