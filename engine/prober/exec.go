package prober

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"
)

// execSlack is how long past the probe's timeout an ExecSync may take
// before its context ends, for a runtime that does not enforce the timeout
// itself. It is cri-client's default request timeout, which the kubelet
// adds to the probe's timeout the same way.
const execSlack = 2 * time.Minute

// execProbe runs the command in the container through the runtime (the
// kubelet's exec prober over CRI ExecSync): exit status 0 is success, any
// other status is failure, and so is a command that ran past timeout.
// Other errors are probe errors.
func (p *prober) execProbe(ctx context.Context, action *corev1.ExecAction, t target, timeout time.Duration) (outcome, string, error) {
	if p.runtime == nil {
		return outcomeUnknown, "", errNoRuntime
	}
	cmd := expandCommand(action.Command, t.container.Env)
	ctx, cancel := context.WithTimeout(ctx, timeout+execSlack)
	defer cancel()
	stdout, stderr, err := p.runtime.ExecSync(ctx, t.containerID, cmd, timeout)
	output := combinedOutput(stdout, stderr)
	if err == nil {
		return outcomeSuccess, output, nil
	}
	var exit utilexec.ExitError
	if errors.As(err, &exit) {
		if exit.ExitStatus() == 0 {
			return outcomeSuccess, output, nil
		}
		return outcomeFailure, output, nil
	}
	if p.isExecTimeout(err) {
		// The output of a command that timed out is the error, as in the
		// kubelet.
		return outcomeFailure, err.Error(), nil
	}
	return outcomeUnknown, "", fmt.Errorf("exec %q: %w", strings.Join(cmd, " "), err)
}

// combinedOutput is stdout then stderr, cut at maxOutputBytes (the kubelet
// appends them the same way; CRI ExecSync does not interleave them).
func combinedOutput(stdout, stderr []byte) string {
	n := min(len(stdout), maxOutputBytes)
	m := min(len(stderr), maxOutputBytes-n)
	return string(stdout[:n]) + string(stderr[:m])
}
