package localcri

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"go.uber.org/zap"
)

// Registry is an in-memory OCI distribution registry served over plain HTTP
// on 127.0.0.1, with switches that make it slow or make it fail. Instances
// configure containerd to pull from it (see Instance.Registry). Its methods
// are safe for concurrent use.
type Registry struct {
	addr string
	srv  *http.Server
	ln   net.Listener
	done chan struct{}

	serveErr  chan error
	closeOnce sync.Once

	delay          atomic.Int64 // time.Duration
	manifestStatus atomic.Int32
	blobStatus     atomic.Int32

	manifestRequests atomic.Int64
	blobRequests     atomic.Int64
	failedRequests   atomic.Int64

	authMu sync.Mutex
	auth   []repoAuth
}

// repoAuth is the basic auth the repositories below prefix require.
type repoAuth struct {
	prefix, user, password string
}

// RegistryRequests counts the requests a Registry has served since it started
// or since the last ResetCounters.
type RegistryRequests struct {
	// Manifests counts GET and HEAD requests for manifests (tags or digests).
	Manifests int64
	// Blobs counts GET and HEAD requests for blobs.
	Blobs int64
	// Failed counts requests answered with an injected failure.
	Failed int64
}

// StartRegistry serves an empty registry on 127.0.0.1 on a free port until
// Close. Images are added with Push.
func StartRegistry(ctx context.Context, log *zap.Logger) (*Registry, error) {
	if log == nil {
		log = zap.NewNop()
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for registry: %w", err)
	}
	r := &Registry{
		addr:     ln.Addr().String(),
		ln:       ln,
		done:     make(chan struct{}),
		serveErr: make(chan error, 1),
	}
	inner := registry.New(registry.Logger(zap.NewStdLog(log.Named("registry").WithOptions(zap.IncreaseLevel(zap.WarnLevel)))))
	r.srv = &http.Server{
		Handler:           r.wrap(inner),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          zap.NewStdLog(log.Named("registry-http")),
	}
	go func() {
		err := r.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		r.serveErr <- err
	}()
	return r, nil
}

// Addr returns host:port, e.g. "127.0.0.1:40123".
func (r *Registry) Addr() string { return r.addr }

// Ref returns the reference of repoTag (e.g. "busybox:local") in this
// registry, e.g. "127.0.0.1:40123/busybox:local".
func (r *Registry) Ref(repoTag string) string { return r.addr + "/" + repoTag }

// Push stores img under repoTag (e.g. "busybox:local").
func (r *Registry) Push(ctx context.Context, repoTag string, img v1.Image) error {
	ref, err := name.ParseReference(r.Ref(repoTag), name.Insecure)
	if err != nil {
		return fmt.Errorf("parse reference %q: %w", repoTag, err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(tr)}
	if a, ok := r.authFor(ref.Context().RepositoryStr()); ok {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: a.user, Password: a.password}))
	}
	if err := remote.Write(ref, img, opts...); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}

// RequireBasicAuth makes the repositories whose names start with
// repoPrefix (e.g. "private/") answer 401 Unauthorized, with a Basic
// challenge, to every request without user and password; the others stay
// open. Push authenticates itself. It lasts until Close.
func (r *Registry) RequireBasicAuth(repoPrefix, user, password string) {
	r.authMu.Lock()
	defer r.authMu.Unlock()
	r.auth = append(r.auth, repoAuth{prefix: repoPrefix, user: user, password: password})
}

// authFor returns the auth the repository name requires, if any.
func (r *Registry) authFor(name string) (repoAuth, bool) {
	r.authMu.Lock()
	defer r.authMu.Unlock()
	for _, a := range r.auth {
		if strings.HasPrefix(name, a.prefix) {
			return a, true
		}
	}
	return repoAuth{}, false
}

// SetDelay makes every request wait d before it is served; zero turns the
// delay off. A delayed request ends early when its client goes away.
func (r *Registry) SetDelay(d time.Duration) { r.delay.Store(int64(d)) }

// FailManifests makes every manifest request fail with the HTTP status code
// (e.g. 500, or 404 for "manifest unknown"); zero turns the failure off.
func (r *Registry) FailManifests(code int) { r.manifestStatus.Store(int32(code)) }

