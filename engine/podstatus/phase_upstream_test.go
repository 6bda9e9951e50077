package podstatus

// The kubelet's getPhase test tables, ported from
// k8s.io/kubernetes pkg/kubelet/kubelet_pods_test.go at v1.37.2
// (TestPodPhaseWith…; Copyright The Kubernetes Authors, Apache License
// 2.0), with their status helpers. Only the logger and the assertion
// differ; the table of RestartAllContainers is left out, as podsync
// refuses that action of the container restart rules (KEP-5307).

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

var containerRestartPolicyAlways = corev1.ContainerRestartPolicyAlways

func waitingState(cName string) corev1.ContainerStatus {
	return waitingStateWithReason(cName, "")
}
func waitingStateWithReason(cName, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: cName,
		State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: reason},
		},
	}
}
func waitingStateWithLastTermination(cName string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: cName,
		State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{},
		},
		LastTerminationState: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0,
			},
		},
	}
}
func waitingStateWithNonZeroTermination(cName string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: cName,
		State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{},
		},
		LastTerminationState: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{
				ExitCode: -1,
			},
		},
	}
}
func runningState(cName string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: cName,
		State: corev1.ContainerState{
			Running: &corev1.ContainerStateRunning{},
		},
	}
}
func startedState(cName string) corev1.ContainerStatus {
	started := true
	return corev1.ContainerStatus{
		Name: cName,
		State: corev1.ContainerState{
			Running: &corev1.ContainerStateRunning{},
		},
		Started: &started,
	}
}
func stoppedState(cName string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: cName,
		State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{},
		},
	}
}
func succeededState(cName string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: cName,
		State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0,
			},
		},
	}
}
func failedState(cName string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: cName,
		State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{
				ExitCode: -1,
			},
		},
	}
}
func TestPodPhaseWithRestartAlways(t *testing.T) {
	desiredState := corev1.PodSpec{
		NodeName: "machine",
		Containers: []corev1.Container{
			{Name: "containerA"},
			{Name: "containerB"},
		},
		RestartPolicy: corev1.RestartPolicyAlways,
	}

	tests := []struct {
		pod           *corev1.Pod
		podIsTerminal bool
		status        corev1.PodPhase
		test          string
	}{
		{
			&corev1.Pod{Spec: desiredState, Status: corev1.PodStatus{}},
			false,
			corev1.PodPending,
			"waiting",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						runningState("containerB"),
					},
				},
			},
			false,
			corev1.PodRunning,
			"all running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						stoppedState("containerA"),
						stoppedState("containerB"),
					},
				},
			},
			false,
			corev1.PodRunning,
			"all stopped with restart always",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			true,
			corev1.PodSucceeded,
			"all succeeded with restart always, but the pod is terminal",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerA"),
						failedState("containerB"),
					},
				},
			},
			true,
			corev1.PodFailed,
			"all stopped with restart always, but the pod is terminal",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						stoppedState("containerB"),
					},
				},
			},
			false,
			corev1.PodRunning,
			"mixed state #1 with restart always",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
					},
				},
			},
			false,
			corev1.PodPending,
			"mixed state #2 with restart always",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						waitingState("containerB"),
					},
				},
			},
			false,
			corev1.PodPending,
			"mixed state #3 with restart always",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						waitingStateWithLastTermination("containerB"),
					},
				},
			},
			false,
			corev1.PodRunning,
			"backoff crashloop container with restart always",
		},
	}
	for _, test := range tests {
		status := getPhase(test.pod, test.pod.Status.ContainerStatuses, test.podIsTerminal, false)
		if status != test.status {
			t.Errorf("[test %s] phase = %s, want %s", test.test, status, test.status)
		}
	}
}

