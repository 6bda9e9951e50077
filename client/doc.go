// Package client is the Go SDK of podsyncd: typed methods over the
// podsync.v1 API (api/podsync/v1) for a unix socket or mTLS over TCP, with
// helpers that build requests from core/v1 objects through the public
// convert package.
//
// Requests from manifests today:
//
//	m, err := convert.Decode(f)
//	for _, p := range m.Pods {
//		convert.Default(p)
//	}
//	pods, configMaps, secrets, err := convert.ManifestsToProto(m)
//	req := &podsyncv1.RunPodsRequest{Pods: pods, ConfigMaps: configMaps, Secrets: secrets}
//
// Timeouts and cancellation travel through ctx; errors carry gRPC status
// codes with google.rpc.ErrorInfo reasons, as documented on each RPC.
package client
