#!/usr/bin/env bash
# Build and run every fuzz target (cargo fuzz, on the nightly toolchain) for SECONDS each.
#
#   bash fuzz/run.sh          # 300 s a target: the long run
#   bash fuzz/run.sh 20       # the short pass .ci/run makes
#
# Seeds: the golden wire examples (proto/tests/golden). New inputs collect in fuzz/corpus/<target>;
# a crash is saved under fuzz/artifacts/<target>/ and fails the run.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-300}
tools="$(pwd)/../target/tools"
export PATH="$tools/bin:$PATH"
if ! command -v cargo-fuzz >/dev/null; then
    echo "fuzz: installing cargo-fuzz into $tools"
    cargo install cargo-fuzz --locked --root "$tools"
fi
rustup toolchain list | grep -q '^nightly' || {
    echo "fuzz: cargo fuzz needs the nightly toolchain (rustup toolchain install nightly)" >&2
    exit 1
}
golden=../proto/tests/golden
for target in tensor_json call_request infer_request; do
    mkdir -p "corpus/$target"
    echo "fuzz: $target for ${seconds} s"
    cargo +nightly fuzz run "$target" "corpus/$target" "$golden/canonical" "$golden/accepted" \
        "$golden/refused" -- -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1
done
# Uploads: seeded with the example and test components when they are built (tests/run.sh builds
# them into target/guests).
mkdir -p corpus/component_upload
for wasm in ../target/guests/wasm32-wasip2/guest/*.wasm; do
    [ -f "$wasm" ] && cp -n "$wasm" corpus/component_upload/ || true
done
echo "fuzz: component_upload for ${seconds} s"
cargo +nightly fuzz run component_upload corpus/component_upload -- \
    -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=30 -print_final_stats=1
