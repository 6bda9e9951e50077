// Package vk is podsync-vk's wiring: its flags and config file, and Run,
// which serves each configured podsync node as a Kubernetes Node through
// the Virtual Kubelet node library (node and pod controllers, the node
// lease, the kubelet API with the API server's authentication and
// authorisation) over package provider.
package vk
