#!/usr/bin/env bash
# Issue 33, "100 Python methods registered: resident memory recorded, and <= 2 GiB": 100
# *distinct* Python components, each registered under its own name and called once, in one
# release server, with no restart; then the same server restarted on the same data directory.
#
# The components are one `wasmrpc build` of host/benches/guests/py_add/app.py with a custom
# section appended whose payload differs (a different sha256, so a different component for the
# server: its own compile, artifact and image), as tests/e2e/support/compose.rs
# `with_custom_section` makes them. Each compile takes 8-13 s on a 2-CPU machine: about 15-20
# minutes in all. Prints VmRSS, RssAnon and RssFile of the server (/proc/PID/status, MiB):
#
#   empty      the server started, nothing registered
#   uploaded   the 100 components registered and each called once
#   loaded     a new server on the same data directory, every component loaded, none called
#   restarted  then each method called once
#   idle       then, once every component's code has been handed back for want of calls
#              (`--release-idle-code-s`, default 30 s; MANY_PY_IDLE_S sets it here)
#
#   cargo build --release -p wasmrpc-host
#   bash host/benches/many_python.sh                     # 100 components
#   MANY_PY=10 bash host/benches/many_python.sh          # fewer
#   MANY_PY_TOOLCHAINS=/work/main/target/toolchains bash host/benches/many_python.sh
#
# Needs about 6 GB of disk under $TMPDIR (each component's 18 MB blob and 37 MB artifact). No
# quota flag is needed: the default tenant has no max_methods or max_stored_bytes by default
# (docs/limits.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
wasmrpc=$PWD/target/release/wasmrpc
count=${MANY_PY:-100}
toolchains=${MANY_PY_TOOLCHAINS:-$PWD/target/toolchains}

data=$(mktemp -d)
server=
stop() { if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi; }
trap 'stop; rm -rf "$data"' EXIT

"$wasmrpc" build host/benches/guests/py_add/app.py -o "$data/py_add.wasm" \
    --toolchains "$toolchains" >&2

start() {
    local log="$data/serve.$1.log"
    "$wasmrpc" serve --listen 127.0.0.1:0 --data-dir "$data/d" \
        --release-idle-code-s "${MANY_PY_IDLE_S:-30}" >"$log" 2>&1 &
    server=$!
    until grep -q "listening on" "$log"; do sleep 0.1; done
    address=$(grep -o "listening on [^ ]*" "$log" | head -1 | sed 's/listening on //; s#http://##')
    until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$address/readyz")" = 200 ]; do
        sleep 0.5
    done
}

rss() { # label
    awk -v l="$1" '/^(VmRSS|RssAnon|RssFile|RssShmem):/ { v[$1] = int($2 / 1024) }
        END { printf "%-10s VmRSS %5d MiB  RssAnon %5d MiB  RssFile %5d MiB  RssShmem %4d MiB\n",
              l, v["VmRSS:"], v["RssAnon:"], v["RssFile:"], v["RssShmem:"] }' \
        "/proc/$server/status"
    printf '%-10s descriptors %d (memfd %d, artifact files %d)\n' "" \
        "$(ls "/proc/$server/fd" | wc -l)" \
        "$(ls -l "/proc/$server/fd" | grep -c memfd || true)" \
        "$(ls -l "/proc/$server/fd" | grep -c '\.cwasm' || true)"
}

# Where the resident pages are, by kind of mapping (/proc/PID/smaps, MiB): the artifacts' code
# (r-x), the rest of the artifacts mapped read-only (r--), memory images mapped into pooled slots
# (rw- of an artifact or a memfd), and anonymous memory.
mappings() {
    python3 - "$server" <<'PY'
import re, sys
kinds = {}
kind = None
for line in open(f"/proc/{sys.argv[1]}/smaps"):
    if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
        fields = line.split()
        path, perm = (fields[5] if len(fields) > 5 else ""), fields[1]
        if path.endswith(".cwasm") or "wasm-memory-image" in path:
            kind = {"r-xp": "artifact code", "r--p": "artifact read-only"}.get(perm, "memory images")
        else:
            kind = "other files" if path.startswith("/") else "anonymous"
    elif line.startswith("Rss:"):
        kinds[kind] = kinds.get(kind, 0) + int(line.split()[1])
print("           " + ", ".join(f"{k} {v // 1024} MiB" for k, v in sorted(kinds.items())))
PY
}

# Wait until the server has handed back idle code $1 times in all (/metrics).
idle() {
    until [ "$(curl -s "http://$address/metrics" |
        awk '/^wasmrpc_idle_code_releases_total / { print $2 }')" -ge "$1" ]; do
        sleep 1
    done
}

# Upload (when $1 is "upload") and call each of the components once; fails on any error.
each() {
    python3 - "$1" "$address" "$data/py_add.wasm" "$count" <<'PY'
import json, sys, time, urllib.request
mode, address, path, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
base = open(path, "rb").read()

def leb(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)

def distinct(n):
    # A custom section (id 0) named "many-python" whose payload is n: a different component.
    name = b"many-python"
    body = leb(len(name)) + name + str(n).encode()
    return base + b"\0" + leb(len(body)) + body

def request(method, url, body, content_type):
    r = urllib.request.Request(f"http://{address}{url}", data=body, method=method,
                               headers={"content-type": content_type})
    with urllib.request.urlopen(r, timeout=300) as answer:
        return answer.read()

args = json.dumps({"args": [{"dtype": "float32", "shape": [3], "data": [1, 2, 3]},
                            {"dtype": "float32", "shape": [3], "data": [1, 2, 3]}]}).encode()
started = time.time()
for n in range(1, count + 1):
    if mode == "upload":
        request("PUT", f"/v1/methods/py_{n}?export=add", distinct(n), "application/wasm")
    out = json.loads(request("POST", f"/v1/methods/py_{n}/call", args, "application/json"))
    assert out["outputs"][0]["data"] == [2, 4, 6], out
    if n % 10 == 0:
        print(f"  {mode}: {n} done, {time.time() - started:.0f} s", file=sys.stderr)
PY
}

start first
rss empty
each upload
rss uploaded
mappings
idle "$count"
rss idle
mappings
compiles=$(curl -s "http://$address/metrics" | awk '/^wasmrpc_compiles_total / { print $2 }')
echo "           compiles $compiles"
stop
start second
rss loaded
mappings
each call
rss restarted
mappings
idle "$count"
rss idle
mappings
compiles=$(curl -s "http://$address/metrics" | awk '/^wasmrpc_compiles_total / { print $2 }')
echo "           compiles $compiles"
