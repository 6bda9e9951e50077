#!/usr/bin/env bash
# Enforces the package boundaries of STYLE.md (make check-deps):
#  - the pure engine packages (engine/model, engine/plan, engine/podstatus,
#    engine/criconfig), with every package of this module they import, do
#    no I/O: no os, os/exec, net (but net/netip and net/url), syscall, zap,
#    grpc, the store or failpoints;
#  - engine/ never depends on the API, the server, the client or internal/,
#    and (but its test double) never imports
#    grpc directly (but engine/prober/grpc.go, the grpc health probe);
#  - validation/ (shared by server, engine, SDK and CLI) depends on no
#    package of this module but convert/, and imports no I/O package;
#  - convert/ is shared by server and client and depends on neither;
#  - errorinfo/ (the ErrorInfo vocabulary of server and client) depends on
#    nothing of podsync's;
#  - the commands that ship (podsyncd, podsyncctl, podsync-vk) link no test
#    double: not the fake runtime, not the hollow node, not package testing;
#  - the layout's limits hold (hack/layout: the Node facade's size, no
#    back-pointer to it, the server's narrow door, a doc.go everywhere).
# Every pattern must match a package: a boundary over nothing proves
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=github.com/podsync/podsync
fail=0

# deps_of lists the dependencies of packages, failing when a pattern
# matches no package.
deps_of() {
	local out
	out=$(go list -deps "$@" 2>&1) || { echo "$out" >&2; exit 1; }
	if grep -q 'matched no packages' <<<"$out"; then echo "check-deps: $* matched no packages" >&2; exit 1; fi
	echo "$out"
}

pure_pkgs=(./engine/model ./engine/plan ./engine/podstatus ./engine/criconfig)
forbidden='^(os|os/exec|net|net/.*|io/ioutil|syscall|go\.uber\.org/zap(/.*)?|google\.golang\.org/grpc(/.*)?|'"$mod"'/engine/store(/.*)?|'"$mod"'/engine/failpoint)$'
for p in "${pure_pkgs[@]}"; do
	# The package and every package of this module it depends on.
	ours=$(deps_of "$p" | grep -E "^$mod(/|$)")
	while read -r dep; do
		io=$(go list -f '{{join .Imports "\n"}}' "$dep" | grep -vE '^net/(netip|url)$' | grep -E "$forbidden" || true)
		if [[ -n $io ]]; then
			echo "check-deps: $p must stay pure, but $dep imports:"; echo "$io" | sed 's/^/  /'; fail=1
		fi
	done <<<"$ours"
done

# engine/model is the ground floor: it imports no package of this module.
bad=$(deps_of ./engine/model | grep -E "^$mod/" | grep -vx "$mod/engine/model" || true)
if [[ -n $bad ]]; then echo "check-deps: engine/model must import no package of this module, but depends on:"; echo "$bad"; fail=1; fi

engine_deps=$(deps_of ./engine/...)
bad=$(grep -E "^$mod/(api|server|client|internal)(/|$)" <<<"$engine_deps" || true)
if [[ -n $bad ]]; then echo "check-deps: engine must not depend on:"; echo "$bad"; fail=1; fi

# The one exception: engine/prober's grpc probes are grpc health clients
# (the kubelet's pkg/probe/grpc), in engine/prober/grpc.go alone.
direct=$(go list -f '{{.ImportPath}}: {{join .Imports " "}}' ./engine/... | grep -v '/enginetest' | grep -v "^$mod/engine/prober:" |
	grep -E 'google\.golang\.org/grpc( |/|$)' || true)
if [[ -n $direct ]]; then echo "check-deps: engine imports grpc directly:"; echo "$direct"; fail=1; fi
grpcfiles=$(cd engine/prober && grep -l '"google\.golang\.org/grpc' -- $(go list -f '{{join .GoFiles " "}}' .) || true)
if [[ $grpcfiles != grpc.go ]]; then echo "check-deps: engine/prober imports grpc outside grpc.go: $grpcfiles"; fail=1; fi

