# Sourced by the tracing benchmarks (`trace_ab.sh`, `trace_profile.sh`) after `cd` to the
# repository: installs the Debian packages named in "$@" (e.g. wrk, linux-perf) when their
# commands are missing, builds the release binary and the baseline server, builds `add` with
# `wasmrpc build` ($component), makes a work directory ($work) removed on exit with every
# process in $pids, and starts the OTLP sink of the baseline server's process ($sink).

for package in "$@"; do
    command=$package; [ "$package" = linux-perf ] && command=perf
    if ! command -v "$command" >/dev/null; then
        echo "installing $package from Debian's packages" >&2
        if [ "$(id -u)" = 0 ]; then apt-get install -y "$package" >&2; else sudo apt-get install -y "$package" >&2; fi
    fi
done
cargo build --release -p wasmrpc-host --bin wasmrpc --example baseline_server >&2
rustup target add wasm32-unknown-unknown >&2
component=$(target/release/wasmrpc build --profile guest --target-dir target/guests -p example-add)

work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM

# The text after "$2" in the log $1, once it is there.
address_in() {
    for _ in $(seq 1 300); do
        if grep -q "$2" "$1"; then
            grep "$2" "$1" | sed -n "s|.*$2\([^ ]*\).*|\1|p" | head -1
            return
        fi
        sleep 0.1
    done
    echo "did not start:" >&2; cat "$1" >&2; exit 1
}

target/release/examples/baseline_server 127.0.0.1:0 > "$work/baseline.log" 2>&1 &
pids+=($!)
sink=$(address_in "$work/baseline.log" "otlp sink listening on http://")