func TestPodPhaseWithRestartAlwaysInitContainers(t *testing.T) {
	desiredState := corev1.PodSpec{
		NodeName: "machine",
		InitContainers: []corev1.Container{
			{Name: "containerX"},
		},
		Containers: []corev1.Container{
			{Name: "containerA"},
			{Name: "containerB"},
		},
		RestartPolicy: corev1.RestartPolicyAlways,
	}

	tests := []struct {
		pod    *corev1.Pod
		status corev1.PodPhase
		test   string
	}{
		{&corev1.Pod{Spec: desiredState, Status: corev1.PodStatus{}}, corev1.PodPending, "empty, waiting"},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						runningState("containerX"),
					},
				},
			},
			corev1.PodPending,
			"init container running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						failedState("containerX"),
					},
				},
			},
			corev1.PodPending,
			"init container terminated non-zero",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingStateWithLastTermination("containerX"),
					},
				},
			},
			corev1.PodPending,
			"init container waiting, terminated zero",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingStateWithNonZeroTermination("containerX"),
					},
				},
			},
			corev1.PodPending,
			"init container waiting, terminated non-zero",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingState("containerX"),
					},
				},
			},
			corev1.PodPending,
			"init container waiting, not terminated",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						runningState("containerB"),
					},
				},
			},
			corev1.PodRunning,
			"init container succeeded",
		},
	}
	for _, test := range tests {
		statusInfo := test.pod.Status.InitContainerStatuses
		statusInfo = append(statusInfo, test.pod.Status.ContainerStatuses...)
		status := getPhase(test.pod, statusInfo, false, false)
		if status != test.status {
			t.Errorf("[test %s] phase = %s, want %s", test.test, status, test.status)
		}
	}
}

func TestPodPhaseWithRestartAlwaysRestartableInitContainers(t *testing.T) {
	desiredState := corev1.PodSpec{
		NodeName: "machine",
		InitContainers: []corev1.Container{
			{Name: "containerX", RestartPolicy: &containerRestartPolicyAlways},
		},
		Containers: []corev1.Container{
			{Name: "containerA"},
			{Name: "containerB"},
		},
		RestartPolicy: corev1.RestartPolicyAlways,
	}

	tests := []struct {
		pod               *corev1.Pod
		podIsTerminal     bool
		podHasInitialized bool
		status            corev1.PodPhase
		test              string
	}{
		{&corev1.Pod{Spec: desiredState, Status: corev1.PodStatus{}}, false, false, corev1.PodPending, "empty, waiting"},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						runningState("containerX"),
					},
				},
			},
			false,
			false,
			corev1.PodPending,
			"restartable init container running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						stoppedState("containerX"),
					},
				},
			},
			false,
			false,
			corev1.PodPending,
			"restartable init container stopped",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingStateWithLastTermination("containerX"),
					},
				},
			},
			false,
			false,
			corev1.PodPending,
			"restartable init container waiting, terminated zero",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingStateWithNonZeroTermination("containerX"),
					},
				},
			},
			false,
			false,
			corev1.PodPending,
			"restartable init container waiting, terminated non-zero",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingState("containerX"),
					},
				},
			},
			false,
			false,
			corev1.PodPending,
			"restartable init container waiting, not terminated",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						startedState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
					},
				},
			},
			false,
			true,
			corev1.PodPending,
			"restartable init container started, 1/2 regular container running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						startedState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						runningState("containerB"),
					},
				},
			},
			false,
			true,
			corev1.PodRunning,
			"restartable init container started, all regular containers running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						runningState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						runningState("containerB"),
					},
				},
			},
			false,
			true,
			corev1.PodRunning,
			"restartable init container running, all regular containers running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						stoppedState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						runningState("containerB"),
					},
				},
			},
			false,
			true,
			corev1.PodRunning,
			"restartable init container stopped, all regular containers running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingStateWithLastTermination("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						runningState("containerB"),
					},
				},
			},
			false,
			true,
			corev1.PodRunning,
			"backoff crashloop restartable init container, all regular containers running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						failedState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			true,
			true,
			corev1.PodSucceeded,
			"all regular containers succeeded and restartable init container failed with restart always, but the pod is terminal",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			true,
			true,
			corev1.PodSucceeded,
			"all regular containers succeeded and restartable init container succeeded with restart always, but the pod is terminal",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						runningState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						runningState("containerB"),
					},
				},
			},
			false,
			false,
			corev1.PodPending,
			"re-initializing the pod after the sandbox is recreated",
		},
	}
	for _, test := range tests {
		statusInfo := test.pod.Status.InitContainerStatuses
		statusInfo = append(statusInfo, test.pod.Status.ContainerStatuses...)
		status := getPhase(test.pod, statusInfo, test.podIsTerminal, test.podHasInitialized)
		if status != test.status {
			t.Errorf("[test %s] phase = %s, want %s", test.test, status, test.status)
		}
	}
}

