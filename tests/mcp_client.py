"""A real MCP host's side of trawl's MCP server, with the Python `mcp` SDK (pinned in
scripts/test.sh): lists the tools and their schemas, calls every tool against the loopback
fixture site, reads a page resource, receives progress, cancels a crawl by cancelling its
call, gets a screenshot as image content and a tool error with its code. Each check prints
`ok <name>`; the last line is `ALL OK` (any failure raises, exit status 1). It also prints
the median latency of web_fetch for a cached and an uncached page.

Used by tests/system/mcp.rs:
    python mcp_client.py stdio FIXTURE_URL TRAWL_BIN DATA_DIR CONFIG
    python mcp_client.py http FIXTURE_URL MCP_URL TOKEN OTHER_TOKEN
"""

import base64
import statistics
import sys
import time
import urllib.parse

import anyio
import httpx2 as httpx
from mcp import Client, StdioServerParameters

TOOLS = {
    "web_fetch", "web_read", "web_grep", "archive_search", "crawl_start", "crawl_status",
    "crawl_cancel", "job_status", "browser_open", "browser_act", "browser_snapshot",
    "browser_screenshot", "browser_close", "page_list", "web_search", "web_images",
}


def ok(name, detail=""):
    print(f"ok {name} {detail}".rstrip(), flush=True)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def structured(result):
    return result.structured_content or {}


def text_of(result):
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def error_code(result):
    check(result.is_error, f"expected a tool error, got {text_of(result)[:300]}")
    return structured(result)["error"]["code"]


async def call(client, name, arguments, **kwargs):
    result = await client.call_tool(name, arguments, **kwargs)
    check(not result.is_error, f"{name} {arguments}: {text_of(result)[:500]}")
    return result


