#!/usr/bin/env bash
# Runs Granary's whole test suite on a fresh machine: installs what the tests need that is
# missing (cargo-nextest, the storage emulators), then runs doc, unit and integration tests.
# Usage: scripts/test.sh [extra nextest arguments, e.g. a test filter]
set -euo pipefail
cd "$(dirname "$0")/.."

# One build directory shared by every run on this machine (kept between CI runs when the
# machine is reused, never relied on).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/granary/target}"
# No credential chain may ever reach a cloud metadata endpoint from a test.
export AWS_EC2_METADATA_DISABLED=true
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "==> installing cargo-nextest"
  cargo install cargo-nextest --locked
fi

if ! command -v kubectl >/dev/null 2>&1; then
  echo "==> installing kubectl (Debian's kubernetes-client) for the kubectl tests"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq kubernetes-client >/dev/null
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq kubernetes-client >/dev/null
  fi
fi

if [ -f scripts/emulators.sh ]; then
  # shellcheck source=scripts/emulators.sh
  source scripts/emulators.sh
  echo "==> installing storage emulators (when missing)"
  emulators_install
  echo "==> starting storage emulators"
  emulators_start
  trap emulators_stop EXIT
fi

echo "==> building"
cargo build --workspace --all-targets --locked

echo "==> doc tests"
cargo test --workspace --doc --locked --quiet

echo "==> unit and integration tests"
cargo nextest run --workspace --locked --no-fail-fast "$@"