func TestPodPhaseWithRestartAlwaysAndPodHasRun(t *testing.T) {
	desiredState := corev1.PodSpec{
		NodeName: "machine",
		InitContainers: []corev1.Container{
			{Name: "containerX"},
			{Name: "containerY", RestartPolicy: &containerRestartPolicyAlways},
		},
		Containers: []corev1.Container{
			{Name: "containerA"},
		},
		RestartPolicy: corev1.RestartPolicyAlways,
	}

	tests := []struct {
		pod               *corev1.Pod
		podHasInitialized bool
		status            corev1.PodPhase
		test              string
	}{
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						runningState("containerX"),
						runningState("containerY"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
					},
				},
			},
			false,
			corev1.PodPending,
			"regular init containers, restartable init container and regular container are all running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						runningState("containerX"),
						runningState("containerY"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						stoppedState("containerA"),
					},
				},
			},
			false,
			corev1.PodPending,
			"regular containers is stopped, restartable init container and regular int container are both running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerX"),
						runningState("containerY"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						stoppedState("containerA"),
					},
				},
			},
			false,
			corev1.PodPending,
			"re-created sandbox: regular init container is succeeded, restartable init container is running, old regular containers is stopped",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerX"),
						runningState("containerY"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						stoppedState("containerA"),
					},
				},
			},
			true,
			corev1.PodRunning,
			"regular init container is succeeded, restartable init container is running, regular containers is stopped",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerX"),
						runningState("containerY"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
					},
				},
			},
			true,
			corev1.PodRunning,
			"regular init container is succeeded, restartable init container and regular containers are both running",
		},
	}
	for _, test := range tests {
		statusInfo := test.pod.Status.InitContainerStatuses
		statusInfo = append(statusInfo, test.pod.Status.ContainerStatuses...)
		status := getPhase(test.pod, statusInfo, false, test.podHasInitialized)
		if status != test.status {
			t.Errorf("[test %s] phase = %s, want %s", test.test, status, test.status)
		}
	}
}

func TestPodPhaseWithRestartNever(t *testing.T) {
	desiredState := corev1.PodSpec{
		NodeName: "machine",
		Containers: []corev1.Container{
			{Name: "containerA"},
			{Name: "containerB"},
		},
		RestartPolicy: corev1.RestartPolicyNever,
	}

	tests := []struct {
		pod    *corev1.Pod
		status corev1.PodPhase
		test   string
	}{
		{&corev1.Pod{Spec: desiredState, Status: corev1.PodStatus{}}, corev1.PodPending, "waiting"},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						runningState("containerB"),
					},
				},
			},
			corev1.PodRunning,
			"all running with restart never",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			corev1.PodSucceeded,
			"all succeeded with restart never",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						failedState("containerA"),
						failedState("containerB"),
					},
				},
			},
			corev1.PodFailed,
			"all failed with restart never",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			corev1.PodRunning,
			"mixed state #1 with restart never",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
					},
				},
			},
			corev1.PodPending,
			"mixed state #2 with restart never",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						waitingState("containerB"),
					},
				},
			},
			corev1.PodPending,
			"mixed state #3 with restart never",
		},
	}
	for _, test := range tests {
		status := getPhase(test.pod, test.pod.Status.ContainerStatuses, false, false)
		if status != test.status {
			t.Errorf("[test %s] phase = %s, want %s", test.test, status, test.status)
		}
	}
}

