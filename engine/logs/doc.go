// Package logs reads the log files a CRI runtime writes for containers, as
// the kubelet's kuberuntime/logs does for `kubectl logs`, and is the
// node's container log manager (pkg/kubelet/logs): a Manager finds a pod's
// container and the file of its instance (containers.go: ContainerLogs,
// ContainerLogFiles) and rotates the logs of running containers by size
// (rotate.go: Rotate, ReopenContainerLog).
//
// # Format
//
// Each line of a CRI log file is
//
//	2016-10-06T00:17:09.669794202Z stdout F log content
//
// a RFC 3339 timestamp with nanoseconds, the stream (stdout or stderr), a
// tag, and the content. The tag's first field (tags are separated by ':')
// is P for a partial line, which the runtime wrote because the output line
// was longer than its buffer, or F for the line's last part; anything else
// counts as F, as in the kubelet. Read joins the parts of a line, per
// stream, into one Line whose Time is that of the first part. A line
// whose parts add up to MaxLineBytes is emitted in pieces, each ended by
// the part that makes it reach MaxLineBytes, so memory stays bounded; a
// tail counts such a line once but emits its pieces.
//
// A line that does not parse (no timestamp, an unknown stream, no tag) is
// an error wrapping ErrMalformed that names the file and the line's byte
// offset, as in the kubelet: a runtime writes whole lines, so a malformed
// one means a damaged file, and skipping it would lose output silently.
// The one exception is the file's last line before it has its newline: it
// is still being written, so a reader that does not follow parses it if it
// can and ignores it otherwise.
//
// # Tail, since and limit
//
// Options.TailLines keeps the last N lines of the file. Read finds them by
// reading the file backwards in chunks from its end, so the cost depends
// on N and the lines' size, not on the file's. Lines are ordered by the
// position of their last part, and a line written in parts counts once,
// with all its parts, even when the other stream's lines are interleaved
// with them. A line that has no F part yet counts by the position of its
// last P part and, without Follow, is emitted after the complete ones;
// with Follow it is kept whole but not counted, and emitted when it ends.
// Without Follow, the line being written after the last newline, when it
// parses, counts as the file's last raw line, so a tail never holds a
// fragment of a line whose first parts it left out.
// As in the kubelet, TailLines selects lines first and SinceTime then
// drops those that started before it. LimitBytes stops the output after
// that many bytes of content (newlines are not counted), cutting the last
// line.
//
// # Follow
//
// With Options.Follow, Read continues at the end of the file, polling it
// every Options.PollInterval (100 ms by default; no watcher goroutine, so
// nothing outlives the call), until ctx ends (Read returns ctx.Err()),
// emit fails, LimitBytes is reached, or Options.Finished reports that no
// more output will come (Read then drains the file and returns nil). It
// follows
//
//   - rotation: the kubelet renames 0.log to 0.log.<timestamp> and asks the
//     runtime (ReopenContainerLog) to create a new 0.log. When the path names
//     another file than the one open, Read drains the open (renamed) file
//     and continues from the start of the new one. A file truncated in place
//     (copytruncate) is read again from its start.
//   - restarts of the container: each instance of a container writes its
//     own file, <restartCount>.log, in the container's log directory. At the
//     end of the current file Read asks Options.NextPath for the next
//     instance's file (NextInstancePath by default: the lowest-numbered
//     <m>.log with m greater than the current one's, which tolerates gaps in
//     restart counts). When there is one, the current instance has ended, so
//     Read drains its file, ends any line it left unfinished, and continues
//     with the next file. The default needs no runtime access and works for
//     any path laid out as the kubelet's; a caller that knows the
//     container's log path from the runtime can pass its own NextPath.
package logs
