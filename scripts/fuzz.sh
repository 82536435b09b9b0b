#!/usr/bin/env bash
# Maintenance command, NOT run in CI: fuzzes the readers of hostile input for a bounded
# time each (cargo-fuzz / libFuzzer, targets in fuzz/):
#   archive_reader   the backup tarball reader (read_archive, parse_archive,
#                    Manifest::from_archive) with small limits
#   manifest_reader  manifest.json.gz, <name>-resource-list.json.gz, <name>-results.gz
#   protobuf_body    the embedded API server's protobuf request-body decoder
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# SECONDS (default 60) is the time given to each target (libFuzzer -max_total_time).
# The seed corpus is written first by our own writers (the ignored test
# velero::fuzz_seeds), into fuzz/corpus/<target>/, which keeps what earlier runs found.
# Exits non-zero if any target crashed (panic, failed assertion, memory budget,
# sanitizer report, timeout); the input is kept as fuzz/artifacts/<target>/crash-*, and
#   RUSTC_BOOTSTRAP=1 cargo fuzz run <target> fuzz/artifacts/<target>/crash-...
# (from the repository root) replays it.
#
# Needs cargo-fuzz (installed from crates.io with `cargo install cargo-fuzz --locked`
# when missing). It works on stable Rust: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its
# nightly-only flags (-Zsanitizer=address, sanitizer coverage).
set -euo pipefail

seconds="${1:-60}"
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(archive_reader manifest_reader protobuf_body)
case "$seconds" in
    '' | *[!0-9]*)
        echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
        exit 2
        ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

echo "fuzz: writing the seed corpus" >&2
GRANARY_FUZZ_CORPUS="$root/fuzz/corpus" \
    cargo test -q -p granary-velero --lib fuzz_seeds -- --ignored --exact \
    fuzz_seeds::write_fuzz_seed_corpus >&2

# The protobuf decoder's seeds: the bodies kubectl 1.32 sent (tests/fixtures/protobuf),
# after the target's mode byte (even: it puts the `k8s\0` prefix back).
mkdir -p fuzz/corpus/protobuf_body
for f in tests/fixtures/protobuf/*.bin; do
    { printf '\000'; tail -c +5 "$f"; } >"fuzz/corpus/protobuf_body/seed-$(basename "$f")"
done

failed=()
for target in "${targets[@]}"; do
    echo "fuzz: $target for ${seconds}s" >&2
    mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
    # -rss_limit_mb bounds the whole process; each target also asserts its own budget.
    if ! cargo fuzz run "$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -max_len=32768 -timeout=20 -rss_limit_mb=2048 \
        -print_final_stats=1; then
        failed+=("$target")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: CRASH in ${failed[*]}; inputs under fuzz/artifacts/" >&2
    exit 1
fi
echo "fuzz: no crash in ${targets[*]} (${seconds}s each)" >&2
