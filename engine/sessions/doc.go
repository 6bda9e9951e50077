// Package sessions opens exec, attach and port-forward sessions into the
// node's running containers and runs commands in them, as the kubelet's
// streaming server does for kubectl and crictl (reference: kubelet
// v1.37.2, pkg/kubelet/cri/streaming): CRI Exec, Attach and PortForward
// give a URL of the runtime's own streaming server, which client-go's
// remotecommand and portforward clients speak SPDY to (as crictl does).
// ExecSync runs a command to its end with its output capped. Each session
// ends when the caller's context does, or after an idle timeout (the
// kubelet's --streaming-connection-idle-timeout).
//
// The node's Sessions find the pod in the store and its running
// container in the runtime's view, through small interfaces this package
// declares.
package sessions
