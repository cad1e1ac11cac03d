#!/usr/bin/env bash
# The Python guest toolchain: componentize-py (pinned) in target/guest-py-venv, which turns an
# `app.py` written with guest-sdk/python (wasmrpc_guest) into a component of wit/tensor.wit.
#
#   bash tests/toolchains/python.sh        # prints the componentize-py path on its last line
#
# Idempotent and quiet when the pinned version is there already (a stamp in the venv holds it). A
# reinstall starts from an empty venv, so nothing of an older version lingers. componentize-py
# bundles its own CPython for the guest, so the interpreter that makes this venv (PYTHON, default
# python3) only runs the build tool; the wheel is binary, nothing is compiled on the way.
set -euo pipefail
cd "$(dirname "$0")/../.."

version=0.25.1
venv=target/guest-py-venv
python=${PYTHON:-python3}
stamp=$venv/componentize-py.stamp

if [[ -x $venv/bin/componentize-py && -f $stamp && "$(cat "$stamp")" == "$version" ]]; then
    echo "$PWD/$venv/bin/componentize-py"
    exit 0
fi

echo "installing componentize-py==$version into $venv" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
    --only-binary=:all: "componentize-py==$version"
"$venv/bin/componentize-py" --version >&2
echo "$version" >"$stamp"
echo "$PWD/$venv/bin/componentize-py"
