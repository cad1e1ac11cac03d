#!/usr/bin/env bash
# Issue 32's reproduced findings, against a built server: each line prints what it answered.
# The suite proves each fix (tests/e2e/browsers.rs, artifacts.rs, secrets.rs, in_flight.rs); this
# is the quick look by hand against a release build, as an outside attacker would see it:
#
#   cargo build --release -p wasmrpc-host   # and the test guests, built by any run of tests/run.sh
#   bash tests/attacks/issue32.sh            # BIN=path/to/wasmrpc for another build
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-$PWD/target/release/wasmrpc}
G=$PWD/target/guests/wasm32-wasip2/guest
BASE=$(mktemp -d); chmod 755 "$BASE"; DATA=$BASE/data; PORT=$((20000 + RANDOM % 20000)); U=http://127.0.0.1:$PORT
$BIN serve --listen 127.0.0.1:$PORT --data-dir "$DATA" >"$BASE/log" 2>&1 & PID=$!
WORK=$(mktemp -d); trap 'kill $PID 2>/dev/null; rm -rf "$BASE" "$WORK"' EXIT
for i in $(seq 100); do curl -sf $U/readyz >/dev/null && break; sleep 0.1; done
curl -s -o /dev/null -X PUT --data-binary @$G/example_add.wasm "$U/v1/methods/add?export=add"
echo "1a cross-site form load:   $(curl -s -o /dev/null -w '%{http_code}' -H 'Origin: http://evil.example' -H 'Content-Type: text/plain' --data-binary '{"x":"=1"}' $U/v2/repository/models/add/load)"
echo "1b cross-site form unload: $(curl -s -o /dev/null -w '%{http_code}' -H 'Origin: http://evil.example' -H 'Content-Type: text/plain' --data-binary '{"x":"=1"}' $U/v2/repository/models/add/unload)"
echo "1c rebound Host GET:       $(curl -s -o /dev/null -w '%{http_code}' -H "Host: evil.example:$PORT" $U/v1/methods)"
echo "1d rebound Host DELETE:    $(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Host: evil.example:$PORT" $U/v1/methods/add)"
echo "1e text/plain upload:      $(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: text/plain' --data-binary @$G/example_add.wasm $U/v1/methods/add2?export=add)"
echo "1f curl as in the README:  $(curl -s -o /dev/null -w '%{http_code}' $U/v1/methods/add/call -d '{"args":[{"dtype":"int32","shape":[1],"data":[1]},{"dtype":"int32","shape":[1],"data":[2]}]}')"
echo "1g add still version:      $(curl -s $U/v1/methods/add | python3 -c 'import json,sys; print(json.load(sys.stdin)["versions"])')"
# 2: an 18 MB component with an import the server refuses (the fs guest, its `wasi:filesystem/types`
# renamed `wasi:filesystem/typez`, which is no WASI interface, plus an 18 MB custom section). Since
# issue 33 the real WASI 0.2 interfaces are accepted (docs/security.md, "What a guest gets").
python3 - "$G/guest_forbidden_fs.wasm" "$WORK/big.wasm" <<'PY'
import sys
def leb(n):
    out=bytearray()
    while True:
        b=n&0x7f; n>>=7
        out.append(b|(0x80 if n else 0))
        if not n: return bytes(out)
base=open(sys.argv[1],'rb').read().replace(b"wasi:filesystem/types@", b"wasi:filesystem/typez@")
name=b"padding"; payload=b"\0"*(18<<20)
body=leb(len(name))+name+payload
open(sys.argv[2],'wb').write(base+b"\0"+leb(len(body))+body)
PY
echo "2a 18 MB forbidden import:  $(curl -s -o /dev/null -w '%{http_code} in %{time_total} s' -X PUT --data-binary @"$WORK/big.wasm" $U/v1/methods/big)"
echo "2b again:                   $(curl -s -o /dev/null -w '%{http_code} in %{time_total} s' -X PUT --data-binary @"$WORK/big.wasm" $U/v1/methods/big)"
echo "2c artifacts on disk:       $(du -sk $DATA/artifacts 2>/dev/null | cut -f1) KiB; files: $(ls $DATA/artifacts | tr '\n' ' ')"
echo "2d data dir mode (umask $(umask)): $(stat -c %a "$DATA"); artifact modes: $(stat -c %a "$DATA"/artifacts/* | sort -u | tr '\n' ' ')"
# 3: the NATS password in help.
echo "3  password in --help:      $(WASMRPC_CLUSTER=nats://user:PASSWORD@127.0.0.1:4222 $BIN serve --help | grep -c PASSWORD)"
# 5: rank 100 000 and rank 65.
python3 -c 'import json; print(json.dumps({"args":[{"dtype":"float32","shape":[1]*100000,"data":[1]}]}))' > "$WORK/rank.json"
echo "5a rank 100 000:            $(curl -s -o "$WORK/body.txt" -w '%{http_code} in %{time_total} s' $U/v1/methods/add/call --data-binary @"$WORK/rank.json"), answer $(wc -c < "$WORK/body.txt") bytes"
