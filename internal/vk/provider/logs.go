package provider

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// GetContainerLogs streams a container's log from podsyncd's
// GetContainerLogs, in the kubelet's format (a line per entry, an RFC 3339
// timestamp in front when asked).
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	req := &podsyncv1.GetContainerLogsRequest{
		Namespace: namespace, Name: podName, Container: containerName,
		Follow: opts.Follow, Previous: opts.Previous, Timestamps: opts.Timestamps,
	}
	if opts.Tail > 0 {
		req.TailLines = new(int64(opts.Tail))
	}
	if opts.LimitBytes > 0 {
		req.LimitBytes = new(int64(opts.LimitBytes))
	}
	switch {
	case !opts.SinceTime.IsZero():
		req.SinceTime = timestamppb.New(opts.SinceTime)
	case opts.SinceSeconds > 0:
		req.SinceTime = timestamppb.New(time.Now().Add(-time.Duration(opts.SinceSeconds) * time.Second))
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	go func() {
		defer cancel()
		err := p.ps.Logs(ctx, req, func(l *podsyncv1.LogLine) error {
			var b []byte
			if opts.Timestamps {
				b = append(b, l.GetTime().AsTime().Format(time.RFC3339Nano)...)
				b = append(b, ' ')
			}
			b = append(b, l.GetContent()...)
			b = append(b, '\n')
			_, err := pw.Write(b)
			return err
		})
		if err != nil {
			err = fmt.Errorf("logs of %s/%s on podsync: %w", namespace, podName, err)
		}
		_ = pw.CloseWithError(err)
	}()
	return readCloser{pr, cancel}, nil
}

// readCloser ends the stream when the reader is closed.
type readCloser struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (r readCloser) Close() error {
	r.cancel()
	return r.PipeReader.Close()
}
