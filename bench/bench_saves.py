"""Concurrent annotation saves: 50 annotators autosaving against gunicorn + PostgreSQL on loopback.

Run: .venv/bin/python bench/bench_saves.py [--clients 50] [--seconds 25] [--think-ms 500-1500] [--workers N_CPUS]

1. Creates a fresh PostgreSQL database (DATABASE_URL's server, name mast_bench_saves), migrates it,
   and stores a project with 10 traces of 40 steps, 50 annotators with API tokens, and one
   annotation per annotator (annotator i labels trace i % 10).
2. Starts gunicorn (-k gthread) on 127.0.0.1 with DEBUG off, then runs --clients threads. Each is one
   annotator's browser tab: it changes something a person would change (a decision, evidence on a
   step, a rationale, notes, an open code; sometimes the same state again, like a retried request),
   PUTs the whole state with the revision it last got back, waits --think-ms, repeats for --seconds.
   Keep-alive connections, token auth.
3. Prints p50/p95/p99 latency, errors, throughput; then checks the stored rows: every client's last
   acknowledged revision and content equal what the database holds, and each annotation has exactly
   one history row per revision (zero lost updates). Exit code 1 if any check fails.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchdb import (  # bench/ is on sys.path when run as a script
    bench_env,
    create_bench_db,
    free_port,
    proc_cpu_seconds,
    start_gunicorn,
)

REPO = Path(__file__).resolve().parents[1]
BENCH_DB = "mast_bench_saves"
ACCESS_LOG = REPO / "var" / "bench_saves" / "access.log"
CODES = ["1.1", "1.2", "1.3", "1.4", "1.5", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "3.1", "3.2", "3.3"]
WORDS = [
    "the",
    "reviewer",
    "accepts",
    "code",
    "without",
    "running",
    "tests",
    "while",
    "the",
    "ceo",
    "never",
    "checks",
    "the",
    "board",
    "size",
]


SEED = r"""
import hashlib, json, os, sys
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mast_site.settings")
import django
django.setup()
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from annotations.labels.services import annotation_get_or_create
from traces.models import Membership, Step, Trace
from traces.projects.services import project_create

n_clients = int(sys.argv[1])
User = get_user_model()
owner = User.objects.create_user("bench-manager")
project = project_create(name="Bench", slug="bench", by=owner)
traces = []
for t in range(10):
    lines, steps = [], []
    for i in range(40):
        start = len(lines) + 1
        body = [f"Agent{i % 3}: step {i} of trace {t}, line {k}" for k in range(6)]
        lines += body
        steps.append((i, f"Agent{i % 3}", "\n".join(body), start, start + 5))
    raw = "\n".join(lines)
    trace = Trace.objects.create(project=project, title=f"bench {t}", format="plaintext", raw_text=raw,
        size_bytes=len(raw), content_hash=hashlib.sha256(raw.encode()).hexdigest(), n_steps=40,
        n_lines=len(lines), n_chars=len(raw))
    Step.objects.bulk_create([Step(trace=trace, index=i, agent=a, content=c, line_start=s, line_end=e)
                              for i, a, c, s, e in steps])
    traces.append(trace)
out = []
for c in range(n_clients):
    user = User.objects.create_user(f"bench{c:03d}")
    Membership.objects.create(project=project, user=user, role="annotator")
    token = Token.objects.create(user=user)
    trace = traces[c % len(traces)]
    ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=project.taxonomy_version)
    out.append({"token": token.key, "trace": trace.pk, "annotation": ann.pk})
