#!/usr/bin/env bash
# The main job on the bundled example site, offline: builds trawl (release), serves
# examples/site on 127.0.0.1:8719, runs `trawl run --archive` over examples/urls.txt into
# out/, shows the summary, the first lines of a stored page and a search of the archive, then
# stops the server it started.
# Installs what is missing on Debian (as root): a C compiler, python3 (the static server).
set -euo pipefail
cd "$(dirname "$0")/.."

port=8719
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/trawl-target}"

missing=()
# A C compiler and make: SQLite, zstd and jemalloc (the binary's allocator) are built from C.
{ command -v cc && command -v make; } >/dev/null 2>&1 || missing+=(build-essential)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${missing[@]}"
  else
    echo "quickstart: please install: ${missing[*]}" >&2; exit 1
  fi
fi
command -v cargo >/dev/null 2>&1 || { echo "quickstart: needs a Rust toolchain (https://rustup.rs)" >&2; exit 1; }

echo "==> building trawl (release; the first build takes a while)"
cargo build --release --locked --bin trawl
trawl="$CARGO_TARGET_DIR/release/trawl"

echo "==> serving examples/site on http://127.0.0.1:$port/"
python3 -m http.server "$port" --bind 127.0.0.1 --directory examples/site >/dev/null 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  python3 - "$port" <<'PY' 2>/dev/null && break
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.2).close()
PY
  sleep 0.1
done

echo "==> trawl run --archive --file examples/urls.txt --out out/"
# The example site is on loopback, which the SSRF guard refuses by default.
"$trawl" --data-dir .trawl run --allow-private-network --cache-ttl 0 --archive --file examples/urls.txt --out out

echo "==> out/pages.jsonl (url, status or error code)"
python3 - <<'PY'
import json
for line in open("out/pages.jsonl"):
    page = json.loads(line)
    outcome = page["error"]["code"] if "error" in page else f'{page["status"]} {page["extractor"]} "{page.get("title", "")}"'
    print(f'  {page["url"]}: {outcome}')
PY
echo "==> trawl read http://127.0.0.1:$port/articles/tidal-power.html --to 12"
"$trawl" --data-dir .trawl read "http://127.0.0.1:$port/articles/tidal-power.html" --to 12
echo "==> trawl search \"lamp colour sectors\" -k 2 (the archive: chunks with heading paths)"
"$trawl" --data-dir .trawl search "lamp colour sectors" -k 2
