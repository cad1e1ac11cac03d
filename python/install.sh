#!/usr/bin/env bash
# Builds the Python SDK (python/) with maturin and installs it into target/py-venv, the venv of
# tests/python/setup.sh (which it runs first; maturin, numpy and pytest come from there, pinned).
#
#   bash python/install.sh             # a debug build: quick, and what the tests use
#   bash python/install.sh --release   # an optimised one
#
# Cargo's incremental build makes a re-run with nothing changed take seconds; the wheel is only
# reinstalled when its native module or Python files changed.
set -euo pipefail
cd "$(dirname "$0")/.."

python=$(bash tests/python/setup.sh | tail -n 1)
venv=$(dirname "$(dirname "$python")")
wheels=target/py-wheels
rm -rf "$wheels"
# The interpreter pyo3 builds for. (`cargo test --workspace` never builds this crate, so maturin's
# build of pyo3 stays valid between runs; clippy's check of it is a separate build.)
export PYO3_PYTHON="$python"
VIRTUAL_ENV="$venv" "$venv/bin/maturin" build --quiet --manifest-path python/Cargo.toml \
    --interpreter "$python" --out "$wheels" "$@" >&2
wheel=$(ls "$wheels"/wasmrpc-*.whl)
stamp=$venv/wasmrpc-wheel.stamp
# The wheel's contents, not its bytes (zip timestamps change on every build).
want=$("$python" - "$wheel" <<'PY'
import hashlib, sys, zipfile
h = hashlib.sha256()
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in sorted(z.namelist()):
        h.update(name.encode()); h.update(z.read(name))
print(h.hexdigest())
PY
)
if [[ -f $stamp && "$(cat "$stamp")" == "$want" ]] && "$python" -c 'import wasmrpc' 2>/dev/null; then
    exit 0
fi
"$python" -m pip install --quiet --no-input --disable-pip-version-check --no-deps \
    --force-reinstall "$wheel"
echo "$want" >"$stamp"