func TestPodPhaseWithRestartNeverInitContainers(t *testing.T) {
	desiredState := corev1.PodSpec{
		NodeName: "machine",
		InitContainers: []corev1.Container{
			{Name: "containerX"},
		},
		Containers: []corev1.Container{
			{Name: "containerA"},
			{Name: "containerB"},
		},
		RestartPolicy: corev1.RestartPolicyNever,
	}

	tests := []struct {
		pod    *corev1.Pod
		status corev1.PodPhase
		test   string
	}{
		{&corev1.Pod{Spec: desiredState, Status: corev1.PodStatus{}}, corev1.PodPending, "empty, waiting"},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						runningState("containerX"),
					},
				},
			},
			corev1.PodPending,
			"init container running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						failedState("containerX"),
					},
				},
			},
			corev1.PodFailed,
			"init container terminated non-zero",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingStateWithLastTermination("containerX"),
					},
				},
			},
			corev1.PodPending,
			"init container waiting, terminated zero",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingStateWithNonZeroTermination("containerX"),
					},
				},
			},
			corev1.PodFailed,
			"init container waiting, terminated non-zero",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingState("containerX"),
					},
				},
			},
			corev1.PodPending,
			"init container waiting, not terminated",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						runningState("containerB"),
					},
				},
			},
			corev1.PodRunning,
			"init container succeeded",
		},
	}
	for _, test := range tests {
		statusInfo := test.pod.Status.InitContainerStatuses
		statusInfo = append(statusInfo, test.pod.Status.ContainerStatuses...)
		status := getPhase(test.pod, statusInfo, false, false)
		if status != test.status {
			t.Errorf("[test %s] phase = %s, want %s", test.test, status, test.status)
		}
	}
}

func TestPodPhaseWithRestartNeverRestartableInitContainers(t *testing.T) {
	desiredState := corev1.PodSpec{
		NodeName: "machine",
		InitContainers: []corev1.Container{
			{Name: "containerX", RestartPolicy: &containerRestartPolicyAlways},
		},
		Containers: []corev1.Container{
			{Name: "containerA"},
			{Name: "containerB"},
		},
		RestartPolicy: corev1.RestartPolicyNever,
	}

	tests := []struct {
		pod               *corev1.Pod
		podHasInitialized bool
		status            corev1.PodPhase
		test              string
	}{
		{&corev1.Pod{Spec: desiredState, Status: corev1.PodStatus{}}, false, corev1.PodPending, "empty, waiting"},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						runningState("containerX"),
					},
				},
			},
			false,
			corev1.PodPending,
			"restartable init container running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						stoppedState("containerX"),
					},
				},
			},
			false,
			corev1.PodPending,
			"restartable init container stopped",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingStateWithLastTermination("containerX"),
					},
				},
			},
			false,
			corev1.PodPending,
			"restartable init container waiting, terminated zero",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingStateWithNonZeroTermination("containerX"),
					},
				},
			},
			false,
			corev1.PodPending,
			"restartable init container waiting, terminated non-zero",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingState("containerX"),
					},
				},
			},
			false,
			corev1.PodPending,
			"restartable init container waiting, not terminated",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						startedState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
					},
				},
			},
			true,
			corev1.PodPending,
			"restartable init container started, one main container running",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						startedState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			true,
			corev1.PodRunning,
			"restartable init container started, main containers succeeded",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						runningState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			true,
			corev1.PodRunning,
			"restartable init container re-running, main containers succeeded",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			true,
			corev1.PodSucceeded,
			"all containers succeeded",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						failedState("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			true,
			corev1.PodSucceeded,
			"restartable init container terminated non-zero, main containers succeeded",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingStateWithLastTermination("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			true,
			corev1.PodSucceeded,
			"backoff crashloop restartable init container, main containers succeeded",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					InitContainerStatuses: []corev1.ContainerStatus{
						waitingStateWithNonZeroTermination("containerX"),
					},
					ContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			true,
			corev1.PodSucceeded,
			"backoff crashloop with non-zero restartable init container, main containers succeeded",
		},
	}
	for _, test := range tests {
		statusInfo := test.pod.Status.InitContainerStatuses
		statusInfo = append(statusInfo, test.pod.Status.ContainerStatuses...)
		status := getPhase(test.pod, statusInfo, false, test.podHasInitialized)
		if status != test.status {
			t.Errorf("[test %s] phase = %s, want %s", test.test, status, test.status)
		}
	}
}

