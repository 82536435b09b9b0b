#!/usr/bin/env bash
# Runs Granary's whole test suite on a fresh machine: installs what the tests need that is
# missing (cargo-nextest, Debian's kubectl 1.20 and promtool, the storage emulators), then
# runs doc, unit and integration tests.
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

# Extracts Debian package $1 into a cache directory $2 (once per machine: later runs find
# it there; the system's own copy, if any, is left alone).
fetch_deb() {
  local package="$1" dir="$2"
  command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1 || return 1
  echo "==> fetching Debian's $package into $dir"
  local tmp ok=1
  tmp="$(mktemp -d)"
  # apt-get download needs the package lists; refresh them only when it fails.
  if ! (cd "$tmp" && apt-get download -qq "$package" >/dev/null 2>&1); then
    if [ "$(id -u)" = 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
    (cd "$tmp" && apt-get download -qq "$package" >/dev/null) || ok=0
  fi
  if [ "$ok" = 1 ]; then
    rm -rf "$dir.partial" && mkdir -p "$dir.partial" &&
      dpkg -x "$tmp"/"$package"_*.deb "$dir.partial" &&
      rm -rf "$dir" && mv "$dir.partial" "$dir" || ok=0
  fi
  rm -rf "$tmp"
  [ "$ok" = 1 ]
}

# The kubectl tests run Debian's kubernetes-client (kubectl 1.20), the oldest kubectl
# Granary supports.
install_kubectl_120() {
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/granary/kubectl-1.20"
  local bin="$dir/usr/bin/kubectl"
  [ -x "$bin" ] || fetch_deb kubernetes-client "$dir" || return 1
  "$bin" version --client >/dev/null 2>&1 || return 1
  export GRANARY_KUBECTL="$bin"
  # Tests that run plain `kubectl` get this one too when the machine has none.
  command -v kubectl >/dev/null 2>&1 || export PATH="$dir/usr/bin:$PATH"
  echo "==> kubectl tests use $bin ($("$bin" version --client --short 2>/dev/null))"
}
if [ -z "${GRANARY_KUBECTL:-}" ] && ! install_kubectl_120; then
  echo "warning: could not get Debian's kubectl 1.20; the kubectl tests use kubectl on PATH" >&2
fi

# The monitoring tests (tests/e2e/monitoring.rs) run promtool from Debian's prometheus
# package.
install_promtool() {
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/granary/prometheus"
  local bin="$dir/usr/bin/promtool"
  [ -x "$bin" ] || fetch_deb prometheus "$dir" || return 1
  "$bin" --version >/dev/null 2>&1 || return 1
  export GRANARY_PROMTOOL="$bin"
  echo "==> monitoring tests use $bin ($("$bin" --version 2>&1 | head -n 1))"
}
if [ -z "${GRANARY_PROMTOOL:-}" ] && ! install_promtool; then
  echo "warning: could not get Debian's promtool; the monitoring tests use promtool on PATH and fail without one" >&2
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
rc=0
rm -f target/nextest/default/junit.xml
cargo nextest run --workspace --locked --no-fail-fast "$@" || rc=$?

# No credential the tests use may appear in any log line of the whole run (the captured
# output of every test, passed ones too, is in the JUnit file: .config/nextest.toml).
# (nextest keeps its store under the workspace's target/, whatever CARGO_TARGET_DIR says)
junit="target/nextest/default/junit.xml"
if [ -f "$junit" ]; then
  # Azurite's account key (the Azure tests' credential) and the markers of the secret
  # hygiene test's credentials.
  leaks="$(grep -c -E 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq|hYg1ene' "$junit" || true)"
  if [ "${leaks:-0}" != 0 ]; then
    echo "error: a test credential appears in $leaks line(s) of the captured test output ($junit)" >&2
    rc=1
  fi
fi
exit "$rc"
