package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/client"
	"github.com/podsync/podsync/convert"
	"github.com/podsync/podsync/internal/testing/testdaemon"
)

// exampleDaemon starts an in-process podsyncd on a fake container runtime
// for the examples and returns its target, "unix:///tmp/…/podsync.sock",
// and a function that stops it. A real podsyncd listens on
// client.DefaultAddress.
func exampleDaemon() (target string, stop func()) {
	d, err := startDaemon(testdaemon.Options{})
	if err != nil {
		panic(err)
	}
	return d.Target, func() {
		if err := d.Close(); err != nil {
			panic(err)
		}
	}
}

// manifest is a Pod as kubectl would take it. The fake runtime runs no
// processes but understands echo.
const manifest = `
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: app
    image: registry.local/busybox:1
    command: [sh, -c, "echo hello; echo world; sleep infinity"]
    envFrom:
    - configMapRef: {name: web-config}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  GREETING: hello
`

func ExampleNew() {
	target, stop := exampleDaemon()
	defer stop()

	// Timeouts travel through ctx, for New (with WithBlock) and every call.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// New("") dials client.DefaultAddress; TCP targets need WithTLSFiles.
	c, err := client.New(ctx, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = c.Close() }()

	st, err := c.Health(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st)
	// Output: SERVING
}

func ExampleRunPodsRequestFromManifests() {
	m, err := convert.Decode(strings.NewReader(manifest))
	if err != nil {
		fmt.Println(err)
		return
	}
	req, err := client.RunPodsRequestFromManifests(m)
	if err != nil {
		fmt.Println(err)
		return
	}
	req.WaitFor = podsyncv1.WaitFor_WAIT_FOR_RUNNING

	// The pods are defaulted as the API server would: namespace, uid,
	// pull policy, termination message path, …
	for _, p := range req.GetPods() {
		md, app := p.GetMetadata(), p.GetSpec().GetContainers()[0]
		fmt.Println(md.GetNamespace(), md.GetName(), md.GetUid())
		fmt.Println(app.GetImagePullPolicy(), app.GetTerminationMessagePath())
	}
	fmt.Println(len(req.GetConfigMaps()), "config map")
	// Output:
	// default web 622bb72c-96e1-5908-a7e7-f8f2f5cdf04b
	// IfNotPresent /dev/termination-log
	// 1 config map
}

