// Package provider is podsync-vk's Virtual Kubelet provider: one Provider
// per podsync node implements the node library's PodLifecycleHandler and
// PodNotifier (github.com/virtual-kubelet/virtual-kubelet/node) over the
// podsync Go SDK, and a NodeProvider that registers the node with what
// podsyncd's GetNode and health say.
//
// Pods Kubernetes binds to the node are applied with SyncPod (the pod's
// uid is Kubernetes', so a second incarnation of a name is another pod)
// and carry the OwnerLabel, naming the node: every list, watch and delete
// selects by it, so podsync-vk never touches a podsync pod it did not
// create (podsyncctl's, another podsync-vk's). Statuses come from one
// WatchPods stream per node (client.Watch: resumed by revision after a
// break, listed again when the revision is compacted), never from polling.
// A pod podsyncd refuses (admission, policy, an unsupported field) is
// reported Failed with podsyncd's reason and message.
//
// The ConfigMaps and Secrets a pod references, and its service-account
// token Secrets, are stored on podsyncd with the pod (in its SyncPod: one
// call, one transaction), and again (ApplyObjects) when the API server
// changes them (ObjectChanged), so podsyncd rewrites mounted files as a
// kubelet does. The kubelet API's exec, attach, port-forward and stats summary go
// to podsyncd's Exec, Attach, PortForward and ListPodStats (sessions.go).
package provider
