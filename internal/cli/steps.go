package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
)

// containerKind names a container type in prose: "container", "init
// container", "sidecar" or "debug container".
func containerKind(t podsyncv1.ContainerType) string {
	switch t {
	case podsyncv1.ContainerType_CONTAINER_TYPE_INIT:
		return "init container"
	case podsyncv1.ContainerType_CONTAINER_TYPE_SIDECAR:
		return "sidecar"
	case podsyncv1.ContainerType_CONTAINER_TYPE_EPHEMERAL:
		return "debug container"
	}
	return "container"
}

// stepPhrase says what a step did, such as "start sidecar log-shipper".
func stepPhrase(s *podsyncv1.SyncStep) string {
	switch s.GetAction() {
	case podsyncv1.StepAction_STEP_ACTION_KILL_POD_SANDBOX:
		// A pod kill stops every sandbox of the pod in one step whose
		// target is the pod's UID; the removal of one sandbox names it.
		if id := s.GetSandboxId(); id != "" {
			return "kill sandbox " + shortID(id)
		}
		return "kill sandboxes"
	case podsyncv1.StepAction_STEP_ACTION_KILL_CONTAINER:
		return "kill " + containerKind(s.GetContainerType()) + " " + s.GetTarget()
	case podsyncv1.StepAction_STEP_ACTION_CREATE_POD_SANDBOX:
		return "create sandbox"
	case podsyncv1.StepAction_STEP_ACTION_CONFIG_POD_SANDBOX:
		return "configure sandbox"
	case podsyncv1.StepAction_STEP_ACTION_START_CONTAINER:
		return "start " + containerKind(s.GetContainerType()) + " " + s.GetTarget()
	case podsyncv1.StepAction_STEP_ACTION_PULL_IMAGE:
		return "pull image"
	case podsyncv1.StepAction_STEP_ACTION_REMOVE_CONTAINER:
		return "remove " + containerKind(s.GetContainerType()) + " instance " + s.GetTarget()
	case podsyncv1.StepAction_STEP_ACTION_UPDATE_CONTAINER_RESOURCES:
		return "resize " + containerKind(s.GetContainerType()) + " " + s.GetTarget()
	case podsyncv1.StepAction_STEP_ACTION_UPDATE_POD_SANDBOX_RESOURCES:
		return "update pod resources"
	}
	return strings.ToLower(strings.TrimPrefix(s.GetAction().String(), "STEP_ACTION_")) + " " + s.GetTarget()
}

// stepOutcome is the outcome column of a step and the details after it:
// "ok" with the attempt and the reason (why a sandbox was created, a
// container started or killed), "FAILED" or "backing off" with the
// reason, message and next retry.
func stepOutcome(s *podsyncv1.SyncStep, now time.Time) (outcome, details string) {
	var parts []string
	ok := s.GetOutcome() == podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED
	switch s.GetAction() {
	case podsyncv1.StepAction_STEP_ACTION_PULL_IMAGE:
		parts = append(parts, s.GetTarget())
	case podsyncv1.StepAction_STEP_ACTION_CREATE_POD_SANDBOX:
		if ok {
			parts = append(parts, fmt.Sprintf("attempt %d", s.GetAttempt()))
		}
	case podsyncv1.StepAction_STEP_ACTION_START_CONTAINER:
		if ok && s.GetAttempt() > 0 {
			parts = append(parts, fmt.Sprintf("restart %d", s.GetAttempt()))
		}
	}
	switch {
	case ok && s.GetReason() != "":
		parts = append(parts, "reason: "+s.GetReason())
	case !ok:
		why := s.GetReason()
		if m := s.GetMessage(); m != "" {
			if why != "" {
				why += ": "
			}
			why += oneLine(m)
		}
		if why != "" {
			parts = append(parts, why)
		}
		if t := s.GetNextRetryTime(); t != nil {
			parts = append(parts, "retry "+until(t.AsTime(), now))
		}
	}
	switch s.GetOutcome() {
	case podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED:
		outcome = "ok"
	case podsyncv1.StepOutcome_STEP_OUTCOME_FAILED:
		outcome = "FAILED"
	case podsyncv1.StepOutcome_STEP_OUTCOME_BACKING_OFF:
		outcome = "backing off"
	default:
		outcome = "?"
	}
	return outcome, strings.Join(parts, ", ")
}

// writeStep writes one step as a line: the phrase padded to a column, the
// outcome and the details. prefix (the pod, for RunPods) comes first.
func writeStep(w io.Writer, prefix string, s *podsyncv1.SyncStep, now time.Time, p palette) error {
	outcome, details := stepOutcome(s, now)
	// Pad before colouring: escape codes have no width on a terminal.
	padded := fmt.Sprintf("%-11s", outcome)
	switch s.GetOutcome() {
	case podsyncv1.StepOutcome_STEP_OUTCOME_SUCCEEDED:
		padded = p.good(outcome) + padded[len(outcome):]
	case podsyncv1.StepOutcome_STEP_OUTCOME_FAILED:
		padded = p.bad(outcome) + padded[len(outcome):]
	case podsyncv1.StepOutcome_STEP_OUTCOME_BACKING_OFF:
		padded = p.warn(outcome) + padded[len(outcome):]
	}
	line := fmt.Sprintf("%s%-36s %s %s", prefix, stepPhrase(s), padded, details)
	_, err := io.WriteString(w, strings.TrimRight(line, " ")+"\n")
	return err
}

// until renders a future time relative to now: "in 8s", or "now".
func until(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	if d <= 0 {
		return "now"
	}
	return "in " + d.String()
}

// oneLine joins the lines of a message.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.TrimSpace(s)), " ")
}

