package vk

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// nodeLibraryRecorder is the node library's event recorder: the events
// it records about a pod, less the ones that say only that the provider
// took it ("Create pod in provider successfully" and its update and
// delete twins, Normal). A kubelet records none such: the pod's own
// events (Pulled, Created, Started, Killing, from podsyncd) say what
// happened, and each of these is an API request per pod created, about
// a seventh of podsync-vk's. The library's failures (ProviderCreateFailed
// and the like, Warning) are kept: they say why a pod did not start.
type nodeLibraryRecorder struct{ record.EventRecorder }

// nodeLibrarySuccess are the reasons of the node library's success events
// (virtual-kubelet node/pod.go).
var nodeLibrarySuccess = map[string]bool{
	"ProviderCreateSuccess": true,
	"ProviderUpdateSuccess": true,
	"ProviderDeleteSuccess": true,
}

func (r nodeLibraryRecorder) keep(eventtype, reason string) bool {
	return eventtype != corev1.EventTypeNormal || !nodeLibrarySuccess[reason]
}

func (r nodeLibraryRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	if r.keep(eventtype, reason) {
		r.EventRecorder.Event(object, eventtype, reason, message)
	}
}

func (r nodeLibraryRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if r.keep(eventtype, reason) {
		r.EventRecorder.Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

func (r nodeLibraryRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if r.keep(eventtype, reason) {
		r.EventRecorder.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	}
}
