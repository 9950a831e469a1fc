"""firecrawl-py (and LangChain's FireCrawlLoader) against a local `trawl serve`, unchanged but
for `api_url`: run by the `firecrawl::` system test with the test virtualenv's python.

Usage: client.py API_URL TOKEN SITE_URL. Prints one JSON object of what the clients got; the
Rust test asserts on it. A client exception other than the expected ones fails the script.
"""

import json
import sys

from firecrawl import Firecrawl
from firecrawl.v1.client import V1FirecrawlApp
from firecrawl.v2.types import (
    ClickAction,
    ExecuteJavascriptAction,
    ScrapeAction,
    ScrapeOptions,
    ScreenshotAction,
    WaitAction,
    WriteAction,
)
from firecrawl.v2.utils.error_handler import BadRequestError, FirecrawlError, UnauthorizedError

api_url, token, site = sys.argv[1:4]
client = Firecrawl(api_key=token, api_url=api_url)
out = {}

# Scrape: markdown, links and html of one page.
doc = client.scrape(f"{site}/article/1", formats=["markdown", "links", "html"])
out["scrape"] = {
    "markdown": doc.markdown,
    "html": doc.html,
    "links": doc.links,
    "title": doc.metadata.title,
    "source_url": doc.metadata.source_url,
    "status_code": doc.metadata.status_code,
    "credits_used": doc.metadata.credits_used,
}

# The v1 client of the same package, against the v1 routes.
v1 = client.v1.scrape_url(f"{site}/article/2", formats=["markdown", "rawHtml"])
out["v1_scrape"] = {"markdown": v1.markdown, "raw_html": v1.rawHtml}

# includeTags/excludeTags: markdown and html read from the selected elements only.
aside = client.scrape(f"{site}/article/1", formats=["markdown"], include_tags=["aside.sidebar"], exclude_tags=[".ad"])
no_code = client.scrape(f"{site}/article/1", formats=["markdown", "html"], exclude_tags=["pre", "table"])
nothing = client.scrape(f"{site}/article/1", formats=["markdown"], include_tags=["#no-such-element"])
out["tags"] = {
    "aside": aside.markdown,
    "no_code": no_code.markdown,
    "no_code_html": no_code.html,
    "nothing": nothing.markdown,
    "nothing_warning": nothing.warning,
}

# Actions and a screenshot: a trawl browse job in Chromium; the document is the page the
# actions end on (a form filled and sent), with what the steps took.
acted = client.scrape(
    f"{site}/browser/form",
    formats=["markdown", "screenshot"],
    actions=[
        ClickAction(selector="#email"),
        WriteAction(text="ada@example.com"),
        WaitAction(milliseconds=50),
        ScreenshotAction(full_page=True),
        ClickAction(selector="button[type=submit]"),
        ScrapeAction(),
    ],
)
out["actions"] = {
    "markdown": acted.markdown,
    "title": acted.metadata.title,
    "screenshot": (acted.screenshot or "")[:33],
    "screenshots": [shot[:33] for shot in acted.actions["screenshots"]],
    "scrapes": [scrape["html"] for scrape in acted.actions["scrapes"]],
}

# onlyMainContent: false: the whole page, the sidebar and navigation included.
whole = client.scrape(f"{site}/article/1", formats=["markdown"], only_main_content=False)
out["whole_page"] = whole.markdown

# Request headers reach the page's origin (the fixture echoes what it received).
echoed = client.scrape(f"{site}/echo-headers", formats=["markdown"], headers={"X-Trawl-Test": "fc-header-1"})
out["headers"] = echoed.markdown

# A crawl to completion, bounded by `limit`.
job = client.crawl(f"{site}/article/1", limit=3, poll_interval=1, timeout=120)
out["crawl"] = {
    "status": job.status,
    "total": job.total,
    "completed": job.completed,
    "credits_used": job.credits_used,
    "urls": sorted(d.metadata.source_url for d in job.data),
    "all_markdown": all(bool(d.markdown) for d in job.data),
}

