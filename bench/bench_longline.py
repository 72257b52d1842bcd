"""A trace with one 40 MB line: the trace page's ready time in Chromium, and reaching the line's end.

Run: .venv/bin/python bench/bench_longline.py [--mb 40] [--runs 7]

1. Imports, with the real importer, a chat-message trace whose tool output is one line of --mb MB
   ending in a rare word, into a fresh PostgreSQL database (DATABASE_URL's server, mast_bench_longline).
2. Server: GET of the trace page through Django's test client (p50 over --runs), and its size: the
   page holds the line's first piece (LINE_PIECE characters), never the whole line.
3. Browser: headless Chromium against a live server in this process; "ready" = navigation start ->
   the viewer's performance mark "trace-viewer-ready" (goal: under 1 s); then the time to show the
   line's last piece (the step's content fetched once) and to find the rare word at its end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from bench_viewer import pct  # bench/ is on sys.path when run as a script
from benchdb import bench_env, create_bench_db, django_setup

REPO = Path(__file__).resolve().parents[1]
BENCH_DB = "mast_bench_longline"
LAST = "zebraquartz"


def build(mb: int):
    from django.contrib.auth import get_user_model

    from traces.importing.service import traces_import
    from traces.models import Membership, Trace
    from traces.projects.services import project_get_or_create

    words = "lorem ipsum dolor sit amet " * (mb * 1024 * 1024 // 27)
    messages = [
        {"role": "user", "content": "Count the rows of the dataset."},
        {"role": "tool", "content": words + LAST},
        {"role": "assistant", "content": "The dataset has 1.2 million rows."},
    ]
    path = Path("/tmp/mast_bench_longline.json")
    path.write_text(json.dumps(messages))
    viewer, _ = get_user_model().objects.get_or_create(username="bench-viewer")
    project, _ = project_get_or_create(slug="bench", name="Long line bench")
    Membership.objects.update_or_create(project=project, user=viewer, defaults={"role": "viewer"})
    t = time.perf_counter()
    traces_import(project=project, paths_or_files=[path])
    trace = Trace.objects.defer("raw_text").get(project=project)
    n = len(words) + len(LAST)
    took = time.perf_counter() - t
    print(f"trace: {trace.size_bytes / 1024**2:.1f} MB, {trace.n_steps} steps, one line of {n:,} characters; "
          f"imported in {took:.1f} s")  # fmt: skip
    return viewer, trace


def time_server(viewer, trace, runs: int) -> None:
    from django.test import Client

    client = Client()
    client.force_login(viewer)
    url = f"/p/bench/traces/{trace.pk}/"
    wall = []
    for _ in range(runs + 1):
        t = time.perf_counter()
        r = client.get(url)
        wall.append((time.perf_counter() - t) * 1000)
    assert r.status_code == 200
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"server: trace page p50 {statistics.median(wall[1:]):.0f} ms, p95 {pct(wall[1:], 0.95):.0f} ms, "
          f"{len(r.content) / 1024:.0f} KB of HTML")  # fmt: skip


def time_browser(viewer, trace, runs: int) -> None:
    from django.conf import settings
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.test import Client
    from django.test.testcases import LiveServerThread
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(REPO))
    from conftest import CHROMIUM_FLAGS, chromium_path

    server = LiveServerThread("127.0.0.1", StaticFilesHandler, connections_override={}, port=0)
    server.daemon = True
    server.start()
    server.is_ready.wait()
    base = f"http://127.0.0.1:{server.port}"
    client = Client()
    client.force_login(viewer)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    url = f"{base}/p/bench/traces/{trace.pk}/"
    line = "document.querySelector('#step-1 .tv-line:nth-child(2) .tv-tx').textContent"
    ready = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True)
        ctx = browser.new_context(viewport={"width": 1440, "height": 900})
        ctx.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": base}])
        page = ctx.new_page()
        page.set_default_timeout(120_000)
        for k in range(runs + 1):
            page.goto(url)
            page.wait_for_selector(".trace-viewer[data-ready='1']")
            if k:  # the first load warms static files and connections
                ready.append(page.evaluate("() => performance.getEntriesByName('trace-viewer-ready')[0].startTime"))
        t = time.perf_counter()
        page.click("#step-1 .tv-long-go[data-to='end']")
        page.wait_for_function(f"() => {line}.endsWith('{LAST}')")
        end_ms = (time.perf_counter() - t) * 1000
        page.goto(url)
        page.wait_for_selector(".trace-viewer[data-ready='1']")
        t = time.perf_counter()
        page.fill(".tv-search-input", LAST)
        page.press(".tv-search-input", "Enter")
        page.wait_for_selector("mark.tv-hit.is-current")
        search_ms = (time.perf_counter() - t) * 1000
        browser.close()
    server.terminate()
    print(f"browser: {runs} loads in headless Chromium")
    print(f"  ready (navigation -> trace-viewer-ready) p50 {statistics.median(ready):.0f} ms, "
          f"p95 {pct(ready, 0.95):.0f} ms   (goal < 1,000 ms)")  # fmt: skip
    print(f"  show the line's last piece: {end_ms:.0f} ms (the step's content fetched once)")
    print(f"  search {LAST!r} at the line's end to the hit shown: {search_ms:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=40)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    env = bench_env(BENCH_DB)
    create_bench_db(env)
    django_setup(env)
    viewer, trace = build(args.mb)
    time_server(viewer, trace, args.runs)
    time_browser(viewer, trace, args.runs)


if __name__ == "__main__":
    main()
