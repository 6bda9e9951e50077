// Command podsync-vk puts podsync nodes under a Kubernetes control plane:
// it registers each podsyncd it is given as a Node and runs the pods the
// scheduler binds there on it, through Virtual Kubelet's node library.
// See internal/vk for the flags and the config file.
package main
