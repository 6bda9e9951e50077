package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	podsyncv1 "github.com/podsync/podsync/api/podsync/v1"
	"github.com/podsync/podsync/errorinfo"
	"github.com/podsync/podsync/logx"
)

// Principal kinds: an Identity is a list of "kind:value" principals, and a
// Roles entry names one of them.
const (
	// PrincipalCN is an mTLS client certificate's subject common name.
	PrincipalCN = "cn"
	// PrincipalDNS is a DNS name of an mTLS client certificate's SAN.
	PrincipalDNS = "dns"
	// PrincipalURI is a URI of an mTLS client certificate's SAN (a SPIFFE
	// ID, for example).
	PrincipalURI = "uri"
	// PrincipalUID is the uid of a unix socket's peer process
	// (SO_PEERCRED).
	PrincipalUID = "uid"
	// PrincipalUser is the user name of a unix socket peer's uid, when the
	// node's user database knows it.
	PrincipalUser = "user"
	// Anonymous is the only principal of a caller without credentials: a
	// plaintext TCP connection on loopback (--insecure-listen-loopback).
	// It is refused unless Roles names it.
	Anonymous = "anonymous"
)

// Role is what an identity may do.
type Role int

// Roles in increasing order of privilege.
const (
	// RoleNone may call nothing.
	RoleNone Role = iota
	// RoleRead may call the methods without side effects: GetPod,
	// GetNode, ListPods, WatchPods, GetContainerLogs, PlanPod, ListVolumes, grpc.health.v1 and
	// server reflection.
	RoleRead
	// RoleExec may call what RoleRead may, and open sessions into pods:
	// ExecSync, Exec, Attach and PortForward.
	RoleExec
	// RoleDebug may call what RoleExec may, and AddEphemeralContainer: a
	// debug container changes the pod (any image, with the pod's volumes),
	// so it is a role of its own, as the ephemeralcontainers subresource is
	// a permission of its own on an API server.
	RoleDebug
	// RoleAdmin may call every method.
	RoleAdmin
)

