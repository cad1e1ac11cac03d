#!/usr/bin/env bash
# Installs the pinned JavaScript component toolchain into target/js-toolchain (never globally):
# @bytecodealliance/componentize-js and @bytecodealliance/jco, exact versions. Idempotent: when the
# pinned versions are already there it prints nothing but the path. Prints the componentize-js
# executable's path as its last line, so callers can do `CJS=$(tests/toolchains/js.sh | tail -1)`.
#
# componentize-js runs wasm-tools in a sandbox that sees only the current directory: pass it a WIT
# directory below the working directory (`--wit wit` from the repository root), not an absolute path
# elsewhere, or it fails with "failed to get path metadata".
set -euo pipefail

COMPONENTIZE_JS_VERSION=0.23.0
JCO_VERSION=1.35.0

root=$(cd "$(dirname "$0")/../.." && pwd)
dir="$root/target/js-toolchain"
bin="$dir/node_modules/.bin"

# The installed version of one package, or nothing when it is absent.
installed_version() {
    local pkg_json="$dir/node_modules/$1/package.json"
    [ -f "$pkg_json" ] && node -e 'process.stdout.write(require(process.argv[1]).version)' "$pkg_json"
}

if [ "$(installed_version @bytecodealliance/componentize-js)" != "$COMPONENTIZE_JS_VERSION" ] ||
    [ "$(installed_version @bytecodealliance/jco)" != "$JCO_VERSION" ] ||
    [ ! -x "$bin/componentize-js" ] || [ ! -x "$bin/jco" ]; then
    command -v npm >/dev/null || { echo "js.sh: npm is required (node 18 or newer)" >&2; exit 1; }
    echo "js.sh: installing componentize-js $COMPONENTIZE_JS_VERSION and jco $JCO_VERSION into $dir" >&2
    mkdir -p "$dir"
    # A private package.json keeps npm from walking up to any other project, and --save-exact pins
    # the versions in it and in the lock file.
    [ -f "$dir/package.json" ] || echo '{ "name": "wasmrpc-js-toolchain", "private": true }' >"$dir/package.json"
    (cd "$dir" && npm install --no-audit --no-fund --save-exact --loglevel=error \
        "@bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION" \
        "@bytecodealliance/jco@$JCO_VERSION" >&2)
fi

echo "$bin/componentize-js"