# validation/ depends on no package of this module but convert/, and
# imports no I/O package. (convert/ brings the API types, which the engine,
# importing validation/, may not depend on: in practice, none.)
validation_deps=$(deps_of ./validation/...)
bad=$(grep -E "^$mod(/|$)" <<<"$validation_deps" | grep -vE "^$mod/(validation|convert)(/|$)" || true)
if [[ -n $bad ]]; then echo "check-deps: validation may depend on convert only, not on:"; echo "$bad"; fail=1; fi
io=$(go list -f '{{range .Imports}}{{$.ImportPath}}: {{.}}{{"\n"}}{{end}}' ./validation/... |
	grep -E ': (os|os/.*|net|net/http.*|io/ioutil|syscall|golang\.org/x/sys/.*|google\.golang\.org/grpc.*)$' || true)
if [[ -n $io ]]; then echo "check-deps: validation must stay pure but imports:"; echo "$io"; fail=1; fi

convert_deps=$(deps_of ./convert/...)
bad=$(grep -E "^$mod/(server|engine|client|internal)(/|$)" <<<"$convert_deps" || true)
if [[ -n $bad ]]; then echo "check-deps: convert must not depend on:"; echo "$bad"; fail=1; fi

errorinfo_deps=$(deps_of ./errorinfo/...)
bad=$(grep -E "^$mod/" <<<"$errorinfo_deps" | grep -vx "$mod/errorinfo" || true)
if [[ -n $bad ]]; then echo "check-deps: errorinfo must not depend on:"; echo "$bad"; fail=1; fi

# Talking to an API server (client-go's clientsets, informers, listers,
# caches and kubeconfig loading) and Virtual Kubelet are podsync-vk's
# (internal/vk): podsyncd, the SDK, the CLI, convert and the engine never
# depend on them. client-go's CRI streaming clients (tools/remotecommand,
# tools/portforward, transport/spdy and the rest.Config they take) are
# podsyncd's, as crictl's.
apiserver_clients='^(k8s\.io/client-go/(kubernetes|informers|listers|dynamic|discovery|tools/cache|tools/clientcmd|tools/leaderelection)|github\.com/virtual-kubelet/virtual-kubelet)(/|$)'
for p in ./engine/... ./server/... ./client/... ./convert/... ./cmd/podsyncd ./cmd/podsyncctl; do
	# (tools/clientcmd/api is the kubeconfig types rest.Config refers to.)
	bad=$(deps_of "$p" | grep -E "$apiserver_clients" | grep -v '^k8s\.io/client-go/tools/clientcmd/api' | head -3 || true)
	if [[ -n $bad ]]; then echo "check-deps: $p must not depend on an API server client or virtual-kubelet, but does:"; echo "$bad"; fail=1; fi
done

# What ships links no test double: the fake runtime (engine/enginetest,
# cri-api's fakes), the hollow node (internal/testing/hollow, which
# hack/hollow runs for the scale benchmarks) and the other harnesses stay
# out of podsyncd, podsyncctl and podsync-vk, and so does package testing.
doubles='^('"$mod"'/engine/enginetest|'"$mod"'/internal/testing(/.*)?|k8s\.io/cri-api/pkg/apis/testing|testing|github\.com/stretchr/testify(/.*)?)$'
for p in ./cmd/podsyncd ./cmd/podsyncctl ./cmd/podsync-vk; do
	bad=$(deps_of "$p" | grep -E "$doubles" | head -3 || true)
	if [[ -n $bad ]]; then echo "check-deps: $p must not link a test double, but depends on:"; echo "$bad"; fail=1; fi
done

# The layout of docs/architecture.md, counted with the Go AST: the Node's
# size, no back-pointer to it, the engine root's size, the server's door,
# a doc.go in every package, no large tracked file.
if ! go run ./hack/layout; then echo "check-deps: the layout exceeds its limits (hack/layout)"; fail=1; fi

if ((fail)); then exit 1; fi
echo "check-deps: ok"