// FailBlobs makes every blob request fail with the HTTP status code; zero
// turns the failure off.
func (r *Registry) FailBlobs(code int) { r.blobStatus.Store(int32(code)) }

// Reset turns off every delay and failure.
func (r *Registry) Reset() {
	r.SetDelay(0)
	r.FailManifests(0)
	r.FailBlobs(0)
}

// Requests returns the request counters.
func (r *Registry) Requests() RegistryRequests {
	return RegistryRequests{
		Manifests: r.manifestRequests.Load(),
		Blobs:     r.blobRequests.Load(),
		Failed:    r.failedRequests.Load(),
	}
}

// ResetCounters sets the request counters to zero.
func (r *Registry) ResetCounters() {
	r.manifestRequests.Store(0)
	r.blobRequests.Store(0)
	r.failedRequests.Store(0)
}

// Close stops serving; requests still delayed are cut short. It waits for
// the server to stop until ctx is done.
func (r *Registry) Close(ctx context.Context) error {
	var err error
	r.closeOnce.Do(func() {
		close(r.done)
		if serr := r.srv.Shutdown(ctx); serr != nil {
			_ = r.srv.Close()
			err = fmt.Errorf("shut down registry: %w", serr)
		}
		if serr := <-r.serveErr; serr != nil && err == nil {
			err = fmt.Errorf("serve registry: %w", serr)
		}
	})
	return err
}

// requestKind tells a manifest request from a blob request by its path,
// /v2/<name>/manifests/<ref> or /v2/<name>/blobs/<digest>.
func requestKind(path string) string {
	if !strings.HasPrefix(path, "/v2/") {
		return ""
	}
	parts := strings.Split(strings.TrimPrefix(path, "/v2/"), "/")
	if len(parts) < 3 {
		return ""
	}
	switch parts[len(parts)-2] {
	case "manifests":
		return "manifests"
	case "blobs":
		return "blobs"
	}
	return ""
}

// repositoryOf returns the repository name of a /v2/<name>/manifests/…,
// /v2/<name>/blobs/… or /v2/<name>/tags/… path, or "".
func repositoryOf(path string) string {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return ""
	}
	for _, sep := range []string{"/manifests/", "/blobs/", "/tags/"} {
		if i := strings.LastIndex(rest, sep); i >= 0 {
			return rest[:i]
		}
	}
	return ""
}

func (r *Registry) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if d := time.Duration(r.delay.Load()); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-req.Context().Done():
				t.Stop()
				return
			case <-r.done:
				t.Stop()
				http.Error(w, "registry closed", http.StatusServiceUnavailable)
				return
			}
		}
		if a, ok := r.authFor(repositoryOf(req.URL.Path)); ok {
			if u, p, has := req.BasicAuth(); !has || u != a.user || p != a.password {
				r.failedRequests.Add(1)
				w.Header().Set("WWW-Authenticate", `Basic realm="localcri registry"`)
				writeRegistryError(w, http.StatusUnauthorized)
				return
			}
		}
		read := req.Method == http.MethodGet || req.Method == http.MethodHead
		code := 0
		switch requestKind(req.URL.Path) {
		case "manifests":
			if read {
				r.manifestRequests.Add(1)
				code = int(r.manifestStatus.Load())
			}
		case "blobs":
			if read {
				r.blobRequests.Add(1)
				code = int(r.blobStatus.Load())
			}
		}
		if code != 0 {
			r.failedRequests.Add(1)
			writeRegistryError(w, code)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// writeRegistryError answers with a distribution-spec error body.
func writeRegistryError(w http.ResponseWriter, code int) {
	errCode := "UNKNOWN"
	switch code {
	case http.StatusNotFound:
		errCode = "MANIFEST_UNKNOWN"
	case http.StatusUnauthorized:
		errCode = "UNAUTHORIZED"
	case http.StatusForbidden:
		errCode = "DENIED"
	case http.StatusTooManyRequests:
		errCode = "TOOMANYREQUESTS"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, `{"errors":[{"code":%q,"message":"injected by localcri registry: %d %s"}]}`,
		errCode, code, http.StatusText(code))
}
