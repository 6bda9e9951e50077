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
// Decode and the defaults do not validate. ReadManifests is the reader of
// podsyncctl and of the SDK's users: it decodes several files, checks every
// field against its type along the YAML nodes (an unknown field suggests
// the nearest known one; a wrong type says what was wanted), drops what
// only the API server writes (DropServerFields: a kubectl get -o yaml dump
// reads as its pod) and the service account fields podsync accepts without
// acting on (DropIdentityFields), each with a notice, defaults, and runs
// podsyncd's checks of package validation (ValidateManifests, which the
// SDK's request builders also run). It reports every problem of every
// document of every file at once, each as FILE:LINE: KIND/NAME: FIELD:
// problem, in a *ManifestsError.
package convert
