package ctrdevents

import (
	"testing"

	apievents "github.com/containerd/containerd/api/events"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/types/known/anypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/podsync/podsync/engine/watch"
)

func TestToEvent(t *testing.T) {
	const (
		started = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
		stopped = runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT
		deleted = runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
	)
	for _, tc := range []struct {
		name  string
		topic string
		event any
		want  watch.RuntimeEvent
		ok    bool
	}{
		{"task started", "/tasks/start", &apievents.TaskStart{ContainerID: "c1", Pid: 7}, watch.RuntimeEvent{ID: "c1", Type: started}, true},
		{"init process exited", "/tasks/exit", &apievents.TaskExit{ContainerID: "c1", ID: "c1", ExitStatus: 137}, watch.RuntimeEvent{ID: "c1", Type: stopped}, true},
		{"exec'd process exited (a probe)", "/tasks/exit", &apievents.TaskExit{ContainerID: "c1", ID: "exec-1"}, watch.RuntimeEvent{}, false},
		{"task deleted", "/tasks/delete", &apievents.TaskDelete{ContainerID: "c1"}, watch.RuntimeEvent{ID: "c1", Type: stopped}, true},
		{"exec'd process deleted", "/tasks/delete", &apievents.TaskDelete{ContainerID: "c1", ID: "exec-1"}, watch.RuntimeEvent{}, false},
		{"out of memory", "/tasks/oom", &apievents.TaskOOM{ContainerID: "c1"}, watch.RuntimeEvent{ID: "c1", Type: stopped}, true},
		{"container deleted", "/containers/delete", &apievents.ContainerDelete{ID: "c1"}, watch.RuntimeEvent{ID: "c1", Type: deleted}, true},
		{"another topic", "/tasks/paused", &apievents.TaskPaused{ContainerID: "c1"}, watch.RuntimeEvent{}, false},
		{"topic and type differ", "/tasks/start", &apievents.ContainerCreate{ID: "c1"}, watch.RuntimeEvent{ID: "c1", Type: started}, false},
		{"no id", "/tasks/start", &apievents.TaskStart{}, watch.RuntimeEvent{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := typeurl.MarshalAny(tc.event)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := toEvent(tc.topic, &anypb.Any{TypeUrl: a.GetTypeUrl(), Value: a.GetValue()})
			if ok != tc.ok || (ok && got != tc.want) {
				t.Errorf("toEvent = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	if _, ok := toEvent("/tasks/start", nil); ok {
		t.Error("an envelope without an event decoded")
	}
}