print(json.dumps(out))
"""


def seed(env: dict, n_clients: int) -> list[dict]:
    r = subprocess.run([sys.executable, "-c", SEED, str(n_clients)], cwd=REPO, env=env, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"seeding failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


class Client(threading.Thread):
    def __init__(self, port: int, info: dict, seconds: float, think: tuple[float, float], seed: int):
        super().__init__(daemon=True)
        self.port, self.info, self.seconds, self.think = port, info, seconds, think
        self.rng = random.Random(seed)
        self.revision = 0
        self.labels: dict[str, dict] = {}
        self.notes = ""
        self.task_success = "unknown"
        self.open_codes: list[str] = []
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.acked: dict | None = None  # the last state the server acknowledged, and its revision
        self.unchanged = 0

    def state(self) -> dict:
        labels = [{"code": c, **self.labels[c]} for c in CODES if c in self.labels]
        return {
            "labels": labels,
            "task_success": self.task_success,
            "notes": self.notes,
            "open_codes": sorted(self.open_codes),
        }

    def change(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.08:
            return  # the same state again: a retried request
        code = rng.choice(CODES)
        lab = self.labels.setdefault(code, {"decision": "absent", "evidence": [], "rationale": ""})
        if roll < 0.45:
            lab["decision"] = rng.choice(["present", "absent", "unsure"])
        elif roll < 0.65:
            lab["decision"] = "present"
            ev = {"step": rng.randrange(40)}
            if ev not in lab["evidence"] and len(lab["evidence"]) < 5:
                lab["evidence"].append(ev)
        elif roll < 0.85:
            lab["rationale"] = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 30)))
        elif roll < 0.93:
            self.notes = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 60)))
            self.task_success = rng.choice(["yes", "no", "unknown"])
        else:
            tag = rng.choice(["loops", "ignores spec", "no tests", "early stop", "lost context", "wrong tool"])
            if tag in self.open_codes:
                self.open_codes.remove(tag)
            else:
                self.open_codes.append(tag)

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Authorization": f"Token {self.info['token']}", "Content-Type": "application/json"}
        path = f"/api/projects/bench/traces/{self.info['trace']}/annotation/"
        end = time.time() + self.seconds
        time.sleep(self.rng.uniform(0, self.think[1]))  # do not start in lockstep
        while time.time() < end:
            self.change()
            state = self.state()
            body = json.dumps({"revision": self.revision, **state})
            t0 = time.perf_counter()
            try:
                conn.request("PUT", path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                continue
            self.latencies.append(time.perf_counter() - t0)
            if resp.status != 200:
                self.errors.append(f"HTTP {resp.status}: {data[:200]!r}")
            else:
                got = json.loads(data)
                if got["revision"] == self.revision:
                    self.unchanged += 1
                self.revision = got["revision"]
                self.acked = {"revision": self.revision, **state}
            time.sleep(self.rng.uniform(*self.think))
        conn.close()


VERIFY = r"""
import json, os, sys
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mast_site.settings")
import django
django.setup()
from annotations.models import Annotation, AnnotationEvent
from annotations.labels.selectors import annotation_snapshot

expected = json.load(sys.stdin)
bad = []
for item in expected:
    ann = Annotation.objects.get(pk=item["annotation"])
    snap = annotation_snapshot(annotation=ann)
    acked = item["acked"]
    if acked is None:
        if ann.revision != 0:
            bad.append((ann.pk, "never acknowledged but revision", ann.revision))
        continue
    for key in ("revision", "task_success", "notes", "open_codes", "labels"):
        if snap[key] != acked[key]:
            bad.append((ann.pk, key, snap[key], acked[key]))
    events = AnnotationEvent.objects.filter(annotation=ann).order_by("revision")
    events = list(events.values_list("revision", flat=True))
    if events != list(range(1, ann.revision + 1)):
        bad.append((ann.pk, "history", len(events), ann.revision))
