// Command localcri keeps a private containerd running for development, as
// the Makefile targets runtime-up and runtime-down do:
//
//	go run ./hack/localcri up      # start, print the CRI endpoint and a crictl command line
//	go run ./hack/localcri status  # is it running, does CRI answer
//	go run ./hack/localcri down    # stop what up started, leaving nothing behind
//	go run ./hack/localcri gc      # tear down instances whose owner process died
//
// up starts a detached helper process that owns the instance (containerd
// and the local registry) and writes a state file, <repo>/.tmp/localcri/
// state.json, with its PID; down signals that helper, which tears the
// instance down. With --foreground, up owns the instance itself until
// SIGINT or SIGTERM. PODSYNC_CONTAINERD selects the flavour ("2" or "1.6").
// It must run as root.
package main
