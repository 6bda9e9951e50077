// Command podsyncd is the podsync daemon: it serves the podsync.v1 API on
// a node and keeps the pods it is given converged on the node's CRI
// runtime. See internal/daemon for the flags and the config file.
package main
