package localcluster

import (
	"strconv"

	"k8s.io/client-go/rest"
)

// KubeletConfig is cfg, an API server client's with its client
// certificate, aimed at the kubelet API podsync-vk serves for a node on
// port (Node.KubeletPort). The API server authorises its calls
// (SubjectAccessReview) as a kubelet's webhook mode does; the serving
// certificate is podsync-vk's self-signed one, so it is not verified.
// The API server's node proxy (/api/v1/nodes/N/proxy/...) refuses the
// loopback address the nodes have, so callers go to the port directly.
func KubeletConfig(cfg *rest.Config, port int) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Host = "https://127.0.0.1:" + strconv.Itoa(port)
	c.CAData, c.CAFile = nil, ""
	c.Insecure = true
	return c
}
