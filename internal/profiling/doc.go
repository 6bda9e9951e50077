// Package profiling serves Go's runtime profiles (net/http/pprof) under
// /debug/pprof/, for podsyncd's metrics address (--enable-profiling) and
// podsync-vk's kubelet API (as the kubelet's enableProfilingHandler).
package profiling
