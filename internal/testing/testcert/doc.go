// Package testcert makes certificate authorities and certificates for
// tests of podsync's mutual TLS: the server's, the SDK's and podsyncd's.
package testcert
