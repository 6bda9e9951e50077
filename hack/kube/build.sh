#!/usr/bin/env bash
# Builds the Kubernetes binaries podsync's cluster tests and benchmarks
# run — kubelet, kube-apiserver, kube-scheduler, kube-controller-manager,
# kubectl (k8s.io/kubernetes, matching the k8s.io/api podsync uses) and
# etcd, and for make test-conformance the e2e suite (e2e.test), ginkgo and
# the static programs of the e2e images (agnhost, nnp) — from the Go module
# proxy into $KUBE_BIN (default
# .tmp/kube/<version>/bin), and keeps them: a binary already built at this
# version is not built again. The Go build cache is shared with the rest
# of the repository, so a rebuild after `rm` is incremental.
#
# `go install k8s.io/kubernetes/cmd/X@vX` is refused (the module's go.mod
# has replace directives for its staging modules, required as v0.0.0), so
# the build runs in a scratch module that requires k8s.io/kubernetes and
# replaces every staging module by its published v0.<minor>.<patch>
# release. etcd's server module has replace directives too; a scratch
# module that requires it builds it.
#
# metrics-server (kubectl top's Metrics API, for the cluster tests and
# make run-cluster) has no replace directives: `go install` builds it
# from the module proxy as it is. v0.9.0 is the newest whose go.mod this
# Go accepts (v0.9.1 asks for go 1.26.10).
#
# Usage: hack/kube/build.sh [BINARY...]   (default: the first six)
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
METRICS_SERVER_VERSION=${METRICS_SERVER_VERSION:-v0.9.0}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KUBE_DIR=${KUBE_DIR:-$ROOT/.tmp/kube/$KUBE_VERSION}
KUBE_BIN=${KUBE_BIN:-$KUBE_DIR/bin}
BUILD=$KUBE_DIR/build
GO=${GO:-go}
export GOFLAGS=${GOFLAGS:--buildvcs=false}

core=(kubelet kube-apiserver kube-scheduler kube-controller-manager kubectl etcd)
all=("${core[@]}" e2e.test ginkgo agnhost nnp metrics-server)
want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=("${core[@]}")
for b in "${want[@]}"; do
	[[ " ${all[*]} " == *" $b "* ]] || { echo "kube/build.sh: unknown binary $b (want one of: ${all[*]})" >&2; exit 2; }
done
mkdir -p "$KUBE_BIN" "$BUILD"

# staging_minor turns v1.37.2 into v0.37.2.
staging=v0.${KUBE_VERSION#v1.}

k8s_module() {
	local dir=$BUILD/k8s
	[[ -f $dir/go.mod ]] && return 0
	mkdir -p "$dir"
	$GO mod download "k8s.io/kubernetes@$KUBE_VERSION"
	local kdir
	kdir=$($GO env GOMODCACHE)/k8s.io/kubernetes@$KUBE_VERSION
	{
		printf 'module k8sbuild\n\ngo %s\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$($GO env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1.0/')" "$KUBE_VERSION"
		awk -v v="$staging" '/=> \.\/staging\/src\//{print "\t" $1 " => " $1 " " v}' "$kdir/go.mod"
		printf ')\n'
	} > "$dir/go.mod.new"
	mv "$dir/go.mod.new" "$dir/go.mod"
}

build_k8s() {
	local b=$1 dir=$BUILD/k8s date
	k8s_module
	date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
	local ldf="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1"
	ldf+=" -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
	ldf+=" -X k8s.io/component-base/version.buildDate=$date -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
	ldf+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
	(cd "$dir" && $GO get "k8s.io/kubernetes/cmd/$b@$KUBE_VERSION" && $GO build -ldflags "$ldf" -o "$KUBE_BIN/$b.new" "k8s.io/kubernetes/cmd/$b")
	mv "$KUBE_BIN/$b.new" "$KUBE_BIN/$b"
}

# build_e2e builds the e2e suite (go test -c), ginkgo at the version
# k8s.io/kubernetes requires, and the static programs of the e2e images.
build_e2e() {
	local b=$1 dir=$BUILD/k8s
	k8s_module
	local ginkgo
	ginkgo=$(awk '$1 == "github.com/onsi/ginkgo/v2" {print $2; exit}' "$($GO env GOMODCACHE)/k8s.io/kubernetes@$KUBE_VERSION/go.mod")
	case $b in
	e2e.test)
		(cd "$dir" && $GO get "k8s.io/kubernetes/test/e2e/...@$KUBE_VERSION" &&
			$GO test -c -o "$KUBE_BIN/e2e.test.new" k8s.io/kubernetes/test/e2e) ;;
	ginkgo)
		(cd "$dir" && $GO get "github.com/onsi/ginkgo/v2/ginkgo@$ginkgo" &&
			$GO build -o "$KUBE_BIN/ginkgo.new" github.com/onsi/ginkgo/v2/ginkgo) ;;
	agnhost)
		(cd "$dir" && $GO get "k8s.io/kubernetes/test/images/agnhost/...@$KUBE_VERSION" &&
			CGO_ENABLED=0 $GO build -ldflags "-s -w" -o "$KUBE_BIN/agnhost.new" k8s.io/kubernetes/test/images/agnhost) ;;
	nnp)
		(cd "$dir" && CGO_ENABLED=0 $GO build -ldflags "-s -w" -o "$KUBE_BIN/nnp.new" k8s.io/kubernetes/test/images/nonewprivs) ;;
	esac
	mv "$KUBE_BIN/$b.new" "$KUBE_BIN/$b"
}

build_etcd() {
	local dir=$BUILD/etcd
	mkdir -p "$dir"
	if [[ ! -f $dir/go.mod ]]; then
		printf 'module etcdbuild\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > "$dir/go.mod"
	fi
	(cd "$dir" && $GO get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" && $GO build -o "$KUBE_BIN/etcd.new" go.etcd.io/etcd/server/v3)
	mv "$KUBE_BIN/etcd.new" "$KUBE_BIN/etcd"
}

build_metrics_server() {
	local gobin=$BUILD/metrics-server
	mkdir -p "$gobin"
	CGO_ENABLED=0 GOBIN=$gobin $GO install -ldflags "-s -w" "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION"
	mv "$gobin/metrics-server" "$KUBE_BIN/metrics-server"
}

for b in "${want[@]}"; do
	if [[ -x $KUBE_BIN/$b ]]; then
		continue
	fi
	start=$SECONDS
	version=$KUBE_VERSION
	case $b in
	etcd) version=$ETCD_VERSION ;;
	metrics-server) version=$METRICS_SERVER_VERSION ;;
	esac
	echo "kube/build.sh: building $b ($version) into $KUBE_BIN; the first build takes about 10 minutes on 2 cores" >&2
	case $b in
	etcd) build_etcd ;;
	metrics-server) build_metrics_server ;;
	e2e.test | ginkgo | agnhost | nnp) build_e2e "$b" ;;
	*) build_k8s "$b" ;;
	esac
	echo "kube/build.sh: $b built in $((SECONDS - start)) s" >&2
done
