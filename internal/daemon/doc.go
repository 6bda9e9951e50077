// Package daemon holds podsyncd's wiring, so that cmd/podsyncd stays a
// small main. This part covers the listeners and their security:
//
//   - ServerConfig and Security: the flags (--listen, --tls-cert-file,
//     --tls-key-file, --tls-client-ca-file, --tls-crl-file,
//     --insecure-listen-loopback,
//     --socket-group, --metrics-address) and the YAML keys of the config
//     file, including the roles and the rate limit;
//   - Listen: a unix socket (mode 0660, a configurable group, never in a
//     world-writable directory, a stale socket replaced) or a TCP listener,
//     which only starts with mTLS or, for development, plaintext on a
//     loopback address;
//   - TLSReloader (Security.NewTLSReloader, ServerTLSConfig): the mTLS
//     server configuration (TLS 1.2 or later, client certificates
//     required, verified and checked against an optional CRL), built
//     again when its files change or on SIGHUP.
//
// Security.Apply copies the security settings into server.Options; the
// server authenticates each connection (peer uid on the socket, the client
// certificate on TCP) and authorizes each call by the roles.
package daemon
