#!/usr/bin/env bash
# The OpenAPI document as clients use it: starts a `trawl serve` of its own on a free loopback
# port (with its own data directory), validates GET /openapi.json with openapi-spec-validator,
# generates a Python client from it with openapi-python-client, and drives that client
# against the server (health, a job submitted and read back, an error answer parsed). Stops
# the server by its PID. Run it inside a private network namespace (scripts/test.sh does).
# Usage: scripts/openapi.sh TRAWL_BINARY VENV_DIRECTORY
set -euo pipefail
trawl=$1
venv=$2

work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TRAWL_LOG=error "$trawl" --data-dir "$work/data" serve --bind "127.0.0.1:$port" >"$work/serve.log" 2>&1 &
server=$!
cleanup() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

for _ in $(seq 100); do
  if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/healthz', timeout=1)" 2>/dev/null; then
    break
  fi
  sleep 0.1
done
python3 -c "import urllib.request; open('$work/openapi.json', 'wb').write(urllib.request.urlopen('http://127.0.0.1:$port/openapi.json').read())"

echo "openapi-spec-validator: $("$venv/bin/openapi-spec-validator" "$work/openapi.json")"

# A client generated from the document must build, with every endpoint and every schema
# (the generator warns and leaves out what it cannot parse; only the JPEG preview's body,
# a content type it does not support, may be left out).
(cd "$work" && PATH="$venv/bin:$PATH" "$venv/bin/openapi-python-client" generate --path openapi.json \
  --meta none --output-path trawl_client >"$work/generate.log" 2>&1) || {
  cat "$work/generate.log" >&2
  echo "openapi-python-client could not generate a client" >&2
  exit 1
}
if grep -E "will not be generated|Unable to (parse|process)|Failure to process" "$work/generate.log" >&2; then
  echo "openapi-python-client left parts of the document out (above)" >&2
  exit 1
fi
echo "openapi-python-client: generated a client"

PYTHONPATH="$work" "$venv/bin/python" - "http://127.0.0.1:$port" <<'PY'
import sys

from trawl_client import AuthenticatedClient, Client
from trawl_client.api.health import healthz
from trawl_client.api.jobs import read_job, submit_jobs
from trawl_client.api.pages import read_page
from trawl_client.models import ErrorBody, FetchJobWithKind, FetchJobWithKindKind, JobRecord, Submitted

base = sys.argv[1]
client = Client(base_url=base, raise_on_unexpected_status=True)
# This server has no api.tokens: the header is sent and not needed.
authed = AuthenticatedClient(base_url=base, token="unused", raise_on_unexpected_status=True)

health = healthz.sync_detailed(client=client)
assert health.status_code == 200, health

# Query parameters go in the query string: a page never stored is a 404 not_found.
page = read_page.sync_detailed(client=authed, url_query="http://a.test/", from_=1, to=3)
assert page.status_code == 404, (page.status_code, page.content)
assert isinstance(page.parsed, ErrorBody), page.parsed
assert page.parsed.error.code.value == "not_found", page.parsed

# A job the SSRF guard refuses: the documented 403, parsed.
refused = submit_jobs.sync_detailed(
    client=authed, body=FetchJobWithKind(url="http://127.0.0.1/", kind=FetchJobWithKindKind.FETCH)
)
assert refused.status_code == 403, (refused.status_code, refused.content)
assert refused.parsed.error.code.value == "blocked_destination", refused.parsed

# A job accepted, then read back.
accepted = submit_jobs.sync_detailed(
    client=authed, body=FetchJobWithKind(url="http://example.test/", kind=FetchJobWithKindKind.FETCH)
)
assert accepted.status_code == 202, (accepted.status_code, accepted.content)
assert isinstance(accepted.parsed, Submitted), accepted.parsed
job_id = accepted.parsed.jobs[0].id
record = read_job.sync_detailed(client=authed, id=job_id)
assert record.status_code == 200, (record.status_code, record.content)
assert isinstance(record.parsed, JobRecord), record.parsed
assert record.parsed.id == job_id

missing = read_job.sync_detailed(client=authed, id="no-such-job")
assert missing.status_code == 404, (missing.status_code, missing.content)
assert isinstance(missing.parsed, ErrorBody), missing.parsed
print("generated client: healthz 200; read_page 404; submit_jobs 403 and 202; read_job 200 and 404; all parsed")
PY
