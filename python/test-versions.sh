#!/usr/bin/env bash
# The Python SDK's tests under other Python versions than the test command's: for each interpreter
# given (default: every `python3.N` from 3.9 up found on PATH or under pyenv), a venv in
# target/py-versions/ with maturin, numpy and pytest from PyPI (the newest each version takes), a
# debug build of the package for it, and pytest python/tests against this build's server binary
# and guests. Not in CI (the CI machine has one Python); run it after changing the package.
#
#   bash python/test-versions.sh                       # every version found
#   bash python/test-versions.sh python3.9 python3.13  # these
#
# Each version rebuilds pyo3 for its interpreter (about a minute), and so does the next
# `bash python/install.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."

interpreters=("$@")
if [ ${#interpreters[@]} -eq 0 ]; then
    for minor in 9 10 11 12 13 14; do
        found=$(command -v "python3.$minor" || true)
        # A pyenv shim exists for every version but runs only the selected ones.
        if [ -n "$found" ] && ! "$found" -c '' 2>/dev/null; then found=; fi
        if [ -z "$found" ] && [ -d "${PYENV_ROOT:-$HOME/.pyenv}/versions" ]; then
            found=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$minor".*/bin/python3 2>/dev/null | tail -n 1 || true)
        fi
        [ -n "$found" ] && interpreters+=("$found")
    done
fi
[ ${#interpreters[@]} -gt 0 ] || { echo "no Python 3.9+ interpreter found" >&2; exit 1; }

rustup target add wasm32-wasip2 >/dev/null
cargo build -q -p wasmrpc-host --bin wasmrpc
cargo build -q --profile guest --target wasm32-wasip2 --target-dir target/guests \
    -p example-add -p example-strings -p guest-hostile
export WASMRPC_BIN=$PWD/target/debug/wasmrpc
export WASMRPC_GUEST_DIR=$PWD/target/guests/wasm32-wasip2/guest
WASMRPC_NATS_SERVER=$(bash tests/nats/setup.sh | tail -n 1)
export WASMRPC_NATS_SERVER

results=()
for interpreter in "${interpreters[@]}"; do
    version=$("$interpreter" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    venv=target/py-versions/venv-$version
    echo "== Python $version ($interpreter)" >&2
    [ -x "$venv/bin/python" ] || "$interpreter" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "maturin>=1.16,<2" numpy pytest ml_dtypes
    wheels=target/py-versions/wheels-$version
    rm -rf "$wheels"
    PYO3_PYTHON="$PWD/$venv/bin/python" VIRTUAL_ENV="$PWD/$venv" "$venv/bin/maturin" build \
        --quiet --manifest-path python/Cargo.toml --interpreter "$PWD/$venv/bin/python" \
        --out "$wheels" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
        --force-reinstall "$wheels"/wasmrpc-*.whl
    if "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests; then
        results+=("Python $version: passed")
    else
        results+=("Python $version: FAILED")
    fi
done
printf '%s\n' "${results[@]}"
! printf '%s\n' "${results[@]}" | grep -q FAILED