func ExampleClient_RunPods() {
	target, stop := exampleDaemon()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = c.Close() }()

	m, err := convert.Decode(strings.NewReader(manifest))
	if err != nil {
		fmt.Println(err)
		return
	}
	req, err := client.RunPodsRequestFromManifests(m)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.RunPods(ctx, req, func(m *podsyncv1.RunPodsResponse) {
		if s := m.GetStep(); s != nil {
			fmt.Println(s.GetPod().GetName(), s.GetStep().GetAction(), s.GetStep().GetOutcome())
		}
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range res.Pods {
		fmt.Println(p.Result.GetPod().GetName(), p.Result.GetOutcome(), p.Status.GetPhase())
	}
	fmt.Println("ok:", res.OK())
	// Output:
	// web STEP_ACTION_CREATE_POD_SANDBOX STEP_OUTCOME_SUCCEEDED
	// web STEP_ACTION_CONFIG_POD_SANDBOX STEP_OUTCOME_SUCCEEDED
	// web STEP_ACTION_START_CONTAINER STEP_OUTCOME_SUCCEEDED
	// web POD_OUTCOME_REACHED_TARGET Running
	// ok: true
}

func ExampleClient_SyncPod() {
	target, stop := exampleDaemon()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = c.Close() }()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.local/busybox:1", Command: []string{"sleep", "infinity"},
		}}},
	}
	req, err := client.SyncPodRequestFromPod(pod, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.SyncPod(ctx, req, func(s *podsyncv1.SyncStep) {
		fmt.Println(s.GetAction(), s.GetOutcome())
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("created:", res.GetCreated(), res.GetStatus().GetPhase())
	// Output:
	// STEP_ACTION_CREATE_POD_SANDBOX STEP_OUTCOME_SUCCEEDED
	// STEP_ACTION_CONFIG_POD_SANDBOX STEP_OUTCOME_SUCCEEDED
	// STEP_ACTION_START_CONTAINER STEP_OUTCOME_SUCCEEDED
	// created: true Running
}

func ExampleClient_Watch() {
	target, stop := exampleDaemon()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = c.Close() }()
	req, err := client.SyncPodRequestFromPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.local/busybox:1"}}},
	}, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}

	// Watch runs until its ctx ends, resuming across disconnects.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	running, deleted := make(chan struct{}), make(chan struct{})
	watched := make(chan error, 1)
	go func() {
		seen := false
		watched <- c.Watch(wctx, &podsyncv1.WatchPodsRequest{LabelSelector: ""}, func(m *podsyncv1.WatchPodsResponse) error {
			switch {
			case m.GetStatus().GetPhase() == "Running" && !seen:
				seen = true
				fmt.Println(m.GetPod().GetName(), "running")
				close(running)
			case m.GetDeleted() != nil:
				fmt.Println(m.GetPod().GetName(), "deleted")
				close(deleted)
			}
			return nil
		})
	}()

	if _, err := c.SyncPod(ctx, req, nil); err != nil {
		fmt.Println(err)
		return
	}
	<-running
	if _, err := c.DeletePod(ctx, &podsyncv1.DeletePodRequest{Name: "web"}); err != nil {
		fmt.Println(err)
		return
	}
	<-deleted
	stopWatch()
	fmt.Println(errors.Is(<-watched, context.Canceled))
	// Output:
	// web running
	// web deleted
	// true
}

func ExampleClient_Logs() {
	target, stop := exampleDaemon()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = c.Close() }()
	m, err := convert.Decode(strings.NewReader(manifest))
	if err != nil {
		fmt.Println(err)
		return
	}
	req, err := client.SyncPodRequestFromPod(m.Pods[0], m.ConfigMaps, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := c.SyncPod(ctx, req, nil); err != nil {
		fmt.Println(err)
		return
	}

	// Without Follow, Logs returns at the end of the log.
	err = c.Logs(ctx, &podsyncv1.GetContainerLogsRequest{Name: "web"}, func(l *podsyncv1.LogLine) error {
		fmt.Printf("%s %s\n", l.GetStream(), l.GetContent())
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// LOG_STREAM_STDOUT hello
	// LOG_STREAM_STDOUT world
}

func ExampleReason() {
	target, stop := exampleDaemon()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = c.Close() }()

	_, err = c.GetPod(ctx, "", "nope")
	// Branch on sentinels and reasons, never on messages.
	fmt.Println(errors.Is(err, client.ErrNotFound), client.Reason(err))
	// The *Error has the details; its message reads
	// "podsync: GetPod default/nope: …".
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Op, e.Object, e.Code)
	}
	// Output:
	// true POD_NOT_FOUND
	// GetPod default/nope NotFound
}

func ExampleFieldViolations() {
	target, stop := exampleDaemon()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.New(ctx, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = c.Close() }()

	_, err = c.PlanPod(ctx, &podsyncv1.PlanPodRequest{Pod: &podsyncv1.Pod{
		Metadata: &podsyncv1.ObjectMeta{Name: "web"},
		Spec:     &podsyncv1.PodSpec{Containers: []*podsyncv1.Container{{Name: "app", Image: "Not An Image!"}}},
	}})
	if errors.Is(err, client.ErrInvalidArgument) {
		for _, v := range client.FieldViolations(err) {
			fmt.Println(v.GetField(), v.GetReason())
		}
	}
	// Output:
	// pod.spec.containers[0].image INVALID
}
