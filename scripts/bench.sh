#!/usr/bin/env bash
# Runs Granary's benchmarks side by side with their peers (docs/benchmarks.md#method),
# release build:
#
#   scripts/bench.sh                      # every benchmark at its default size
#   scripts/bench.sh delete copy          # the named ones
#   scripts/bench.sh garden --size 3000   # any `granary bench` flags (--size N, --json)
#
# Installs the peers from the package registries when missing (never a downloaded
# binary): awscli from PyPI into the tools venv of scripts/emulators.sh, rclone from
# Debian's apt package. kubectl (velero_backup, velero_restore) is `$GRANARY_KUBECTL` or
# `kubectl` on PATH (scripts/test.sh fetches Debian's). A peer that is still missing
# shows as "not installed" in the tables: never a made-up figure.
# Starts the S3 emulator (moto) for `delete`, `copy` and `migrate` unless GRANARY_TEST_S3_ENDPOINT
# is set. Results: <target dir>/bench/<name>.json.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export AWS_EC2_METADATA_DISABLED=true
GRANARY_AWSCLI_VERSION=1.46.3

# shellcheck source=scripts/emulators.sh
source scripts/emulators.sh

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else return 1; fi
}

install_peers() {
  local venv
  venv="$(_emulators_tools_dir)/venv"
  if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('awscli') != '$GRANARY_AWSCLI_VERSION')" 2>/dev/null; then
    echo "==> installing awscli==$GRANARY_AWSCLI_VERSION into $venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check "awscli==$GRANARY_AWSCLI_VERSION" ||
      echo "warning: awscli could not be installed; its column will say \"not installed\"" >&2
  fi
  if ! command -v rclone >/dev/null 2>&1 && [ -z "${GRANARY_RCLONE:-}" ]; then
    echo "==> installing rclone (Debian package)" >&2
    if ! as_root apt-get install -y -qq rclone >/dev/null 2>&1; then
      as_root apt-get update -qq >/dev/null 2>&1 || true
      as_root apt-get install -y -qq rclone >/dev/null 2>&1 ||
        echo "warning: rclone could not be installed; its column will say \"not installed\"" >&2
    fi
  fi
}

echo "==> installing the storage emulators and the peers (when missing)" >&2
emulators_install
install_peers
echo "==> starting the storage emulators" >&2
emulators_start
trap emulators_stop EXIT

echo "==> building granary (release)" >&2
cargo build --release --bin granary

# No benchmark named: all of them.
args=("$@")
named=0
skip=0
for a in "${args[@]}"; do
  if [ "$skip" = 1 ]; then skip=0; continue; fi
  case "$a" in
    --size) skip=1 ;;
    -*) ;;
    *) named=1 ;;
  esac
done
[ "$named" = 1 ] || args=(all "${args[@]}")

"$CARGO_TARGET_DIR/release/granary" bench "${args[@]}"
