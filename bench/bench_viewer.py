"""Trace page speed on a huge trace: server time, time to interactive in Chromium, DOM size.

Run: .venv/bin/python bench/bench_viewer.py [--lines 20000] [--runs 20] [--browser-runs 7] [--generated]

1. Builds a ~20,000-line trace: the six real ChatDev logs of ../shared/mast/traces/chatdev joined
   and cut at --lines lines (or, with --generated or without ../shared, a generated ChatDev-style
   log of ~1 MB), and imports it with the real importer (traces.importing.service.traces_import) into a
   fresh PostgreSQL database (DATABASE_URL's server, name mast_bench_viewer).
2. Server: GET of the trace page through Django's test client as a logged-in viewer, p50/p95 over
   --runs runs; the same for a steps window far into the trace and for a search inside it.
3. Browser: headless Chromium (/usr/bin/chromium, the test suite's flags) against a live server in
   this process; "time to interactive" = navigation start -> the viewer's performance mark
   "trace-viewer-ready" (set after first paint, once handlers are bound and data-ready="1").
   Also first contentful paint, step cards and DOM nodes at ready, and the time to jump to a far
   step (window fetched and rendered) and to run a search and show its first hit.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from benchdb import bench_env, create_bench_db, django_setup  # bench/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
CHATDEV = REPO.parent / "shared" / "mast" / "traces" / "chatdev"
BENCH_DB = "mast_bench_viewer"


def setup_db() -> None:
    env = bench_env(BENCH_DB)
    create_bench_db(env)
    django_setup(env)


def trace_text(lines: int, generated: bool) -> tuple[str, str, str]:
    """(text, where it comes from, a rare word in it to search for)"""
    logs = sorted(CHATDEV.glob("*/*.log")) if CHATDEV.is_dir() and not generated else []
    if logs:
        parts = [p.read_text(encoding="utf-8", errors="replace").rstrip("\n") for p in logs]
        text = "\n".join("\n".join(parts).split("\n")[:lines]) + "\n"
        return text, f"{len(logs)} real ChatDev logs from ../shared joined, first {lines} lines", "checkmate"
    from tests.traces.viewer_factories import chatdev_log

    return chatdev_log(lines=lines, long_step_every=9), "generated ChatDev-style log", "turn 1000:"


def build(lines: int, generated: bool):
    from django.contrib.auth import get_user_model

    from traces.importing.service import traces_import
    from traces.models import Membership, Trace
    from traces.projects.services import project_get_or_create

    text, source, rare = trace_text(lines, generated)
    path = Path("/tmp/mast_bench_viewer_trace.log")
    path.write_text(text, encoding="utf-8")
    viewer, _ = get_user_model().objects.get_or_create(username="bench-viewer")
    project, _ = project_get_or_create(slug="bench", name="Viewer bench")
    Membership.objects.update_or_create(project=project, user=viewer, defaults={"role": "viewer"})
    t = time.perf_counter()
    traces_import(project=project, paths_or_files=[path])
    trace = Trace.objects.defer("raw_text").get(project=project)
    print(f"trace: {source}")
    print(
        f"  {trace.size_bytes / 1024**2:.2f} MB, {trace.n_lines:,} lines, {trace.n_steps:,} steps, "
        f"{trace.n_agents} agents; imported in {time.perf_counter() - t:.1f} s"
    )
    return viewer, trace, rare


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def time_server(viewer, trace, rare: str, runs: int) -> None:
    from django.test import Client

    client = Client()
    client.force_login(viewer)
    far = max(0, trace.n_steps - 100)
    cases = [
        ("trace page (first window + outline)", f"/p/bench/traces/{trace.pk}/"),
        (
            "steps API, window far in",
            f"/api/projects/bench/traces/{trace.pk}/steps/?start={far}&limit=60&max_lines=1500",
        ),
        ("search API, common word", f"/api/projects/bench/traces/{trace.pk}/search/?q=the"),
        ("search API, rare word", f"/api/projects/bench/traces/{trace.pk}/search/?q={rare}"),
        ("raw view page (1,000 lines)", f"/p/bench/traces/{trace.pk}/raw/?start=15001"),
    ]
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other work inflates wall time)")
    print(f"{'server: ' + 'case':44} {'p50 ms':>8} {'p95 ms':>8} {'cpu p50':>8} {'KB':>8}")
    for name, url in cases:
        r = client.get(url)
        assert r.status_code == 200, (url, r.status_code)
        wall, cpu = [], []
        for _ in range(runs):
            t, c = time.perf_counter(), time.process_time()
            r = client.get(url)
            wall.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
        print(
            f"{name:44} {statistics.median(wall):8.1f} {pct(wall, 0.95):8.1f} {statistics.median(cpu):8.1f} "
            f"{len(r.content) / 1024:8.0f}"
        )


def time_browser(viewer, trace, rare: str, runs: int) -> None:
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
    if server.error:
        raise server.error
    base = f"http://127.0.0.1:{server.port}"
    client = Client()
    client.force_login(viewer)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value

    url = f"{base}/p/bench/traces/{trace.pk}/"
    results = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True)
        ctx = browser.new_context(viewport={"width": 1440, "height": 900})
        ctx.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": base}])
        page = ctx.new_page()
        page.goto(url)  # warm-up (static files, connections)
        page.wait_for_selector(".trace-viewer[data-ready='1']")
        for _ in range(runs):
            page.goto(url)
            page.wait_for_selector(".trace-viewer[data-ready='1']")
            results.append(
                page.evaluate(
                    """() => {
                        const ready = performance.getEntriesByName('trace-viewer-ready')[0].startTime;
                        const fcp = performance.getEntriesByName('first-contentful-paint')[0];
                        const nav = performance.getEntriesByType('navigation')[0];
                        return { ready, fcp: fcp ? fcp.startTime : null, ttfb: nav.responseStart,
                                 cards: document.querySelectorAll('.tv-step').length,
                                 lines: document.querySelectorAll('.tv-line').length,
                                 nodes: document.getElementsByTagName('*').length };
                    }"""
                )
            )
        far = max(0, trace.n_steps - 50)
        jump = page.evaluate(
            """async (far) => {
                const { mountViewer } = await import('/static/js/trace-viewer.js');
                const v = mountViewer(document.querySelector('.trace-viewer'), {});
                const t = performance.now();
                await v.focusStep(far);
                await new Promise((r) => requestAnimationFrame(() => r()));
                return { ms: performance.now() - t, cards: document.querySelectorAll('.tv-step').length };
            }""",
            far,
        )
        page.goto(url)
        page.wait_for_selector(".trace-viewer[data-ready='1']")
        t = time.perf_counter()
        page.fill(".tv-search-input", rare)
        page.press(".tv-search-input", "Enter")
        page.wait_for_selector("mark.tv-hit.is-current", timeout=30000)
        search_ms = (time.perf_counter() - t) * 1000
        hits = page.locator(".tv-hits").inner_text()
        for _ in range(30):  # scroll down a long way: the DOM must stay bounded
            page.evaluate("() => { const s = document.querySelector('.tv-scroll'); s.scrollTop = s.scrollHeight; }")
            page.wait_for_timeout(60)
        after_scroll = page.locator(".tv-step").count()
        browser.close()
    server.terminate()

    ready = [r["ready"] for r in results]
    fcp = [r["fcp"] for r in results if r["fcp"] is not None]
    ttfb = [r["ttfb"] for r in results]
    print(f"browser: {runs} loads of the trace page in headless Chromium")
    print(f"  time to first byte        p50 {statistics.median(ttfb):7.0f} ms   p95 {pct(ttfb, 0.95):7.0f} ms")
    if fcp:
        print(f"  first contentful paint    p50 {statistics.median(fcp):7.0f} ms   p95 {pct(fcp, 0.95):7.0f} ms")
    print(
        f"  time to interactive       p50 {statistics.median(ready):7.0f} ms   p95 {pct(ready, 0.95):7.0f} ms"
        "   (target < 1,000 ms)"
    )
    last = results[-1]
    print(
        f"  at ready: {last['cards']} step cards (target < 2,000), {last['lines']} line rows, "
        f"{last['nodes']} DOM elements"
    )
    print(f"  jump to step {far}: {jump['ms']:.0f} ms (window fetched + rendered), {jump['cards']} step cards after")
    print(f"  search {rare!r} to first hit shown: {search_ms:.0f} ms ({hits})")
    print(f"  after scrolling down 30 screens: {after_scroll} step cards in the DOM")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--browser-runs", type=int, default=7)
    ap.add_argument("--generated", action="store_true", help="use generated content instead of ../shared")
    args = ap.parse_args()
    setup_db()
    viewer, trace, rare = build(args.lines, args.generated)
    time_server(viewer, trace, rare, args.runs)
    time_browser(viewer, trace, rare, args.browser_runs)


if __name__ == "__main__":
    main()