async def exercise(client, site, other=None):
    # Tools and their schemas.
    listed = await client.list_tools()
    names = {tool.name for tool in listed.tools}
    check(TOOLS <= names, f"missing tools: {TOOLS - names}")
    for tool in listed.tools:
        check(tool.description and len(tool.description) > 40, f"{tool.name} has no description")
        check(tool.input_schema.get("type") == "object", f"{tool.name}: {tool.input_schema}")
    act = next(tool for tool in listed.tools if tool.name == "browser_act")
    check("Action" in act.input_schema.get("$defs", {}), "browser_act's schema defines Action")
    crawl = next(tool for tool in listed.tools if tool.name == "crawl_start")
    check("seeds" in crawl.input_schema["properties"], "crawl_start takes seeds")
    ok("list_tools", f"{len(names)} tools")

    # web_search and web_images, through the operator's providers (the fixture's SearxNG and
    # DuckDuckGo look-alikes); a provider's anti-bot page is a tool error with its code.
    found = await call(client, "web_search", {"query": "rust async", "provider": "searxng", "limit": 5})
    hits = structured(found)["hits"]
    check(hits and hits[0]["rank"] == 1 and structured(found)["provider"] == "searxng", f"hits: {hits}")
    check(len({hit["url"] for hit in hits}) == len(hits), "the hits are deduplicated")
    check(all(hit["url"] in text_of(found) for hit in hits), "the text lists every hit's URL")
    again = await call(client, "web_search", {"query": "rust async", "provider": "searxng", "limit": 5})
    check(structured(again)["cached"] is True, "the same search again is served from the cache")
    blocked = await client.call_tool("web_search", {"query": "blocked", "provider": "duckduckgo"})
    check(error_code(blocked) == "search_blocked", text_of(blocked))
    unknown = await client.call_tool("web_search", {"query": "x", "provider": "altavista"})
    check(error_code(unknown) == "invalid_request", text_of(unknown))
    images = await call(client, "web_images", {"query": "lighthouses", "limit": 3})
    pictures = structured(images)["hits"]
    check(pictures and pictures[0]["image"] in text_of(images), f"images: {pictures}")
    ok("web_search", f"{len(hits)} hits, {len(pictures)} images")

    # web_fetch: uncached, then cached; the latency of both, medians.
    url = f"{site}/article/1"
    first = await call(client, "web_fetch", {"url": url})
    page = structured(first)
    check(page["cached"] is False and page["page_id"], f"first fetch: {page.get('cached')}")
    check(page["title"] and page["title"] in text_of(first), "the text names the title")
    again = await call(client, "web_fetch", {"url": url})
    check(structured(again)["cached"] is True, "the second fetch is served from the cache")
    ok("web_fetch", page["page_id"])

    cached, uncached = [], []
    for n in range(20):
        start = time.perf_counter()
        await call(client, "web_fetch", {"url": url})
        cached.append((time.perf_counter() - start) * 1000)
    for n in range(100, 115):
        start = time.perf_counter()
        result = await call(client, "web_fetch", {"url": f"{site}/article/{n}", "render": False})
        uncached.append((time.perf_counter() - start) * 1000)
        check(structured(result)["cached"] is False, "a new URL is fetched")
    print(
        f"latency web_fetch cached_median_ms={statistics.median(cached):.2f} "
        f"uncached_median_ms={statistics.median(uncached):.2f} (n={len(cached)}, {len(uncached)})",
        flush=True,
    )

    # Progress of a fetch that takes a while.
    notes = []

    async def on_progress(progress, total, message):
        notes.append((progress, total, message))

    await call(client, "web_fetch", {"url": f"{site}/slow/article/2?ms=1500"}, progress_callback=on_progress)
    check(notes and any("queued" in (m or "") or "running" in (m or "") for _, _, m in notes), f"progress: {notes}")
    ok("progress", f"{len(notes)} notifications")

    # job_status: the first fetch's job (a page id is its job's id).
    job = await call(client, "job_status", {"id": page["page_id"]})
    check(structured(job)["status"] == "succeeded", f"job: {structured(job).get('status')}")
    ok("job_status")

    # web_read and web_grep over the stored page.
    read = await call(client, "web_read", {"url": url, "from": 1, "to": 3})
    lines = structured(read)
    check(lines["from"] == 1 and len(lines["lines"]) <= 3 and lines["total_lines"] >= 3, f"read: {lines}")
    check(lines["next_from"] == lines["to"] + 1, "the next range is named")
    word = page["title"].split()[0]
    grep = await call(client, "web_grep", {"url": url, "pattern": word, "context": 1})
    check(structured(grep)["matches"] >= 1, f"grep {word}: {structured(grep)}")
    ok("web_read_grep")

    # Tool errors carry their code.
    refused = await client.call_tool("web_fetch", {"url": "http://169.254.169.254/latest/meta-data/"})
    check(error_code(refused) == "blocked_destination", text_of(refused))
    missing = await client.call_tool("web_read", {"url": f"{site}/never-fetched"})
    check(error_code(missing) == "not_found", text_of(missing))
    bad = await client.call_tool("web_grep", {"url": url, "pattern": "(a"})
    check(error_code(bad) == "invalid_pattern", text_of(bad))
    wrong = await client.call_tool("web_fetch", {"uri": url})
    check(error_code(wrong) == "invalid_request", text_of(wrong))
    ok("tool_errors", "blocked_destination not_found invalid_pattern invalid_request")

    # Resources: the page by id and by URL.
    resources = await client.list_resources()
    uris = {str(resource.uri) for resource in resources.resources}
    check(f"trawl://pages/{page['page_id']}" in uris, f"listed: {sorted(uris)[:5]}")
    templates = await client.list_resource_templates()
    check(any("{id}" in t.uri_template for t in templates.resource_templates), "a template by id")
    by_id = await client.read_resource(f"trawl://pages/{page['page_id']}")
    check(by_id.contents[0].text.strip() and by_id.contents[0].mime_type == "text/markdown", "the page by id")
    by_url = await client.read_resource("trawl://pages?url=" + urllib.parse.quote(url, safe=""))
    check(by_url.contents[0].text == by_id.contents[0].text, "the page by URL is the same")
    ok("resources")

    listing = await call(client, "page_list", {})
    check(any(p["page_id"] == page["page_id"] for p in structured(listing)["pages"]), "page_list")
    ok("page_list")

    # archive: true, then archive_search finds passages with URL, title and headings.
    archived_url = f"{site}/article/7"
    archived = await call(client, "web_fetch", {"url": archived_url, "archive": True})
    title = structured(archived)["title"]
    query = " ".join(w for w in title.split() if len(w) > 3 and w.isalpha())
    hits = []
    for _ in range(60):
        found = await call(client, "archive_search", {"query": query, "k": 5})
        hits = [hit for hit in structured(found)["hits"] if hit["url"].startswith(archived_url)]
        if hits:
            break
        await anyio.sleep(0.5)
    check(hits and hits[0]["title"] == title and "headings" in hits[0], f"archive: {hits[:1]}")
    ok("archive_search")

    # A crawl started and followed; another cancelled by cancelling its call.
    started = await call(client, "crawl_start", {"seeds": [f"{site}/site/3"], "max_pages": 3})
    crawl_id = structured(started)["id"]
    status = {}
    for _ in range(120):
        status = structured(await call(client, "crawl_status", {"id": crawl_id}))
        if status["status"] != "running":
            break
        await anyio.sleep(0.25)
    check(status["status"] == "completed", f"crawl: {status.get('status')} {status.get('counters')}")
    ok("crawl_start_status", f"{status['counters']['fetched']} fetched")

    ids = []

    async def on_crawl_progress(progress, total, message):
        if message and message.startswith("crawl "):
            ids.append(message.split()[1].rstrip(":"))

    with anyio.move_on_after(60) as scope:
        async with anyio.create_task_group() as group:

            async def long_crawl():
                await client.call_tool(
                    "crawl_start",
                    {"seeds": [f"{site}/site/10"], "max_pages": 100000, "wait": True},
                    progress_callback=on_crawl_progress,
                )

            group.start_soon(long_crawl)
            while not ids:
                await anyio.sleep(0.05)
            group.cancel_scope.cancel()
    check(not scope.cancelled_caught and ids, "the long crawl reported progress")
    cancelled = {}
    for _ in range(120):
        cancelled = structured(await call(client, "crawl_status", {"id": ids[0]}))
        if cancelled["status"] != "running":
            break
        await anyio.sleep(0.25)
    check(cancelled["status"] == "cancelled", f"the crawl after its call was cancelled: {cancelled.get('status')}")
    again = await client.call_tool("crawl_cancel", {"id": ids[0]})
    check(error_code(again) == "conflict", text_of(again))
    ok("crawl_cancelled_with_its_call", ids[0])

    # The browser: open, act, snapshot, screenshot as an image, close.
    opened = await call(client, "browser_open", {"profile": "desktop"})
    session = structured(opened)["id"]
    steps = await call(client, "browser_act", {
        "session_id": session,
        "actions": [{"action": "goto", "url": f"{site}/browser/form"}, {"action": "read"}],
    })
    check(all(step["ok"] for step in structured(steps)["steps"]), f"act: {text_of(steps)[:300]}")
    one = await call(client, "browser_act", {"session_id": session, "action": {"action": "scroll", "direction": "down"}})
    check(len(structured(one)["steps"]) == 1, "one action")
    snapshot = await call(client, "browser_snapshot", {"session_id": session})
    check("[1]" in text_of(snapshot) or "1" in text_of(snapshot), f"snapshot: {text_of(snapshot)[:200]}")
    shot = await call(client, "browser_screenshot", {"session_id": session, "grid": True})
    images = [block for block in shot.content if getattr(block, "type", "") == "image"]
    check(images and images[0].mime_type == "image/png", f"screenshot content: {shot.content}")
    check(base64.b64decode(images[0].data)[:8] == b"\x89PNG\r\n\x1a\n", "a PNG")
    failing = await client.call_tool("browser_act", {"session_id": session, "action": {"action": "click", "selector": "#no-such-element"}})
    check(failing.is_error and structured(failing)["error"]["code"], f"a failed action: {text_of(failing)[:200]}")
    if other is not None:
        foreign = await other.call_tool("browser_snapshot", {"session_id": session})
        check(error_code(foreign) == "not_found", "another tenant does not see the session")
        foreign_job = await other.call_tool("job_status", {"id": page["page_id"]})
        check(error_code(foreign_job) == "not_found", "another tenant does not see the job")
        ok("tenants")
    await call(client, "browser_close", {"session_id": session})
    closed = await client.call_tool("browser_snapshot", {"session_id": session})
    check(error_code(closed) == "not_found", text_of(closed))
    ok("browser", f"screenshot {len(base64.b64decode(images[0].data))} bytes")


