// Package convert maps standard Kubernetes core/v1 Pods, ConfigMaps and
// Secrets to podsync's API and back, and applies the API server's defaulting
// so that a manifest means on podsync what it means on a cluster.
//
// The input side has two steps that callers run in order. Decode reads a
// stream of YAML or JSON manifests, as kubectl accepts them, and returns the
// Pods, ConfigMaps and Secrets it holds. It decodes strictly: an unknown or
// duplicated field, an apiVersion other than "v1" or an unsupported kind is
// an error naming the document and the field. Decode does not default.
//
// Default, DefaultConfigMap and DefaultSecret then apply, in place, the
// defaults the Kubernetes API server (v1.37) would apply on create: the
// core/v1 defaulting functions of k8s.io/kubernetes/pkg/apis/core/v1, the
// namespace taken from the request, and a UID. Unlike the API server, which
// draws a random UID, Default derives a missing UID from the pod's namespace
// and name (see PodUID), so re-sending the same manifest addresses the same
// pod. Defaulting is idempotent, so it is safe on objects that were already
// defaulted, such as a pod read back from podsync.
//
// This package does not validate: a decoded and defaulted pod may still use
// fields podsync does not support, which the server rejects.
package convert