func TestPodPhaseWithRestartOnFailure(t *testing.T) {
	desiredState := corev1.PodSpec{
		NodeName: "machine",
		Containers: []corev1.Container{
			{Name: "containerA"},
			{Name: "containerB"},
		},
		RestartPolicy: corev1.RestartPolicyOnFailure,
	}

	tests := []struct {
		pod    *corev1.Pod
		status corev1.PodPhase
		test   string
	}{
		{&corev1.Pod{Spec: desiredState, Status: corev1.PodStatus{}}, corev1.PodPending, "waiting"},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						runningState("containerB"),
					},
				},
			},
			corev1.PodRunning,
			"all running with restart onfailure",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						succeededState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			corev1.PodSucceeded,
			"all succeeded with restart onfailure",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						failedState("containerA"),
						failedState("containerB"),
					},
				},
			},
			corev1.PodRunning,
			"all failed with restart never",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						succeededState("containerB"),
					},
				},
			},
			corev1.PodRunning,
			"mixed state #1 with restart onfailure",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
					},
				},
			},
			corev1.PodPending,
			"mixed state #2 with restart onfailure",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						waitingState("containerB"),
					},
				},
			},
			corev1.PodPending,
			"mixed state #3 with restart onfailure",
		},
		{
			&corev1.Pod{
				Spec: desiredState,
				Status: corev1.PodStatus{
					ContainerStatuses: []corev1.ContainerStatus{
						runningState("containerA"),
						waitingStateWithLastTermination("containerB"),
					},
				},
			},
			corev1.PodRunning,
			"backoff crashloop container with restart onfailure",
		},
	}
	for _, test := range tests {
		status := getPhase(test.pod, test.pod.Status.ContainerStatuses, false, false)
		if status != test.status {
			t.Errorf("[test %s] phase = %s, want %s", test.test, status, test.status)
		}
	}
}

func TestPodPhaseWithContainerRestartPolicy(t *testing.T) {
	var (
		containerRestartPolicyOnFailure = corev1.ContainerRestartPolicyOnFailure
		containerRestartPolicyNever     = corev1.ContainerRestartPolicyNever
	)
	tests := []struct {
		name          string
		spec          *corev1.PodSpec
		statuses      []corev1.ContainerStatus
		podIsTerminal bool
		expectedPhase corev1.PodPhase
	}{
		{
			name: "container with restart policy Never failed",
			spec: &corev1.PodSpec{
				Containers: []corev1.Container{{
					Name:          "failed-container",
					RestartPolicy: &containerRestartPolicyNever,
				}},
				RestartPolicy: corev1.RestartPolicyAlways,
			},
			statuses:      []corev1.ContainerStatus{failedState("failed-container")},
			expectedPhase: corev1.PodFailed,
		},
		{
			name: "container with restart policy OnFailure failed",
			spec: &corev1.PodSpec{
				Containers: []corev1.Container{{
					Name:          "failed-container",
					RestartPolicy: &containerRestartPolicyOnFailure,
				}},
				RestartPolicy: corev1.RestartPolicyAlways,
			},
			statuses: []corev1.ContainerStatus{
				failedState("failed-container"),
			},
			expectedPhase: corev1.PodRunning,
		},
		{
			name: "container with restart policy Always failed",
			spec: &corev1.PodSpec{
				Containers: []corev1.Container{{
					Name:          "failed-container",
					RestartPolicy: &containerRestartPolicyAlways,
				}},
				RestartPolicy: corev1.RestartPolicyAlways,
			},
			statuses: []corev1.ContainerStatus{
				failedState("failed-container"),
			},
			expectedPhase: corev1.PodRunning,
		},
		{
			name: "At least one container with restartable container-level restart policy failed",
			// Spec to simulate containerB having RestartPolicy: Always
			spec: &corev1.PodSpec{
				Containers: []corev1.Container{
					{
						Name:          "containerA",
						RestartPolicy: &containerRestartPolicyAlways,
					},
					{Name: "containerB"},
				},
				RestartPolicy: corev1.RestartPolicyNever,
			},
			statuses: []corev1.ContainerStatus{
				succeededState("containerA"),
				failedState("containerB"),
			},
			expectedPhase: corev1.PodRunning,
		},
		{
			name: "All containers without restartable container-level restart policy failed",
			spec: &corev1.PodSpec{
				Containers: []corev1.Container{
					{
						Name:          "containerA",
						RestartPolicy: &containerRestartPolicyNever,
					},
					{
						Name:          "containerB",
						RestartPolicy: &containerRestartPolicyOnFailure,
					},
				},
				RestartPolicy: corev1.RestartPolicyAlways,
			},
			statuses: []corev1.ContainerStatus{
				failedState("containerA"),
				succeededState("containerB"),
			},
			expectedPhase: corev1.PodFailed,
		},
		{
			name: "All containers succeeded",
			spec: &corev1.PodSpec{
				Containers: []corev1.Container{
					{
						Name:          "containerA",
						RestartPolicy: &containerRestartPolicyNever,
					},
					{
						Name:          "containerB",
						RestartPolicy: &containerRestartPolicyOnFailure,
					},
				},
				RestartPolicy: corev1.RestartPolicyAlways,
			},
			statuses: []corev1.ContainerStatus{
				succeededState("containerA"),
				succeededState("containerB"),
			},
			expectedPhase: corev1.PodSucceeded,
		},
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				Spec: *tc.spec,
				Status: corev1.PodStatus{
					ContainerStatuses: tc.statuses,
				},
			}
			if phase := getPhase(pod, tc.statuses, tc.podIsTerminal, true); phase != tc.expectedPhase {
				t.Errorf("phase = %s, want %s", phase, tc.expectedPhase)
			}
		})
	}
}