// writePlan renders a plan as a diff: "+" for what would be created or
// started, "-" for what would be killed or removed, "~" for a sandbox
// re-created or a container resized in place, "!" for a back-off, "="
// when nothing would change.
func writePlan(w io.Writer, resp *podsyncv1.PlanPodResponse, now time.Time, p palette) error {
	ref, plan := resp.GetPod(), resp.GetPlan()
	var b strings.Builder
	state := "known to podsyncd"
	if !resp.GetKnown() {
		state = "new pod"
	}
	fmt.Fprintf(&b, "%s %s/%s (%s, uid %s):\n", p.bold("plan for"), ref.GetNamespace(), ref.GetName(), state, ref.GetUid())
	add := func(sign, text string) {
		switch sign {
		case "+":
			sign = p.good(sign)
		case "-":
			sign = p.bad(sign)
		case "~", "!":
			sign = p.warn(sign)
		}
		fmt.Fprintf(&b, "  %s %s\n", sign, text)
	}
	// The kubelet's plan kills the pod whenever it creates a sandbox; for
	// a pod that is not there yet there is nothing to kill.
	if plan.GetKillPod() && resp.GetKnown() {
		add("-", fmt.Sprintf("kill pod: every container and sandbox (reason: %s)", orNone(plan.GetKillPodReason())))
	}
	for _, k := range plan.GetContainersToKill() {
		add("-", planKillText(k))
	}
	if sb := plan.GetSandbox(); sb.GetCreate() {
		sign, text := planSandboxLine(sb)
		add(sign, text)
	}
	for _, id := range plan.GetInitInstancesToRemove() {
		add("-", "remove dead init container instance "+shortID(id))
	}
	starts := append(append([]*podsyncv1.ContainerStart{}, plan.GetInitContainersToStart()...), plan.GetContainersToStart()...)
	for _, s := range starts {
		text := fmt.Sprintf("start %s %s (reason: %s", containerKind(s.GetContainerType()), s.GetName(), s.GetReason())
		if s.GetRestartCount() > 0 {
			text += fmt.Sprintf(", restart %d", s.GetRestartCount())
		}
		add("+", text+")")
	}
	for _, r := range plan.GetContainersToResize() {
		add("~", planResizeText(r))
	}
	for _, bo := range plan.GetBackingOff() {
		add("!", planBackOffText(bo, now))
	}
	if plan.GetUpToDate() {
		add("=", "up to date: a sync would change nothing")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// planResizeText is a plan's line for a container resized in place: the
// CPU and memory values that change, current to desired.
func planResizeText(r *podsyncv1.ContainerResize) string {
	var changes []string
	for _, kind := range []string{"requests", "limits"} {
		cur, want := r.GetCurrent().GetRequests(), r.GetDesired().GetRequests()
		if kind == "limits" {
			cur, want = r.GetCurrent().GetLimits(), r.GetDesired().GetLimits()
		}
		for _, res := range []string{"cpu", "memory"} {
			if cur[res] != want[res] {
				changes = append(changes, fmt.Sprintf("%s %s %s → %s", res, strings.TrimSuffix(kind, "s"), orNone(cur[res]), orNone(want[res])))
			}
		}
	}
	text := fmt.Sprintf("resize %s %s", containerKind(r.GetContainerType()), r.GetName())
	if id := r.GetContainerId(); id != "" {
		text += " " + shortID(id)
	}
	return text + " in place (" + strings.Join(changes, ", ") + ")"
}

// planKillText is a plan's line for a container to kill: which one, why
// (the changed fields, else the message), and whether it starts again.
func planKillText(k *podsyncv1.ContainerKill) string {
	text := fmt.Sprintf("kill %s %s", containerKind(k.GetContainerType()), k.GetName())
	if id := k.GetContainerId(); id != "" {
		text += " " + shortID(id)
	}
	why := "reason: " + k.GetReason()
	if len(k.GetChangedFields()) > 0 {
		why += "; changed: " + strings.Join(k.GetChangedFields(), ", ")
	}
	if m := k.GetMessage(); m != "" && len(k.GetChangedFields()) == 0 {
		why += "; " + oneLine(m)
	}
	text += " (" + why + ")"
	if k.GetRestart() {
		text += ", then start it again"
	}
	return text
}

// planSandboxLine is a plan's line for a sandbox to create: "+" for a
// pod's first, "~" for a re-creation, with the sandboxes it kills.
func planSandboxLine(sb *podsyncv1.SandboxDecision) (sign, text string) {
	reason := fmt.Sprintf("(reason: %s)", sb.GetReason())
	if sb.GetAttempt() == 0 && len(sb.GetKillSandboxIds()) == 0 {
		return "+", "create sandbox, attempt 0 " + reason
	}
	text = fmt.Sprintf("sandbox recreate attempt %d %s", sb.GetAttempt(), reason)
	if ids := sb.GetKillSandboxIds(); len(ids) > 0 {
		short := make([]string, len(ids))
		for i, id := range ids {
			short[i] = shortID(id)
		}
		text += ", killing " + strings.Join(short, ", ")
	}
	return "~", text
}

// planBackOffText is a plan's line for a container that waits out a
// back-off, with its next retry and its delay.
func planBackOffText(bo *podsyncv1.ContainerBackoff, now time.Time) string {
	text := fmt.Sprintf("%s %s waits: %s", containerKind(bo.GetContainerType()), bo.GetName(), bo.GetReason())
	var when []string
	if t := bo.GetNextRetryTime(); t != nil {
		when = append(when, "retry "+until(t.AsTime(), now))
	}
	if d := bo.GetDelay(); d != nil {
		when = append(when, "back-off "+d.AsDuration().Round(100*time.Millisecond).String())
	}
	if len(when) > 0 {
		text += " (" + strings.Join(when, ", ") + ")"
	}
	return text
}
