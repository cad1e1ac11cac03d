#!/usr/bin/env bash
# What the console's browser tests (tests/browser, run by tests/e2e/console.rs) need, under
# target/browser and nowhere else: Debian's chromium and chromium-driver with the libraries they
# need beyond the machine's, unpacked (not installed) from the distribution's package archive,
# and a venv with Selenium and pytest (tests/browser/requirements.txt).
#
#   bash tests/browser/setup.sh      # prints three lines: python, chromium, chromedriver
#
# Idempotent and quick when nothing changed (stamps hold what was set up). The browser needs
# LD_LIBRARY_PATH set to the directories in target/browser/root/ld-path, which the test sets.
set -euo pipefail
cd "$(dirname "$0")/../.."

dir=target/browser
root=$dir/root
venv=$dir/venv
requirements=tests/browser/requirements.txt
python=${PYTHON:-python3}
# The packages, by name: apt resolves the version the machine's sources carry, and the libraries
# they need that the machine lacks.
packages=(chromium chromium-driver)

want_venv="$(sha256sum "$requirements" | cut -d' ' -f1) $("$python" -c 'import sys; print(sys.version.split()[0])')"
if [[ ! -x $venv/bin/python || ! -f $venv/stamp || "$(cat "$venv/stamp")" != "$want_venv" ]]; then
    echo "setting up $venv from $requirements" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
        --only-binary=:all: --requirement "$requirements"
    echo "$want_venv" >"$venv/stamp"
fi

want_root="$(apt-cache policy "${packages[@]}" 2>/dev/null | grep -E '^\S|Candidate' | tr -s ' ' | tr '\n' ' ')"
if [[ ! -x $root/usr/lib/chromium/chromium || ! -f $root/stamp || "$(cat "$root/stamp")" != "$want_root" ]]; then
    if ! command -v apt-get >/dev/null; then
        echo "error: the browser tests take chromium from Debian's archive, and this machine has no apt-get" >&2
        exit 1
    fi
    echo "unpacking ${packages[*]} and the libraries they need into $root (about 120 MB)" >&2
    rm -rf "$root" "$dir/debs"
    mkdir -p "$dir/debs/partial" "$root"
    # --download-only fetches the packages and whatever they need that is not installed, into
    # our own directory: nothing is installed on the machine.
    apt-get install --quiet --yes --download-only --no-install-recommends \
        -o Dir::Cache::archives="$PWD/$dir/debs" -o Debug::NoLocking=1 "${packages[@]}" >&2
    for deb in "$dir"/debs/*.deb; do
        dpkg-deb --extract "$deb" "$root"
    done
    rm -rf "$dir/debs"
    find "$root" -name '*.so*' -printf '%h\n' | sort -u | sed "s|^|$PWD/|" >"$root/ld-path"
    echo "$want_root" >"$root/stamp"
fi

echo "$PWD/$venv/bin/python"
echo "$PWD/$root/usr/lib/chromium/chromium"
echo "$PWD/$root/usr/bin/chromedriver"