// String returns "none", "read", "exec", "debug" or "admin".
func (r Role) String() string {
	switch r {
	case RoleRead:
		return "read"
	case RoleExec:
		return "exec"
	case RoleDebug:
		return "debug"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// Roles map caller identities to roles. Each entry is a principal:
// "cn:NAME", "dns:NAME", "uri:URI" for mTLS clients, "uid:N" or
// "user:NAME" for unix socket peers, or "anonymous". A caller gets the
// highest role of every entry that names one of its principals; a caller
// no entry names is refused.
//
// The unix socket's peer uid 0 (root) is admin by default: root owns the
// node, the socket and containerd anyway. The default applies only when no
// entry names uid 0 or root, so listing "uid:0" under Read makes root
// read-only.
type Roles struct {
	// Admin identities may call every method.
	Admin []string `json:"admin,omitempty"`
	// Read identities may call the methods without side effects.
	Read []string `json:"read,omitempty"`
	// Exec identities may call what Read ones may, and ExecSync, Exec,
	// Attach and PortForward. Debug and Admin imply it.
	Exec []string `json:"exec,omitempty"`
	// Debug identities may call what Exec ones may, and
	// AddEphemeralContainer. Admin implies it.
	Debug []string `json:"debug,omitempty"`
}

// Validate checks that every entry is a known principal kind with a
// value, and that uid entries are numbers.
func (r Roles) Validate() error {
	var errs []error
	check := func(list string, entries []string) {
		for i, e := range entries {
			if err := validatePrincipal(e); err != nil {
				errs = append(errs, fmt.Errorf("roles.%s[%d]: %w", list, i, err))
			}
		}
	}
	check("admin", r.Admin)
	check("read", r.Read)
	check("exec", r.Exec)
	check("debug", r.Debug)
	return errors.Join(errs...)
}

func validatePrincipal(p string) error {
	if p == Anonymous {
		return nil
	}
	kind, value, ok := strings.Cut(p, ":")
	if !ok || value == "" {
		return fmt.Errorf("%q: want kind:value with kind one of cn, dns, uri, uid, user, or %q", p, Anonymous)
	}
	switch kind {
	case PrincipalCN, PrincipalDNS, PrincipalURI, PrincipalUser:
		return nil
	case PrincipalUID:
		if _, err := strconv.ParseUint(value, 10, 32); err != nil {
			return fmt.Errorf("%q: uid is not a number", p)
		}
		return nil
	}
	return fmt.Errorf("%q: unknown principal kind %q (want cn, dns, uri, uid or user)", p, kind)
}

// Identity is who a caller is, as its transport proves it.
type Identity struct {
	// Principals name the caller, each "kind:value": "uid:N" and, when the
	// user is known, "user:NAME" for a unix socket peer; "cn:…" (if the
	// subject has one), then "dns:…" and "uri:…" for each SAN of an mTLS
	// client certificate; "anonymous" for a plaintext loopback caller.
	Principals []string
	// PID is a unix socket peer's process id, for the log; 0 otherwise.
	PID int32
}

// String is the identity as logged: its principals joined by commas, or
// "unknown" if the transport proved no name.
func (id Identity) String() string {
	if len(id.Principals) == 0 {
		return "unknown"
	}
	return strings.Join(id.Principals, ",")
}

// Field is the identity as a zap field, "identity".
func (id Identity) Field() zap.Field {
	return zap.String(logx.Identity, id.String())
}

// anonymous reports whether the caller presented no credentials.
func (id Identity) anonymous() bool {
	return slices.Equal(id.Principals, []string{Anonymous})
}

// isRoot reports whether the caller is a unix socket peer with uid 0.
func (id Identity) isRoot() bool {
	return slices.Contains(id.Principals, PrincipalUID+":0")
}

type identityKey struct{}

// IdentityFromContext returns the caller's identity, which the server's
// interceptors put in every handler's context.
func IdentityFromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

func withIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// identityFromPeer derives the identity from the AuthInfo the transport
// credentials recorded.
func identityFromPeer(ctx context.Context) Identity {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{}
	}
	switch info := p.AuthInfo.(type) {
	case PeerCredInfo:
		id := Identity{PID: info.PID, Principals: []string{PrincipalUID + ":" + strconv.FormatUint(uint64(info.UID), 10)}}
		if info.User != "" {
			id.Principals = append(id.Principals, PrincipalUser+":"+info.User)
		}
		return id
	case credentials.TLSInfo:
		return identityFromTLS(info.State)
	case plaintextInfo:
		return Identity{Principals: []string{Anonymous}}
	}
	return Identity{}
}

func identityFromTLS(cs tls.ConnectionState) Identity {
	if len(cs.PeerCertificates) == 0 {
		return Identity{}
	}
	return CertificateIdentity(cs.PeerCertificates[0])
}

// CertificateIdentity is the identity of an mTLS client presenting leaf:
// "cn:…" for its subject's common name, "dns:…" and "uri:…" for its SANs.
func CertificateIdentity(leaf *x509.Certificate) Identity {
	var id Identity
	if cn := leaf.Subject.CommonName; cn != "" {
		id.Principals = append(id.Principals, PrincipalCN+":"+cn)
	}
	for _, d := range leaf.DNSNames {
		id.Principals = append(id.Principals, PrincipalDNS+":"+d)
	}
	for _, u := range leaf.URIs {
		id.Principals = append(id.Principals, PrincipalURI+":"+u.String())
	}
	return id
}

// authorizer decides roles from Roles.
type authorizer struct {
	admin, debug, exec, read map[string]bool
	// rootDefault: no entry names root, so uid 0 is admin.
	rootDefault bool
}

func newAuthorizer(r Roles) (*authorizer, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	a := &authorizer{admin: map[string]bool{}, debug: map[string]bool{}, exec: map[string]bool{}, read: map[string]bool{}, rootDefault: true}
	for _, e := range r.Admin {
		a.admin[e] = true
	}
	for _, e := range r.Read {
		a.read[e] = true
	}
	for _, e := range r.Exec {
		a.exec[e] = true
	}
	for _, e := range r.Debug {
		a.debug[e] = true
	}
	for _, e := range slices.Concat(r.Admin, r.Read, r.Exec, r.Debug) {
		if e == PrincipalUID+":0" || e == PrincipalUser+":root" {
			a.rootDefault = false
		}
	}
	return a, nil
}

// role is the highest role of the entries that name one of id's
// principals.
func (a *authorizer) role(id Identity) Role {
	role := RoleNone
	for _, p := range id.Principals {
		switch {
		case a.admin[p]:
			return RoleAdmin
		case a.debug[p]:
			role = max(role, RoleDebug)
		case a.exec[p]:
			role = max(role, RoleExec)
		case a.read[p]:
			role = max(role, RoleRead)
		}
	}
	if role == RoleNone && a.rootDefault && id.isRoot() {
		return RoleAdmin
	}
	return role
}

// readMethods are the methods RoleRead may call: those without side
// effects (idempotency_level NO_SIDE_EFFECTS in the proto). Every other
// method, including any added later, needs RoleAdmin.
var readMethods = map[string]bool{
	podsyncv1.PodSyncService_GetPod_FullMethodName:           true,
	podsyncv1.PodSyncService_ListPods_FullMethodName:         true,
	podsyncv1.PodSyncService_WatchPods_FullMethodName:        true,
	podsyncv1.PodSyncService_GetContainerLogs_FullMethodName: true,
	podsyncv1.PodSyncService_PlanPod_FullMethodName:          true,
	podsyncv1.PodSyncService_GetNode_FullMethodName:          true,
	podsyncv1.PodSyncService_ListVolumes_FullMethodName:      true,
	podsyncv1.PodSyncService_GetObject_FullMethodName:        true,
	podsyncv1.PodSyncService_ListObjects_FullMethodName:      true,
	podsyncv1.PodSyncService_WatchObjects_FullMethodName:     true,
	podsyncv1.PodSyncService_GetPodStats_FullMethodName:      true,
	podsyncv1.PodSyncService_ListPodStats_FullMethodName:     true,
	podsyncv1.PodSyncService_ListEvents_FullMethodName:       true,
}

// execMethods are the methods that open a session into a pod: RoleExec
// (or RoleAdmin) may call them, RoleRead never.
var execMethods = map[string]bool{
	podsyncv1.PodSyncService_ExecSync_FullMethodName:    true,
	podsyncv1.PodSyncService_Exec_FullMethodName:        true,
	podsyncv1.PodSyncService_Attach_FullMethodName:      true,
	podsyncv1.PodSyncService_PortForward_FullMethodName: true,
}

// debugMethods are the methods RoleDebug (or RoleAdmin) may call beyond
// RoleExec's: a debug container is a new container in the pod, run as
// the node's Pod Security level admits.
var debugMethods = map[string]bool{
	podsyncv1.PodSyncService_AddEphemeralContainer_FullMethodName: true,
}

// readServices are services RoleRead may call in full.
var readServices = []string{
	"/grpc.health.v1.Health/",
	"/grpc.reflection.v1.ServerReflection/",
	"/grpc.reflection.v1alpha.ServerReflection/",
}

// requiredRole is the role a method needs.
func requiredRole(fullMethod string) Role {
	if readMethods[fullMethod] {
		return RoleRead
	}
	if execMethods[fullMethod] {
		return RoleExec
	}
	if debugMethods[fullMethod] {
		return RoleDebug
	}
	for _, s := range readServices {
		if strings.HasPrefix(fullMethod, s) {
			return RoleRead
		}
	}
	return RoleAdmin
}

// mutating reports whether a method may change the node: the methods
// RoleRead may not call. They take tokens of the mutating rate limit.
func mutating(fullMethod string) bool {
	return requiredRole(fullMethod) > RoleRead
}

// finishAtShutdown reports whether a stream is let finish, until the
// deadline, when podsyncd shuts down: the methods only RoleAdmin may call.
// Reads and sessions into pods end as soon as shutdown starts.
func finishAtShutdown(fullMethod string) bool {
	return requiredRole(fullMethod) == RoleAdmin
}

// authorize refuses a call whose caller's role is below the method's.
func authorize(fullMethod string, id Identity, role Role) error {
	need := requiredRole(fullMethod)
	if role >= need {
		return nil
	}
	md := map[string]string{errorinfo.MetadataMethod: fullMethod, errorinfo.MetadataIdentity: id.String()}
	if role == RoleNone && id.anonymous() {
		return NewError(codes.Unauthenticated, errorinfo.ReasonUnauthenticated,
			"no client credentials: connect over the unix socket or with a client certificate", md)
	}
	if role == RoleNone {
		return NewError(codes.PermissionDenied, errorinfo.ReasonPermissionDenied,
			fmt.Sprintf("identity %s has no role", id), md)
	}
	return NewError(codes.PermissionDenied, errorinfo.ReasonPermissionDenied,
		fmt.Sprintf("identity %s has role %s; %s needs %s", id, role, fullMethod, need), md)
}

// PeerCredInfo is the credentials.AuthInfo of a unix socket connection:
// the peer process's credentials when it connected (SO_PEERCRED).
type PeerCredInfo struct {
	credentials.CommonAuthInfo
	// PID, UID and GID of the peer process.
	PID      int32
	UID, GID uint32
	// User is the name of UID, or empty if the node does not know it.
	User string
}

// AuthType returns "peercred".
func (PeerCredInfo) AuthType() string { return "peercred" }

// plaintextInfo is the AuthInfo of an accepted plaintext loopback
// connection.
type plaintextInfo struct {
	credentials.CommonAuthInfo
}

func (plaintextInfo) AuthType() string { return "insecure" }

// ErrPlaintextRefused is returned by the transport credentials' handshake
// for a TCP connection that has neither TLS nor a loopback exception.
var ErrPlaintextRefused = errors.New("plaintext TCP connection refused: configure TLS with client certificates, or --insecure-listen-loopback for a loopback address")

// transportCredentials authenticate each connection by its kind: a unix
// socket by its peer's credentials, TCP by mTLS (or, for a loopback
// address with insecureLoopback, not at all). One grpc.Server then serves
// the socket and TCP listeners at once.
type transportCredentials struct {
	tls              credentials.TransportCredentials // nil: no TLS configured
	insecureLoopback bool
	log              *zap.Logger
}

func newTransportCredentials(cfg *tls.Config, insecureLoopback bool, log *zap.Logger) *transportCredentials {
	c := &transportCredentials{insecureLoopback: insecureLoopback, log: log}
	if cfg != nil {
		c.tls = credentials.NewTLS(cfg)
	}
	return c
}

// ServerHandshake authenticates an accepted connection.
func (c *transportCredentials) ServerHandshake(rawConn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if uc, ok := rawConn.(*net.UnixConn); ok {
		info, err := peerCred(uc)
		if err != nil {
			c.log.Warn("unix socket peer credentials", zap.Error(err))
			return nil, nil, err
		}
		return rawConn, info, nil
	}
	if c.tls != nil {
		conn, info, err := c.tls.ServerHandshake(rawConn)
		if err != nil {
			c.log.Info("tls handshake refused", zap.String("remote_address", rawConn.RemoteAddr().String()), zap.Error(err))
			return nil, nil, err
		}
		return conn, info, nil
	}
	if c.insecureLoopback && isLoopbackAddr(rawConn.LocalAddr()) {
		return rawConn, plaintextInfo{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
	}
	c.log.Warn("plaintext connection refused", zap.String("remote_address", rawConn.RemoteAddr().String()))
	return nil, nil, ErrPlaintextRefused
}

// ClientHandshake is not supported: these credentials are for servers.
func (c *transportCredentials) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("podsync server credentials cannot be used by a client")
}

// Info describes the protocol.
func (c *transportCredentials) Info() credentials.ProtocolInfo {
	if c.tls != nil {
		return c.tls.Info()
	}
	return credentials.ProtocolInfo{SecurityProtocol: "podsync"}
}

// Clone returns a copy.
func (c *transportCredentials) Clone() credentials.TransportCredentials {
	n := *c
	if c.tls != nil {
		n.tls = c.tls.Clone()
	}
	return &n
}

// OverrideServerName is a no-op; it is deprecated in grpc.
func (c *transportCredentials) OverrideServerName(string) error { return nil }

// peerCred reads SO_PEERCRED of a unix socket connection.
func peerCred(uc *net.UnixConn) (PeerCredInfo, error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return PeerCredInfo{}, fmt.Errorf("peer credentials: %w", err)
	}
	var (
		cred    *unix.Ucred
		credErr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return PeerCredInfo{}, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return PeerCredInfo{}, fmt.Errorf("peer credentials: %w", credErr)
	}
	info := PeerCredInfo{
		// The socket is reachable only by its owner and group (0660); the
		// kernel vouches for the peer, as grpc's local credentials assume.
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
		PID:            cred.Pid,
		UID:            cred.Uid,
		GID:            cred.Gid,
	}
	if u, err := user.LookupId(strconv.FormatUint(uint64(cred.Uid), 10)); err == nil {
		info.User = u.Username
	}
	return info, nil
}

// isLoopbackAddr reports whether a TCP address is a loopback address.
func isLoopbackAddr(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	return ok && ip.Unmap().IsLoopback()
}