print(json.dumps({"checked": len(expected), "bad": bad[:10], "n_bad": len(bad)}))
"""


def verify(env: dict, clients: list[Client]) -> dict:
    payload = json.dumps([{"annotation": c.info["annotation"], "acked": c.acked} for c in clients])
    r = subprocess.run(
        [sys.executable, "-c", VERIFY], cwd=REPO, env=env, input=payload, capture_output=True, text=True, check=True
    )
    return json.loads(r.stdout.strip().splitlines()[-1])


def warm_up(port: int, infos: list[dict]) -> None:
    """Open each worker's database connection and fill its caches (GETs only: nothing changes)."""

    def get(info: dict) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for _ in range(5):
            conn.request(
                "GET",
                f"/api/projects/bench/traces/{info['trace']}/annotation/",
                headers={"Authorization": f"Token {info['token']}"},
            )
            conn.getresponse().read()
        conn.close()

    threads = [threading.Thread(target=get, args=(info,)) for info in infos[:16]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def server_cpu_seconds(server: subprocess.Popen) -> float:
    """User + system CPU of gunicorn's worker processes so far (from /proc; Linux)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == server.pid:  # field 4, the parent pid: a worker of this master
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def db_backends_cpu(env: dict) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend serving the bench database (from /proc; the
    server must run on this machine, as the bench's does)."""
    server, name = env["DATABASE_URL"].rsplit("/", 1)
    out = subprocess.run(
        ["psql", f"{server}/postgres", "-tAc", f"SELECT pid FROM pg_stat_activity WHERE datname = '{name}'"],  # noqa: S608
        capture_output=True,
        text=True,
    ).stdout.split()
    return {int(pid): proc_cpu_seconds(int(pid)) or 0.0 for pid in out if pid.isdigit()}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("--think-ms", default="500-1500", help="pause between saves (~1 save/s)")
    # One process per core: on this 2-core machine 4 workers measured slower (more context switches).
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--db", default=BENCH_DB, help="database name (parallel runs need their own)")
    ap.add_argument(
        "--no-access-log",
        action="store_true",
        help="gunicorn without its access log (its default, as in the Dockerfile): no server-side times",
    )
    args = ap.parse_args()
    lo, hi = (float(x) / 1000 for x in args.think_ms.split("-"))
    env = bench_env(
        args.db,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        MAST_VAR_DIR=str(REPO / "var" / "bench_saves"),
        CONN_MAX_AGE="600",
        LOG_LEVEL="ERROR",
    )
    (REPO / "var" / "bench_saves").mkdir(parents=True, exist_ok=True)
    ACCESS_LOG.unlink(missing_ok=True)
    print(f"database {args.db}: creating and migrating…", flush=True)
    create_bench_db(env)
    infos = seed(env, args.clients + 1)  # the last one saves alone first: the uncontended cost
    port = free_port()
    server = start_gunicorn(
        env,
        port=port,
        workers=args.workers,
        threads=args.threads,
        log_dir=REPO / "var" / "bench_saves",
        access_log=None if args.no_access_log else ACCESS_LOG,
    )
    print(f"{os.cpu_count()} CPUs; load average before: {os.getloadavg()[0]:.1f}", flush=True)
    print(
        f"gunicorn -w {args.workers} -k gthread --threads {args.threads} on 127.0.0.1:{port}"
        + (" (no access log); " if args.no_access_log else "; ")
        + f"{args.clients} clients for {args.seconds:.0f} s, think {args.think_ms} ms",
        flush=True,
    )
    try:
        warm_up(port, infos)
        solo = Client(port, infos[-1], 6, (0.0, 0.0), seed=999)
        solo.run()
        print(
            f"one client alone, back to back: {len(solo.latencies)} saves, p50 {pct(solo.latencies, 0.5):.1f} ms, "
            f"p95 {pct(solo.latencies, 0.95):.1f} ms",
            flush=True,
        )
        ACCESS_LOG.write_text("")  # the concurrent run's server times only (none without the access log)
        clients = [Client(port, info, args.seconds, (lo, hi), seed=i) for i, info in enumerate(infos[:-1])]
        cpu0, db0 = server_cpu_seconds(server), db_backends_cpu(env)
        gen0 = time.process_time()
        t0 = time.perf_counter()
        for c in clients:
            c.start()
        for c in clients:
            c.join()
        wall = time.perf_counter() - t0
        gen_cpu = time.process_time() - gen0
        server_cpu = server_cpu_seconds(server) - cpu0
        db_cpu = sum(cpu - db0.get(pid, 0.0) for pid, cpu in db_backends_cpu(env).items())
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=20)
    lat = [x for c in clients for x in c.latencies]
    errors = [e for c in clients for e in c.errors]
    n = len(lat)
    repeats = sum(c.unchanged for c in clients)
    print(f"saves: {n} in {wall:.1f} s = {n / wall:.0f} saves/s ({repeats} unchanged repeats)")
    print(
        f"latency ms: p50 {pct(lat, 0.50):.1f}  p95 {pct(lat, 0.95):.1f}  p99 {pct(lat, 0.99):.1f}  "
        f"max {max(lat) * 1000:.1f}  mean {statistics.mean(lat) * 1000:.1f}"
    )
    served = [int(x.split()[2]) / 1e6 for x in ACCESS_LOG.read_text().splitlines() if x.startswith("PUT ")]
    if served:
        print(
            f"  in the server (gunicorn's request time, no queueing in the client): p50 {pct(served, 0.5):.1f}  "
            f"p95 {pct(served, 0.95):.1f}  p99 {pct(served, 0.99):.1f}"
        )
    print(
        f"CPU of the web processes: {server_cpu * 1000 / max(1, n):.1f} ms per save "
        f"({server_cpu:.1f} s over {n} saves; gunicorn workers' user + system time, PostgreSQL not included)"
    )
    print(
        f"CPU of the PostgreSQL backends: {db_cpu * 1000 / max(1, n):.1f} ms per save ({db_cpu:.1f} s; "
        "the bench database's connections, from /proc)"
    )
    print(
        f"CPU of the load generator (this process): {gen_cpu * 1000 / max(1, n):.1f} ms per save "
        f"({gen_cpu:.1f} s = {100 * gen_cpu / wall:.0f}% of one core)"
    )
    print(f"errors: {len(errors)}" + (f"  first: {errors[0]}" if errors else ""))
    print("machine load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    result = verify(env, [*clients, solo])
    print(f"stored rows checked: {result['checked']} annotations; lost or wrong updates: {result['n_bad']}")
    if result["bad"]:
        print("  e.g.", result["bad"][:3])
    ok = not errors and result["n_bad"] == 0
    print(f"target p95 < 50 ms: {'met' if pct(lat, 0.95) < 50 else 'NOT met'}; zero errors and lost updates: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