async def main():
    transport, site = sys.argv[1], sys.argv[2]
    if transport == "stdio":
        binary, data_dir, config = sys.argv[3], sys.argv[4], sys.argv[5]
        params = StdioServerParameters(
            command=binary,
            args=["--data-dir", data_dir, "--config", config, "mcp", "--allow-private-network"],
            env={"TRAWL_LOG": "error", "XDG_CONFIG_HOME": f"{data_dir}/no-user-config", "PATH": "/usr/bin:/bin"},
        )
        async with Client(params, mode="legacy") as client:
            await exercise(client, site)
    else:
        endpoint, token, other_token = sys.argv[3], sys.argv[4], sys.argv[5]

        def authorized(value):
            return httpx.AsyncClient(headers={"Authorization": f"Bearer {value}"}, timeout=60)

        from mcp.client.streamable_http import streamable_http_client

        unauthorized = httpx.post(endpoint, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        check(unauthorized.status_code == 401, f"no token: {unauthorized.status_code}")
        ok("bearer_required")
        async with authorized(token) as http, authorized(other_token) as other_http:
            mine = streamable_http_client(endpoint, http_client=http)
            theirs = streamable_http_client(endpoint, http_client=other_http)
            async with Client(mine, mode="legacy") as client, Client(theirs, mode="legacy") as other:
                await exercise(client, site, other)
    print("ALL OK", flush=True)


if __name__ == "__main__":
    anyio.run(main)
