"""The trace page and the labelling page at 50 KB, 1 MB, 5 MB and 20 MB: how long a person waits.

Run: .venv/bin/python bench/bench_pages.py [--sizes 50k,1m,5m,20m] [--runs 6] [--server-runs 20] [--reuse] [--db NAME]
     [--burn N [--settle S]]

1. Fresh PostgreSQL database (DATABASE_URL's server, name mast_bench_pages or --db; --reuse keeps it): one
   trace per size made of the real ChatDev logs in ../shared/mast/traces/chatdev (the first log cut
   at 50 KB; the six logs joined, and repeated for 5 MB and 20 MB, cut at a line boundary), imported
   with the real importer, and an annotator with a draft that decides all 14 modes with evidence.
2. Server: each page through Django's test client, p50 / p95 over --server-runs GETs, with its
   query count and HTML size.
3. Browser: a live server in this process, headless Chromium (/usr/bin/chromium, the suite's
   flags), 1440x900, logged in; the pages are loaded interleaved (trace, label, trace, ...) --runs
   times after a warm-up. Per load, the way issue 18's table reads:
     ready   navigation start -> the text and the label controls usable (the viewer's
             "trace-viewer-ready" mark; on the labelling page also "workspace-ready")
     server  navigation timing: responseStart - requestStart (the HTML's time in the server)
     main    main-thread task time from navigation to ready (CDP Performance.getMetrics TaskDuration)
     nodes   DOM nodes at ready
   Then: the time from pressing Enter on a word that occurs only near the end of the 20 MB trace to
   the frame that paints its first hit, measured in the page (and, as Playwright sees it, from
   typing to the hit's selector), with its parts from the request's resource timing (Enter -> sent,
   server, body, answer -> painted), and a jump (g G / focusStep) to a far step, fetched and rendered.
   The browser is served by gunicorn as the README recommends (-w cores -k gthread --threads 8,
   keep-alive 30, DEBUG off, static files by WhiteNoise), or with --server live by Django's live
   server in this process (TCP_NODELAY set, as gunicorn does); --compression pglz compares with lz4.
The machine is shared: the load average is printed with every block of figures. --burn N starts N
CPU-bound processes (after the build, --settle seconds before timing) for figures at a known load.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchdb import (  # bench/ is on sys.path when run as a script
    bench_env,
    create_bench_db,
    django_setup,
    free_port,
    set_toast_compression,
    start_gunicorn,
)

REPO = Path(__file__).resolve().parents[1]
CHATDEV = REPO.parent / "shared" / "mast" / "traces" / "chatdev"
BENCH_DB = "mast_bench_pages"
SIZES = {"50k": 50 * 1024, "1m": 1024**2, "5m": 5 * 1024**2, "20m": 20 * 1024**2}
RARE = "zyxwvut-needle"  # put once near the end of every trace, to search for


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def text_of_size(size: int) -> str:
    logs = sorted(CHATDEV.glob("*/*.log"))
    if not logs:
        sys.exit(f"no ChatDev logs under {CHATDEV}")
    parts = [p.read_text(encoding="utf-8", errors="replace").rstrip("\n") + "\n" for p in logs]
    out: list[str] = []
    total = 0
    k = 0
    while total < size:
        part = parts[k % len(parts)]
        out.append(part)
        total += len(part.encode())
        k += 1
    text = "".join(out)
    cut = text.encode()[:size].decode("utf-8", errors="ignore")
    cut = cut[: cut.rfind("\n") + 1]
    lines = cut.split("\n")
    # the needle goes into one line about 95% of the way in
    at = int(len(lines) * 0.95)
    lines[at] = lines[at] + f" {RARE}"
    return "\n".join(lines)


def build(sizes: list[str], reuse: bool):
    from django.contrib.auth import get_user_model

    from annotations.labels.services import annotation_get_or_create, annotation_save
    from traces.importing.service import traces_import
    from traces.models import Membership, Trace
    from traces.projects.services import project_create

    User = get_user_model()
    if reuse and User.objects.filter(username="bench-annotator").exists():
        annotator = User.objects.get(username="bench-annotator")
    else:
        manager = User.objects.create_user("bench-manager")
        annotator = User.objects.create_user("bench-annotator")
        project = project_create(name="Pages bench", slug="bench", by=manager)
        Membership.objects.create(project=project, user=annotator, role="annotator")
    from traces.models import Project

    project = Project.objects.get(slug="bench")
    traces = {}
    for key in sizes:
        title = f"bench-{key}"
        trace = Trace.objects.defer("raw_text").filter(project=project, external_id=title).first()
        if trace is None:
            db = os.environ["DATABASE_URL"].rsplit("/", 1)[1]
            path = Path(f"/tmp/{db}-{title}.log")  # one per database: parallel runs do not share it
            path.write_text(text_of_size(SIZES[key]), encoding="utf-8")
            t = time.perf_counter()
            traces_import(project=project, paths_or_files=[path])
            trace = Trace.objects.defer("raw_text").filter(project=project).order_by("-id").first()
            Trace.objects.filter(pk=trace.pk).update(external_id=title)
            trace.external_id = title
            ann = annotation_get_or_create(trace=trace, user=annotator, taxonomy_version=project.taxonomy_version)
            codes = list(project.taxonomy_version.modes.order_by("order").values_list("code", flat=True))
            n = trace.n_steps
            labels = [
                {
                    "code": code,
                    "decision": "present" if k % 3 == 0 else "absent",
                    "evidence": [{"step": (n * j) // 4} for j in range(3)] if k % 3 == 0 else [],
                    "rationale": "the reviewer never ran the code",
                }
                for k, code in enumerate(codes)
            ]
            annotation_save(
                annotation=ann, by=annotator, base_revision=0, labels=labels, task_success="no", notes="", open_codes=[]
            )
            print(f"  built {title} in {time.perf_counter() - t:.1f} s")
        print(
            f"trace {key}: {trace.size_bytes / 1024**2:.2f} MB, {trace.n_lines:,} lines, {trace.n_steps:,} steps, "
            f"{trace.n_agents} agents"
        )
        traces[key] = trace
    return annotator, traces


def urls(trace) -> dict[str, str]:
    return {"trace": f"/p/bench/traces/{trace.pk}/", "label": f"/p/bench/traces/{trace.pk}/label/"}


def time_server(annotator, traces, runs: int) -> None:
    from django.db import connections
    from django.test import Client

    client = Client()
    client.force_login(annotator)
    print(f"\nserver (Django test client, {runs} GETs each; {load()})")
    print(f"{'page':22} {'p50 ms':>8} {'p95 ms':>8} {'CPU p50':>8} {'queries':>8} {'HTML KB':>8}")
    for key, trace in traces.items():
        for page, url in urls(trace).items():
            client.get(url)
            queries = []

            def count(execute, sql, params, many, context, queries=queries):
                queries.append(sql)
                return execute(sql, params, many, context)

            with connections["default"].execute_wrapper(count):
                r = client.get(url)
            assert r.status_code == 200, (url, r.status_code)
            wall, cpu = [], []
            for _ in range(runs):
                t, c = time.perf_counter(), time.process_time()
                client.get(url)
                wall.append((time.perf_counter() - t) * 1000)
                cpu.append((time.process_time() - c) * 1000)
            print(
                f"{page + ' ' + key:22} {statistics.median(wall):8.1f} {pct(wall, 0.95):8.1f} "
                f"{statistics.median(cpu):8.1f} {len(queries):8d} {len(r.content) / 1024:8.1f}"
            )
    for key, trace in traces.items():
        far = max(0, trace.n_steps - 40)
        for name, url in (
            (
                f"steps far in {key}",
                f"/api/projects/bench/traces/{trace.pk}/steps/?start={far}&limit=60&max_lines=1500",
            ),
            (f"search rare {key}", f"/api/projects/bench/traces/{trace.pk}/search/?q={RARE}"),
        ):
            wall = []
            for _ in range(max(5, runs // 2)):
                t = time.perf_counter()
                r = client.get(url)
                wall.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200
            print(
                f"{name:22} {statistics.median(wall):8.1f} {pct(wall, 0.95):8.1f} {'':8} {'':8} "
                f"{len(r.content) / 1024:8.1f}"
            )


READY_JS = """(page) => {
    const mark = (n) => (performance.getEntriesByName(n)[0] || {}).startTime;
    const nav = performance.getEntriesByType('navigation')[0];
    const viewer = mark('trace-viewer-ready');
    const ready = page === 'label' ? Math.max(viewer, mark('workspace-ready')) : viewer;
    return { ready, server: nav.responseStart - nav.requestStart, dcl: nav.domContentLoadedEventEnd,
             bytes: nav.transferSize, nodes: document.getElementsByTagName('*').length };
}"""


def live_server_class():
    """Django's live server with TCP_NODELAY on its connections, as gunicorn sets on its sockets.

    Django's WSGI server writes the headers and the body of a response in two sends; without
    TCP_NODELAY the body waits on Nagle's algorithm for the client's delayed ACK (about 40 ms on
    Linux) whenever the body is over one segment: every steps window (~36 KB) paid it, and no
    production server does.
    """
    import socket

    from django.core.servers.basehttp import ThreadedWSGIServer
    from django.test.testcases import LiveServerThread

    class NoDelayServer(ThreadedWSGIServer):
        def get_request(self):
            sock, addr = super().get_request()
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock, addr

    class NoDelayLiveServerThread(LiveServerThread):
        server_class = NoDelayServer

    return NoDelayLiveServerThread


# In the page: the time from the Enter keydown in the search box to the frame that paints the
# current hit's <mark> (a capture listener and a MutationObserver, installed before typing), which
# leaves out Playwright's own round trips (typing, pressing, polling for the selector).
SEARCH_PROBE_JS = """() => {
    const t = (window.__searchProbe = { enter: null, hit: null });
    const input = document.querySelector('.tv-search-input');
    const onKey = (e) => { if (e.key === 'Enter' && t.enter === null) t.enter = performance.now(); };
    input.addEventListener('keydown', onKey, { capture: true });
    const steps = document.querySelector('.tv-steps');
    const obs = new MutationObserver(() => {
        if (!steps.querySelector('mark.tv-hit.is-current')) return;
        obs.disconnect();
        requestAnimationFrame(() => { t.hit = performance.now(); });  // the frame that paints it
    });
    obs.observe(steps, { subtree: true, childList: true, attributes: true, attributeFilter: ['class'] });
}"""


# The parts of one search, from the resource timing of its request: Enter -> the request sent,
# the server (request sent -> first byte), the body's download, the answer -> the hit painted.
SEARCH_PARTS_JS = """() => {
    const t = window.__searchProbe;
    const r = performance.getEntriesByType('resource').filter((e) => e.name.includes('/search/')).pop();
    return { enter: t.enter, hit: t.hit, send: r.requestStart - t.enter, server: r.responseStart - r.requestStart,
             body: r.responseEnd - r.responseStart, paint: t.hit - r.responseEnd };
}"""


def _spin() -> None:  # one CPU-bound competitor for --burn
    while True:
        pass


def start_burners(n: int, settle: float) -> list:
    """``n`` processes that keep a core busy each, so the page figures are taken at a known load
    (the issue's "within 2x at load 4": ``--burn 4``); the 1-minute load average needs about a
    minute to climb, so the run waits ``settle`` seconds first and prints the load it reached."""
    import multiprocessing

    procs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    if procs:
        print(f"\n{n} CPU-bound processes started; settling {settle:.0f} s ({load()})")
        time.sleep(settle)
    return procs


def time_browser(annotator, traces, runs: int, server: str) -> None:
    from django.conf import settings
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.test import Client
    from playwright.sync_api import sync_playwright

    from conftest import CHROMIUM_FLAGS, chromium_path

    if server == "gunicorn":
        # the production server: gunicorn as the README recommends, one process per core, in its
        # own processes (DEBUG off; the static files collected and served by WhiteNoise)
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
            cwd=REPO,
            env=dict(os.environ),
            check=True,
        )
        port = free_port()
        proc = start_gunicorn(
            dict(os.environ), port=port, workers=os.cpu_count() or 2, threads=8, log_dir=REPO / "var" / "bench_pages"
        )
        stop = lambda: os.killpg(proc.pid, signal.SIGTERM)  # noqa: E731
    else:
        live = live_server_class()("127.0.0.1", StaticFilesHandler, connections_override={}, port=0)
        live.daemon = True
        live.start()
        live.is_ready.wait()
        if live.error:
            raise live.error
        port, stop = live.port, live.terminate
    print(f"\nserver for the browser: {server} on 127.0.0.1:{port}")
    base = f"http://127.0.0.1:{port}"
    client = Client()
    client.force_login(annotator)
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    rows: dict[tuple[str, str], list[dict]] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True)
        ctx = browser.new_context(viewport={"width": 1440, "height": 900})
        ctx.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": session, "url": base}])
        page = ctx.new_page()
        cdp = ctx.new_cdp_session(page)
        cdp.send("Performance.enable", {"timeDomain": "threadTicks"})

        def task_seconds() -> float:
            metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
            return metrics["TaskDuration"]

        def one(kind: str, url: str) -> dict:
            before = task_seconds()
            page.goto(base + url)
            page.wait_for_selector(".trace-viewer[data-ready='1']")
            if kind == "label":
                page.wait_for_selector("#ws[data-ready='1']")
            r = page.evaluate(READY_JS, kind)
            r["main"] = (task_seconds() - before) * 1000
            return r

        for trace in traces.values():  # warm-up: static files, connections, caches
            for kind, url in urls(trace).items():
                one(kind, url)
        for _ in range(runs):
            for key, trace in traces.items():
                for kind, url in urls(trace).items():
                    rows.setdefault((key, kind), []).append(one(kind, url))
        print(f"\nbrowser (headless Chromium 1440x900, {runs} interleaved loads per page; {load()})")
        print(
            f"{'page':12} {'ready p50':>10} {'ready p95':>10} {'server p50':>11} {'main p50':>9} "
            f"{'DCL p50':>8} {'nodes':>7} {'HTML KB':>8}"
        )
        for (key, kind), rs in rows.items():
            ready = [r["ready"] for r in rs]
            print(
                f"{kind + ' ' + key:12} {statistics.median(ready):10.0f} {pct(ready, 0.95):10.0f} "
                f"{statistics.median([r['server'] for r in rs]):11.1f} "
                f"{statistics.median([r['main'] for r in rs]):9.0f} "
                f"{statistics.median([r['dcl'] for r in rs]):8.0f} {rs[-1]['nodes']:7d} {rs[-1]['bytes'] / 1024:8.1f}"
            )
        print(
            "  per run, ready ms: "
            + "; ".join(f"{k}/{p}: " + " ".join(f"{r['ready']:.0f}" for r in rs) for (k, p), rs in rows.items())
        )

        # search and jump in the largest trace, on the trace page
        key = list(traces)[-1]
        trace = traces[key]
        search, in_page, jump, parts = [], [], [], []
        for _ in range(max(3, runs // 2)):
            one("trace", urls(trace)["trace"])
            page.evaluate(SEARCH_PROBE_JS)
            t = time.perf_counter()
            page.fill(".tv-search-input", RARE)
            page.press(".tv-search-input", "Enter")
            page.wait_for_selector("mark.tv-hit.is-current", timeout=30000)
            search.append((time.perf_counter() - t) * 1000)
            page.wait_for_function("window.__searchProbe.hit !== null")
            probe = page.evaluate(SEARCH_PARTS_JS)
            in_page.append(probe["hit"] - probe["enter"])
            parts.append(probe)
            far = max(0, trace.n_steps - 50 - len(jump) * 97)
            jump.append(
                page.evaluate(
                    """async (far) => {
                        const v = document.querySelector('.trace-viewer').__traceViewer;
                        const t = performance.now();
                        await v.focusStep(far);
                        await new Promise((r) => requestAnimationFrame(() => r()));
                        return performance.now() - t;
                    }""",
                    far,
                )
            )
        print(
            f"search to first hit near the end of {key} ({RARE!r}): Enter -> hit shown, in the page, "
            f"p50 {statistics.median(in_page):.0f} ms, max {max(in_page):.0f} ms; typed + Enter -> hit seen by "
            f"Playwright p50 {statistics.median(search):.0f} ms, max {max(search):.0f} ms; "
            f"jump to a far step: p50 {statistics.median(jump):.0f} ms, max {max(jump):.0f} ms "
            f"({load()})"
        )
        med = {k: statistics.median([p[k] for p in parts]) for k in ("send", "server", "body", "paint")}
        print(
            f"  search parts p50: Enter -> request sent {med['send']:.0f} ms, server (sent -> first byte) "
            f"{med['server']:.0f} ms, body {med['body']:.0f} ms, answer -> hit painted {med['paint']:.0f} ms"
        )
        browser.close()
    stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="50k,1m,5m,20m")
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--server-runs", type=int, default=20)
    ap.add_argument("--reuse", action="store_true", help="keep the database of an earlier run")
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument(
        "--server",
        choices=["gunicorn", "live"],
        default="gunicorn",
        help="what serves the browser: gunicorn (-w cores -k gthread --threads 8) or Django's live server here",
    )
    ap.add_argument("--burn", type=int, default=0, help="CPU-bound processes competing during the run (load)")
    ap.add_argument("--settle", type=float, default=60, help="seconds the burners run before timing")
    ap.add_argument("--db", default=BENCH_DB, help=f"database name (default {BENCH_DB}); one per parallel run")
    ap.add_argument("--compression", choices=["lz4", "pglz"], default="lz4", help="TOAST compression (migrations: lz4)")
    args = ap.parse_args()
    sizes = [s for s in args.sizes.split(",") if s]
    env = bench_env(args.db, MAST_VAR_DIR=str(REPO / "var" / "bench_pages"))
    if create_bench_db(env, reuse=args.reuse) and args.compression != "lz4":
        set_toast_compression(env, args.compression)
    django_setup(env)
    annotator, traces = build(sizes, args.reuse)
    burners = start_burners(args.burn, args.settle)
    try:
        time_server(annotator, traces, args.server_runs)
        if not args.no_browser:
            time_browser(annotator, traces, args.runs, args.server)
    finally:
        for p in burners:
            p.terminate()


if __name__ == "__main__":
    main()
