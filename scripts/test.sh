#!/usr/bin/env bash
# The whole test suite, on a fresh Debian machine as root: installs what is missing, checks
# formatting, lints, docs, then runs every test inside a private network namespace (loopback
# only), so a regression in the SSRF guard can never send a packet off the machine.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/trawl-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

missing=()
# A C compiler and make: SQLite, zstd and jemalloc (the binary's allocator) are built from C.
{ command -v cc && command -v make; } >/dev/null 2>&1 || missing+=(build-essential)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
# The queue tests start their own redis-server on a loopback port inside the namespace.
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
# The browser tests drive the system Chromium (never a downloaded one).
[ -x /usr/bin/chromium ] || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${missing[@]}"
  else
    echo "test: please install: ${missing[*]}" >&2; exit 1
  fi
fi
command -v cargo >/dev/null 2>&1 || { echo "test: needs a Rust toolchain (https://rustup.rs)" >&2; exit 1; }
for component in rustfmt clippy; do
  cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1 || rustup component add "$component"
done

step() { printf '\n==> %s\n' "$*"; }

step "compose.yaml (docker-compose config: no engine needed)"
TRAWL_API_TOKEN=only-to-validate-the-file TRAWL_WORKER_TOKEN=only-to-validate-the-file docker-compose -f compose.yaml config -q

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --document-private-items --all-features --locked
step "build the tests"
cargo test --workspace --all-features --locked --no-run

# Python tools (PyPI), pinned, in a virtualenv of their own: schemathesis (the API against its
# OpenAPI document), openapi-spec-validator and openapi-python-client (the document is valid
# and a client generated from it works), warcio (the WARC files), firecrawl-py with
# langchain-community (Firecrawl's own clients against the compatible routes: the firecrawl::
# system test) and the MCP SDK (a real MCP host for tests/system/mcp.rs, through
# tests/mcp_client.py). Installed before entering the network namespace, which has no route
# to the package index.
venv="${TRAWL_VENV:-$HOME/.cache/trawl-venv}"
if ! "$venv/bin/st" --version 2>/dev/null | grep -q "4.32.5" \
  || ! "$venv/bin/pip" show warcio 2>/dev/null | grep -q "^Version: 1.8.1$" \
  || ! "$venv/bin/pip" show openapi-spec-validator 2>/dev/null | grep -q "^Version: 0.9.0$" \
  || ! "$venv/bin/pip" show openapi-python-client 2>/dev/null | grep -q "^Version: 0.29.1$" \
  || ! "$venv/bin/pip" show firecrawl-py 2>/dev/null | grep -q "^Version: 4.55.0$" \
  || ! "$venv/bin/pip" show langchain-community 2>/dev/null | grep -q "^Version: 0.4.2$" \
  || ! "$venv/bin/pip" show mcp 2>/dev/null | grep -q "^Version: 2.3.0$"; then
  step "install schemathesis 4.32.5, openapi-spec-validator 0.9.0, openapi-python-client 0.29.1, warcio 1.8.1, firecrawl-py 4.55.0, langchain-community 0.4.2 and mcp 2.3.0 into $venv"
  command -v python3 >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq python3 python3-venv; }
  [ -x "$venv/bin/pip" ] || python3 -m venv "$venv" || { apt-get update -qq && apt-get install -y -qq python3-venv && python3 -m venv "$venv"; }
  "$venv/bin/pip" install -q "schemathesis==4.32.5" "warcio==1.8.1" "six==1.17.0" \
    "openapi-spec-validator==0.9.0" "openapi-python-client==0.29.1" \
    "firecrawl-py==4.55.0" "langchain-community==0.4.2" "mcp==2.3.0"
fi
export WARCIO_BIN="$venv/bin/warcio"

# PostgreSQL: the store tests run against it as well as SQLite, through its unix socket (the
# namespace below has no route to the host's TCP port). Started here when it is down, unless
# PG_TEST_URL points the tests at another server.
if [ -z "${PG_TEST_URL:-}" ]; then
  step "PostgreSQL"
  if ! command -v pg_ctlcluster >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq postgresql
  fi
  if ! pg_isready -q -h /var/run/postgresql 2>/dev/null; then
    for version in $(ls /etc/postgresql 2>/dev/null); do
      pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    done
    for _ in $(seq 1 30); do
      pg_isready -q -h /var/run/postgresql 2>/dev/null && break
      sleep 1
    done
  fi
  pg_isready -h /var/run/postgresql || {
    echo "test: PostgreSQL is not running on /var/run/postgresql (the store tests need it; or set PG_TEST_URL)" >&2
    exit 1
  }
fi

step "cargo test (in a private network namespace: loopback only)"
if ! unshare -rn true 2>/dev/null; then
  echo "test: cannot create a network namespace (unshare -rn); the SSRF tests must not run outside one" >&2
  exit 1
fi
results=$(mktemp)
trap 'rm -f "$results"' EXIT
# Unit, pool and system tests (there are no doc tests; leaving them out keeps the last
# result line meaningful).
set +e
unshare -rn sh -c 'ip link set lo up && exec cargo test --workspace --all-features --locked --offline --lib --bins --tests "$@"' sh "$@" 2>&1 | tee "$results"
status=${PIPESTATUS[0]}
set -e
passed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($i ~ /^passed;?$/) sum += $(i - 1) } END { print sum + 0 }' "$results")
failed=$(awk '/^test result:/ { for (i = 1; i <= NF; i++) if ($i ~ /^failed;?$/) sum += $(i - 1) } END { print sum + 0 }' "$results")
if [ "$status" -ne 0 ]; then
  echo "cargo: $passed passed, $failed failed"
  exit "$status"
fi

step "openapi-spec-validator and a generated client against /openapi.json (in a private network namespace)"
unshare -rn sh -c 'ip link set lo up && exec scripts/openapi.sh "$1" "$2"' sh "$CARGO_TARGET_DIR/debug/trawl" "$venv"

step "schemathesis against /openapi.json (in a private network namespace)"
unshare -rn sh -c 'ip link set lo up && exec scripts/schemathesis.sh "$1" "$2"' sh "$CARGO_TARGET_DIR/debug/trawl" "$venv/bin/st"

echo
echo "cargo: $passed passed, $failed failed"
