#!/usr/bin/env bash
# Every test: unit tests, doc tests, the guest SDK and examples natively, and the end-to-end suite
# (the real server binary, real HTTP, real guest components built from source for wasm32-wasip2).
#
#   bash tests/run.sh            # extra arguments go to `cargo test`
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target add wasm32-wasip2
cargo test --workspace "$@"
# The optional ndarray conversions (they live in the contract crate; the client forwards the feature).
cargo test -p wasmrpc-proto -p wasmrpc-client --features wasmrpc-proto/ndarray,wasmrpc-client/ndarray "$@"
