#!/bin/sh
# Regenerates the Go code of amplifier_module.proto (run by `go generate`).
# Needs protoc (Debian: apt-get install protobuf-compiler); the two Go
# plugins are built at the versions pinned here, matching go.mod's
# google.golang.org/protobuf and google.golang.org/grpc.
set -eu
cd "$(dirname "$0")"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
GOBIN="$bin" go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
GOBIN="$bin" go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PATH="$bin:$PATH" protoc --go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative amplifier_module.proto
