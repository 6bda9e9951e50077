#!/usr/bin/env bash
# Installs what the generated clients and their tests need, from Debian and
# npm only: protoc and the gRPC Python plugin (the Python client is
# generated with them), the grpcio and protobuf runtimes, and the npm
# packages of clients/typescript as its package-lock.json pins them.
# Run by make clients (as root, as CI runs; apt-get runs only when a package
# is missing).
set -euo pipefail
cd "$(dirname "$0")/../.."

# protobuf-compiler-grpc's grpc_python_plugin, not python3-grpc-tools:
# Debian 12's grpc-tools (1.14) bundles a protoc older than proto3's
# optional fields, which the API uses; protoc 3.21 and the plugin of grpc
# 1.51 match the runtimes installed beside them.
pkgs=(protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "clients: apt-get install ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

lock=clients/typescript/package-lock.json
stamp=clients/typescript/node_modules/.podsync-lock
if ! cmp -s "$lock" "$stamp" 2>/dev/null; then
	(cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error)
	cp "$lock" "$stamp"
fi
