// Package expansion is Kubernetes' $(VAR) expansion of container commands,
// args and env values (k8s.io/kubernetes third_party/forked/golang/expansion),
// shared by the engine's container configs and the exec prober.
package expansion