# Map: the site's URLs with a search filter.
mapped = client.map(f"{site}/article/1", search="article", limit=50)
out["map"] = [link.url for link in mapped.links]

# Batch scrape to completion.
batch = client.batch_scrape(
    [f"{site}/article/2", f"{site}/article/3"], formats=["markdown", "links"], poll_interval=1, wait_timeout=120
)
out["batch"] = {
    "status": batch.status,
    "total": batch.total,
    "completed": batch.completed,
    "urls": sorted(d.metadata.source_url for d in batch.data),
    "all_links": all(bool(d.links) for d in batch.data),
}

# Search (the fixture's SearxNG and DuckDuckGo image search): web results, the same scraped
# into documents (one domain excluded), images, and the package's v1 client (its `v1` proxy
# has no search) with its default options.
found = client.search("rust async", limit=3)
out["search"] = [
    {"url": r.url, "title": r.title, "description": r.description, "position": r.position}
    for r in found.web or []
]
scraped = client.search(
    "rust async", limit=2, exclude_domains=["only-google.example"],
    scrape_options=ScrapeOptions(formats=["markdown"]),
)
out["search_scraped"] = [
    {"source_url": d.metadata.source_url, "markdown": d.markdown} for d in scraped.web or []
]
pictures = client.search("lighthouses", sources=["images"], limit=2)
out["search_images"] = [
    {"image_url": i.image_url, "url": i.url, "position": i.position} for i in pictures.images or []
]
out["search_v1"] = [
    {"url": d["url"], "title": d["title"], "description": d["description"]}
    for d in V1FirecrawlApp(api_key=token, api_url=api_url).search("rust async", limit=2).data
]

# Errors: an option trawl cannot honour, a page that fails, a wrong token.
errors = {}
try:
    client.scrape(f"{site}/article/1", formats=[{"type": "json", "prompt": "the title"}])
    errors["json_format"] = "accepted"
except BadRequestError as error:
    errors["json_format"] = {"status": error.status_code, "message": str(error)}
try:
    client.scrape(f"{site}/status/404")
    errors["missing_page"] = "accepted"
except FirecrawlError as error:
    errors["missing_page"] = {"status": error.status_code, "message": str(error)}
try:
    Firecrawl(api_key="not-the-token-of-this-server", api_url=api_url).scrape(f"{site}/article/1")
    errors["wrong_token"] = "accepted"
except UnauthorizedError as error:
    errors["wrong_token"] = {"status": error.status_code, "message": str(error)}
try:
    client.search("rust", tbs="qdr:d")
    errors["search_tbs"] = "accepted"
except BadRequestError as error:
    errors["search_tbs"] = {"status": error.status_code, "message": str(error)}
try:
    client.scrape(f"{site}/article/1", include_tags=["div["])
    errors["bad_selector"] = "accepted"
except BadRequestError as error:
    errors["bad_selector"] = {"status": error.status_code, "message": str(error)}
try:
    client.scrape(f"{site}/browser/form", actions=[ExecuteJavascriptAction(script="1")])
    errors["javascript_action"] = "accepted"
except BadRequestError as error:
    errors["javascript_action"] = {"status": error.status_code, "message": str(error)}
try:
    client.scrape(f"{site}/browser/form", actions=[ClickAction(selector="#no-such-button")])
    errors["failing_action"] = "accepted"
except FirecrawlError as error:
    errors["failing_action"] = {"status": error.status_code, "message": str(error)}
out["errors"] = errors

# LangChain's loader, scrape mode, on a local page.
from langchain_community.document_loaders import FireCrawlLoader

loaded = FireCrawlLoader(url=f"{site}/article/3", api_key=token, api_url=api_url, mode="scrape").load()
out["langchain"] = [
    {"page_content": d.page_content, "source_url": d.metadata.get("source_url") or d.metadata.get("sourceURL")}
    for d in loaded
]

print(json.dumps(out))
