"""CPU of one autosave in the web process, without HTTP: the bench's PUTs replayed through the WSGI handler.

Run after bench/bench_saves.py (it reuses that database, its 100+ annotators and their tokens):
    .venv/bin/python bench/bench_save_cpu.py --db mast_bench_saves [--saves 2000] [--profile]

The bench annotators' annotations are emptied first, so every run replays the same saves. Each
save is built as bench_saves.py's clients build theirs (same random changes, some identical
repeats), sent as a WSGI environ to ``mast_site.wsgi.application`` (every middleware, DRF, the
view, the service), and checked for a 200. Prints the web process's CPU per save
(``time.process_time``), the PostgreSQL backend's CPU per save (``/proc/<backend pid>/stat``; the
server must run on this machine), statements per save, and with ``--profile`` a cProfile of the
whole replay grouped by where the time goes (middleware, DRF, our code, psycopg, JSON).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_saves import Client  # noqa: E402
from benchdb import bench_env, proc_cpu_seconds  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default="mast_bench_saves", help="a database bench_saves.py has seeded")
    ap.add_argument("--saves", type=int, default=2000)
    ap.add_argument("--warm", type=int, default=200, help="saves before measuring (caches, connection)")
    ap.add_argument("--profile", action="store_true", help="cProfile the measured saves")
    ap.add_argument("--top", type=int, default=45)
    # What a piece costs, by leaving it out (measurement only; the saves may then skip checks).
    ap.add_argument("--drop-middleware", action="append", default=[], metavar="CLASS", help="e.g. CSPMiddleware")
    ap.add_argument("--pg-set", action="append", default=[], metavar="NAME=VALUE", help="e.g. synchronous_commit=off")
    ap.add_argument("--no-health-checks", action="store_true", help="CONN_HEALTH_CHECKS off (no SELECT 1 per request)")
    args = ap.parse_args()
    os.environ.update(bench_env(args.db, CONN_MAX_AGE="600", LOG_LEVEL="ERROR", ALLOWED_HOSTS="127.0.0.1"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mast_site.settings")
    if args.drop_middleware or args.no_health_checks:
        import django

        django.setup()
        from django.conf import settings
        from django.db import connections

        settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m.rsplit(".", 1)[1] not in args.drop_middleware]
        if args.no_health_checks:
            connections["default"].settings_dict["CONN_HEALTH_CHECKS"] = False
        print("middleware:", ", ".join(m.rsplit(".", 1)[1] for m in settings.MIDDLEWARE))
    from mast_site.wsgi import application  # noqa: I001 - django.setup() and the GC setting, as under gunicorn

    from django.db import connection
    from rest_framework.authtoken.models import Token

    from annotations.models import Annotation

    # The same start every run (and so the same saves, from the same seeds): the bench annotators'
    # annotations emptied, as bench_saves.py seeds them.
    mine = Annotation.objects.filter(rater__user__username__startswith="bench0", round=None)
    from annotations.models import AnnotationEvent, Attribution, ModeLabel

    ModeLabel.objects.filter(annotation__in=mine).delete()
    AnnotationEvent.objects.filter(annotation__in=mine).delete()
    Attribution.objects.filter(annotation__in=mine).delete()
    Annotation.open_codes.through.objects.filter(annotation__in=mine).delete()
    mine.update(revision=0, notes="", task_success="unknown", state="draft", submitted_at=None)
    rows = (
        Annotation.objects.filter(rater__user__username__startswith="bench0", round=None)
        .select_related("rater__user")
        .order_by("rater__user__username")
    )
    tokens = dict(Token.objects.values_list("user_id", "key"))
    clients = []
    for i, ann in enumerate(rows):
        c = Client(0, {"token": tokens[ann.rater.user_id], "trace": ann.trace_id}, 0, (0, 0), seed=10_000 + i)
        c.revision = ann.revision
        clients.append(c)
    if not clients:
        sys.exit(f"no bench annotators in {args.db}: run bench/bench_saves.py --db {args.db} first")
    # Start from what is stored: an unseen state on the stored revision.
    from annotations.labels.selectors import annotation_snapshot

    for c, ann in zip(clients, rows, strict=True):
        snap = annotation_snapshot(annotation=ann)
        c.labels = {lab["code"]: {k: lab[k] for k in ("decision", "evidence", "rationale")} for lab in snap["labels"]}
        c.notes, c.task_success, c.open_codes = snap["notes"], snap["task_success"], list(snap["open_codes"])

    statements = [0]

    def count(execute, sql, params, many, context):
        statements[0] += 1
        return execute(sql, params, many, context)

    status: dict[str, int] = {}

    def start_response(s, headers, exc_info=None):
        status[s] = status.get(s, 0) + 1

    def one(c: Client) -> None:
        c.change()
        body = json.dumps({"revision": c.revision, **c.state()}).encode()
        environ = {
            "REQUEST_METHOD": "PUT",
            "PATH_INFO": f"/api/projects/bench/traces/{c.info['trace']}/annotation/",
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_HOST": "127.0.0.1",
            "HTTP_AUTHORIZATION": f"Token {c.info['token']}",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            "wsgi.version": (1, 0),
        }
        response = application(environ, start_response)
        data = b"".join(response)
        response.close()
        if not data.startswith(b"{"):
            sys.exit(f"not JSON: {data[:300]!r}")
        got = json.loads(data)
        if "revision" not in got:
            sys.exit(f"save refused: {data[:300]!r}")
        c.revision = got["revision"]

    for i in range(args.warm):
        one(clients[i % len(clients)])
    with connection.cursor() as cursor:
        for setting in args.pg_set:  # this session only
            name, value = setting.split("=", 1)
            cursor.execute("SELECT set_config(%s, %s, false)", [name, value])
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    status.clear()
    profiler = cProfile.Profile(time.process_time) if args.profile else None  # CPU, not waits
    db0, cpu0, t0 = proc_cpu_seconds(backend), time.process_time(), time.perf_counter()
    with connection.execute_wrapper(count):
        if profiler:
            profiler.enable()
        for i in range(args.saves):
            one(clients[i % len(clients)])
        if profiler:
            profiler.disable()
    cpu, wall, db = time.process_time() - cpu0, time.perf_counter() - t0, proc_cpu_seconds(backend) - db0
    n = args.saves
    print(f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{n} saves by {len(clients)} annotators through the WSGI handler: {status}")
    print(
        f"web process CPU per save: {cpu * 1000 / n:.2f} ms; PostgreSQL backend CPU per save: {db * 1000 / n:.2f} ms; "
        f"wall per save {wall * 1000 / n:.2f} ms; statements per save {statements[0] / n:.2f}"
        + ("  (under cProfile: CPU inflated)" if profiler else "")
    )
    if profiler:
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(args.top)
        stats.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
