#!/usr/bin/env python3
"""Known-item search check of the archive on the WCXB dev split (issue 20).

Every page of the split is served over loopback and ingested with
`trawl run --archive` (embedded store, a fresh data directory); then one query per
sampled page (six words in a row from a random sentence of its ground-truth text, 600
queries, fixed seed; stop words left out, so the six are content words) goes to `trawl search --json -k 10 --per-page 1`. A hit is the
page among the first five results. Printed: recall@5 and MRR@10 overall and per page
type, the pages that did not end stored (and why), and the same queries against two
baselines computed in the same run with rank_bm25: BM25 over each page's whole visible
text (no extraction) and over its ground-truth main text.

Run (release build first: `cargo build --release`):

    python3 benches/known_item.py --trawl target/release/trawl --dev ../wcxb/dev

The dev split is WCXB v1.0 (`Murrough-Foley/web-content-extraction-benchmark`, commit
`c039d5e`, folder `dev/`); its `test/` split is kept for acceptance and never read here.
rank_bm25 is installed (pinned) into `~/.cache/trawl-bench-venv` the first time.
"""
from __future__ import annotations

import argparse
import gzip
import html.parser
import http.server
import json
import os
import random
import re
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RANK_BM25 = "rank-bm25==0.2.2"
QUERIES = 600
WORDS = 6
SEED = 20
WORD = re.compile(r"\w+")
# Common English function words: a query is made of the words between them.
STOP_WORDS = set("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its
itself just me more most my myself no nor not now of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
""".split())
TYPES = ["article", "documentation", "service", "forum", "product", "listing", "collection"]


def bm25_module():
    """rank_bm25, from a venv of its own (created the first time)."""
    try:
        import rank_bm25  # noqa: F401
        return rank_bm25
    except ImportError:
        pass
    venv = Path.home() / ".cache" / "trawl-bench-venv"
    python = venv / "bin" / "python3"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", RANK_BM25], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    sys.path.insert(0, str(site))
    import rank_bm25
    return rank_bm25


class Visible(html.parser.HTMLParser):
    """A page's visible text: everything outside script, style, template and head."""

    HIDDEN = {"script", "style", "template", "head", "noscript", "svg"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.HIDDEN:
            self.depth += 1

    def handle_endtag(self, tag):
        if tag in self.HIDDEN and self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if not self.depth:
            self.parts.append(data)


def visible_text(raw: bytes) -> str:
    parser = Visible()
    parser.feed(raw.decode("utf-8", errors="replace"))
    return " ".join(parser.parts)


def tokens(text: str) -> list[str]:
    return [word.lower() for word in WORD.findall(text)]


def load(dev: Path):
    pages = {}
    for truth_file in sorted((dev / "ground-truth").glob("*.json")):
        truth = json.loads(truth_file.read_text())
        pid = truth_file.stem
        raw = gzip.decompress((dev / "html" / f"{pid}.html.gz").read_bytes())
        pages[pid] = {
            "type": truth["_internal"]["page_type"]["primary"],
            "truth": truth["ground_truth"].get("main_content") or "",
            "raw": raw,
        }
    return pages


def make_queries(pages, rng):
    """One query per sampled page: WORDS words in a row from a random sentence."""
    queries = []
    ids = sorted(pages)
    rng.shuffle(ids)
    for pid in ids:
        content = [[w for w in WORD.findall(s) if w.lower() not in STOP_WORDS]
                   for s in re.split(r"(?<=[.!?])\s+|\n+", pages[pid]["truth"])]
        content = [words for words in content if len(words) >= WORDS]
        if not content:
            continue
        words = rng.choice(content)
        start = rng.randrange(len(words) - WORDS + 1)
        queries.append((pid, " ".join(words[start:start + WORDS])))
        if len(queries) == QUERIES:
            break
    return queries


def serve(pages):
    """Serves /<id>.html on 127.0.0.1 (the bytes as captured, labelled text/html)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            pid = self.path.strip("/").removesuffix(".html")
            page = pages.get(pid)
            if page is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page["raw"])))
            self.end_headers()
            try:
                self.wfile.write(page["raw"])
            except (BrokenPipeError, ConnectionResetError):
                pass  # trawl stopped reading a page cut at its byte limit

        def log_message(self, *args):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def ranks_of(results_per_query, queries):
    """(recall@5, MRR@10) of a list of ranked id lists."""
    hits, rr = [], []
    for (pid, _), ranked in zip(queries, results_per_query):
        rank = ranked.index(pid) + 1 if pid in ranked[:10] else None
        hits.append(1.0 if rank is not None and rank <= 5 else 0.0)
        rr.append(1.0 / rank if rank is not None else 0.0)
    return hits, rr


def summary(name, pages, queries, hits, rr):
    line = f"{name:<44} recall@5 {statistics.fmean(hits):.3f}  MRR@10 {statistics.fmean(rr):.3f}"
    per_type = []
    for page_type in TYPES:
        picked = [h for (pid, _), h in zip(queries, hits) if pages[pid]["type"] == page_type]
        if picked:
            per_type.append(f"{page_type} {statistics.fmean(picked):.3f}")
    print(line)
    print("    " + ", ".join(per_type))


def diagnose(pages, queries, hits, stored, failed, verbose):
    """Where the misses go: page not stored, query words absent from the stored text
    (extraction recall), or every word there and the page ranked below fifth (ranking)."""
    lost = {"not stored": [], "words missing": [], "ranked below 5": []}
    for (pid, query), hit in zip(queries, hits):
        if hit:
            continue
        if pid in failed or pid not in stored:
            lost["not stored"].append(pid)
            continue
        have = set(tokens(stored[pid]))
        if all(word in have for word in tokens(query)):
            lost["ranked below 5"].append(pid)
        else:
            lost["words missing"].append(pid)
    for why, pids in lost.items():
        by_type = {}
        for pid in pids:
            by_type[pages[pid]["type"]] = by_type.get(pages[pid]["type"], 0) + 1
        print(f"    missed, {why}: {len(pids)} {by_type}")
        if verbose:
            print("      " + " ".join(sorted(pids)))


def bm25_baseline(rank_bm25, corpus_ids, corpus_tokens, queries):
    index = rank_bm25.BM25Okapi(corpus_tokens)
    ranked = []
    for _, query in queries:
        scores = index.get_scores(tokens(query))
        order = sorted(range(len(corpus_ids)), key=lambda i: -scores[i])[:10]
        ranked.append([corpus_ids[i] for i in order])
    return ranked


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trawl", required=True, type=Path, help="the trawl binary")
    ap.add_argument("--dev", required=True, type=Path, help="WCXB's dev/ folder")
    ap.add_argument("--verbose", action="store_true", help="list the missed pages' ids")
    args = ap.parse_args()
    pages = load(args.dev)
    rng = random.Random(SEED)
    queries = make_queries(pages, rng)
    print(f"{len(pages)} pages, {len(queries)} queries of {WORDS} content words (seed {SEED})")

    server = serve(pages)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    url_of = {pid: f"{base}/{pid}.html" for pid in pages}
    id_of = {url: pid for pid, url in url_of.items()}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        out = Path(tmp) / "out"
        urls = Path(tmp) / "urls.txt"
        urls.write_text("\n".join(url_of[pid] for pid in sorted(pages)) + "\n")
        started = time.monotonic()
        run = subprocess.run(
            [str(args.trawl), "run", "--archive", "--quiet", "--allow-private-network",
             "--data-dir", str(data), "--out", str(out), "--file", str(urls)],
            capture_output=True, text=True)
        print(f"trawl run --archive: exit {run.returncode} in {time.monotonic() - started:.0f} s")
        if not (out / "pages.jsonl").exists():
            print(run.stderr, file=sys.stderr)
            return 1
        failed = {}
        stored = {}
        for line in (out / "pages.jsonl").read_text().split("\n"):
            if not line.strip():
                continue
            row = json.loads(line)
            if row.get("file"):
                stored[id_of.get(row["url"], row["url"])] = (out / row["file"]).read_text(
                    errors="replace")
            if "error" in row:
                code = row["error"].get("code") if isinstance(row["error"], dict) else row["error"]
                failed[id_of.get(row["url"], row["url"])] = code
        by_code = {}
        for code in failed.values():
            by_code[code] = by_code.get(code, 0) + 1
        print(f"not stored: {len(failed)} of {len(pages)} {by_code}")
        ranked = []
        for _, query in queries:
            result = subprocess.run(
                [str(args.trawl), "search", "--data-dir", str(data), "--json", "-k", "10",
                 "--per-page", "1", query], capture_output=True, text=True)
            hits = json.loads(result.stdout or "[]") if result.returncode in (0, 1) else []
            ranked.append([id_of.get(hit.get("url"), "") for hit in hits])
    server.shutdown()
    hits, rr = ranks_of(ranked, queries)
    summary("trawl: fetch, extract, chunk, tantivy BM25", pages, queries, hits, rr)
    missing = sum(1 for pid, _ in queries if pid in failed)
    print(f"    queries whose page was not stored: {missing}")
    diagnose(pages, queries, hits, stored, failed, args.verbose)

    rank_bm25 = bm25_module()
    ids = sorted(pages)
    for name, text_of in [
        ("BM25 over each page's whole visible text", lambda p: visible_text(p["raw"])),
        ("BM25 over each page's ground-truth text", lambda p: p["truth"]),
    ]:
        ranked = bm25_baseline(rank_bm25, ids, [tokens(text_of(pages[pid])) for pid in ids], queries)
        hits, rr = ranks_of(ranked, queries)
        summary(name, pages, queries, hits, rr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
