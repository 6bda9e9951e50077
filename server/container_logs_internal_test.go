package server

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/engine/logs"
)

// blockedStream is a GetContainerLogs stream whose Send waits for a
// token from release, as gRPC's Send does once a caller that does not
// read has filled the flow-control window.
type blockedStream struct {
	grpc.ServerStreamingServer[podsyncv1.GetContainerLogsResponse]
	release chan struct{}
	waiting atomic.Int32
	mu      sync.Mutex
	sizes   [][2]int // lines and content bytes of each message sent
}

func (s *blockedStream) Send(m *podsyncv1.GetContainerLogsResponse) error {
	s.waiting.Add(1)
	<-s.release
	s.waiting.Add(-1)
	n := 0
	for _, l := range m.GetLines() {
		n += len(l.GetContent())
	}
	s.mu.Lock()
	s.sizes = append(s.sizes, [2]int{len(m.GetLines()), n})
	s.mu.Unlock()
	return nil
}

// TestLogBatcherHoldsOneBatchForASlowReader: while a caller does not
// read, the lines read from the file stop at one batch (the reader waits
// in Send), so a slow log consumer costs no more memory than a fast one;
// messages hold at most logBatchLines lines and, but for their last line,
// logBatchBytes of content.
func TestLogBatcherHoldsOneBatchForASlowReader(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lines     int
		lineBytes int
	}{
		{"short lines", 5000, 10},
		{"long lines", 40, 300 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := &blockedStream{release: make(chan struct{})}
			b := &logBatcher{stream: stream}
			var added atomic.Int64
			done := make(chan struct{})
			content := []byte(strings.Repeat("x", tc.lineBytes))
			go func() {
				defer close(done)
				for range tc.lines {
					if err := b.add(logs.Line{Time: time.Unix(0, 0), Stream: logs.Stdout, Content: content}); err != nil {
						t.Errorf("add: %v", err)
						return
					}
					added.Add(1)
				}
			}()
			deadline := time.Now().Add(10 * time.Second)
			for stream.waiting.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("no Send")
				}
				time.Sleep(time.Millisecond)
			}
			// The producer waits inside its first Send: what it holds is
			// that one batch.
			if n := added.Load(); n >= logBatchLines || int(n)*tc.lineBytes >= logBatchBytes {
				t.Errorf("%d lines (%d bytes) read while the first message waits", n, int(n)*tc.lineBytes)
			}
			close(stream.release)
			<-done
			if err := b.flush(); err != nil {
				t.Fatal(err)
			}
			total := 0
			for _, sz := range stream.sizes {
				total += sz[0]
				if sz[0] > logBatchLines || sz[1]-tc.lineBytes >= logBatchBytes {
					t.Errorf("message of %d lines, %d bytes", sz[0], sz[1])
				}
			}
			if total != tc.lines {
				t.Errorf("%d lines sent, want %d", total, tc.lines)
			}
		})
	}
}
