#!/usr/bin/env bash
# The Python environment of the v2 client tests: target/py-venv with tests/python/requirements.txt.
#
#   bash tests/python/setup.sh        # prints the interpreter's path on its last line
#
# Idempotent and quick when nothing changed: a stamp in the venv holds the hash of the requirements
# and the interpreter's version, and the venv is only (re)built when they differ. A rebuild starts
# from an empty venv, so a package dropped from the requirements does not linger.
# PYTHON picks the interpreter that creates the venv (default: python3).
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=target/py-venv
requirements=tests/python/requirements.txt
python=${PYTHON:-python3}
stamp=$venv/requirements.stamp

want="$(sha256sum "$requirements" | cut -d' ' -f1) $("$python" -c 'import sys; print(sys.version.split()[0])')"
if [[ -x $venv/bin/python && -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
    echo "$PWD/$venv/bin/python"
    exit 0
fi

echo "setting up $venv from $requirements ($("$python" --version))" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
# Wheels only: nothing is compiled on the way, so the set-up takes seconds, not minutes.
"$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
    --only-binary=:all: --requirement "$requirements"
echo "$want" >"$stamp"
echo "$PWD/$venv/bin/python"