func TestPodPhaseWithContainerRestartPolicyInitContainers(t *testing.T) {
	var (
		containerRestartPolicyOnFailure = corev1.ContainerRestartPolicyOnFailure
		containerRestartPolicyNever     = corev1.ContainerRestartPolicyNever
	)
	tests := []struct {
		name          string
		spec          *corev1.PodSpec
		statuses      []corev1.ContainerStatus
		podIsTerminal bool
		expectedPhase corev1.PodPhase
	}{
		{
			name: "init container with restart policy Never failed",
			spec: &corev1.PodSpec{
				InitContainers: []corev1.Container{{
					Name:          "failed-container",
					RestartPolicy: &containerRestartPolicyNever,
				}},
				Containers:    []corev1.Container{{Name: "container"}},
				RestartPolicy: corev1.RestartPolicyAlways,
			},
			statuses:      []corev1.ContainerStatus{failedState("failed-container")},
			expectedPhase: corev1.PodFailed,
		},
		{
			name: "init container with restart policy OnFailure failed",
			spec: &corev1.PodSpec{
				InitContainers: []corev1.Container{{
					Name:          "failed-container",
					RestartPolicy: &containerRestartPolicyOnFailure,
				}},
				Containers:    []corev1.Container{{Name: "container"}},
				RestartPolicy: corev1.RestartPolicyNever,
			},
			statuses: []corev1.ContainerStatus{
				failedState("failed-container"),
			},
			expectedPhase: corev1.PodPending,
		},
		{
			name: "container with restart policy Always failed",
			spec: &corev1.PodSpec{
				InitContainers: []corev1.Container{{
					Name:          "failed-container",
					RestartPolicy: &containerRestartPolicyAlways,
				}},
				Containers:    []corev1.Container{{Name: "container"}},
				RestartPolicy: corev1.RestartPolicyNever,
			},
			statuses: []corev1.ContainerStatus{
				failedState("failed-container"),
			},
			expectedPhase: corev1.PodPending,
		},
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				Spec: *tc.spec,
				Status: corev1.PodStatus{
					ContainerStatuses: tc.statuses,
				},
			}
			if phase := getPhase(pod, tc.statuses, tc.podIsTerminal, true); phase != tc.expectedPhase {
				t.Errorf("phase = %s, want %s", phase, tc.expectedPhase)
			}
		})
	}
}
