"""The OTLP receiver under load (issue 30): sustained spans per second accepted and the exports' p95
latency with concurrent exporters, nothing lost; then the lag from a trace's quiet period ending to
the trace being listed.

Run: .venv/bin/python bench/bench_otlp.py [--exporters 20] [--seconds 15] [--spans 100] [--workers 2] [--rate 5000]

1. A fresh database (mast_bench_otlp), one project and ingest key, gunicorn (--workers processes,
   8 threads each, as production runs it).
2. --exporters threads each POST ExportTraceServiceRequests (protobuf, --spans spans of GenAI chat
   and tool calls per request, new ids each time, as the SDK's batch processor sends them) for
   --seconds on keep-alive connections: first back to back (the most the server takes, the bodies
   built as they go), then at a steady --rate spans/s in all (latency at that load; the bodies built
   before the clock starts, as exporters on other machines would). Prints requests, spans/s accepted, p50/p95,
   errors, and checks every acknowledged span is stored (0 lost).
3. Lag: with MAST_LIVE_QUIET_SECONDS=1 and a Celery worker (its live sweep every MAST_LIVE_SWEEP_SECONDS, 1 s),
   20 traces are sent; prints the seconds from each one's quiet period ending to its trace existing.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import secrets
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchdb import REPO, bench_env, create_bench_db, django_setup, drop_bench_db, free_port, start_gunicorn

sys.path.insert(0, str(REPO))
from tests.processes import WorkerProcess  # noqa: E402 - after the path

BENCH_DB = "mast_bench_otlp"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def request_body(n_spans: int, trace_id: bytes | None = None, *, root_ended: bool = True) -> bytes:
    """One ExportTraceServiceRequest: an agent root and n_spans - 1 chat / tool children."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    def kv(key: str, value: str) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(string_value=value))

    trace_id = trace_id or secrets.token_bytes(16)
    now = time.time_ns()
    root = Span(trace_id=trace_id, span_id=secrets.token_bytes(8), name="invoke_agent crew",
                start_time_unix_nano=now - 10**9, end_time_unix_nano=now if root_ended else 0,
                attributes=[kv("gen_ai.operation.name", "invoke_agent"), kv("gen_ai.agent.name", "crew")])  # fmt: skip
    spans = [root]
    for i in range(n_spans - 1):
        attrs = [kv("gen_ai.agent.name", f"agent-{i % 3}")]
        if i % 2:
            attrs += [kv("gen_ai.operation.name", "execute_tool"), kv("gen_ai.tool.name", "run_tests"),
                      kv("gen_ai.tool.call.arguments", '{"path": "tests/"}'),
                      kv("gen_ai.tool.call.result", "3 passed")]  # fmt: skip
        else:
            attrs += [kv("gen_ai.operation.name", "chat"), kv("gen_ai.request.model", "gpt-4o"),
                      kv("gen_ai.output.messages", '[{"role": "assistant", "parts": [{"type": "text", '
                                                   f'"content": "step {i}: the board is drawn"}}]}}]')]  # fmt: skip
        spans.append(Span(trace_id=trace_id, span_id=secrets.token_bytes(8), parent_span_id=root.span_id,
                          name=f"span {i}", start_time_unix_nano=now - 10**8, end_time_unix_nano=now - 10**7,
                          attributes=attrs))  # fmt: skip
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource={"attributes": [kv("service.name", "bench-crew")]},
        scope_spans=[ScopeSpans(scope={"name": "crewai"}, spans=spans)])])  # fmt: skip
    return request.SerializeToString()


def pct95(values: list[float]) -> float:
    return values[int(0.95 * (len(values) - 1))]


class Exporter(threading.Thread):
    """Sends back to back (``every`` 0: the most the server takes), or one request every ``every``
    seconds (a steady rate, as batch processors send)."""

    def __init__(self, port: int, key: str, n_spans: int, seconds: float, every: float = 0.0):
        super().__init__(daemon=True)
        self.port, self.key, self.n_spans, self.seconds, self.every = port, key, n_spans, seconds, every
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.accepted = 0
        # at a steady rate the bodies are built before the clock starts: the exporters' own CPU is
        # another machine's in real use, not the server's two cores
        self.ready = [request_body(n_spans) for _ in range(int(seconds / every) + 2)] if every else []

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {self.key}"}
        # exporters are not in step: each starts at its own point of the period
        start = time.time() + (random.uniform(0, self.every) if self.every else 0.0)
        end = start + self.seconds
        sent = 0
        while time.time() < end:
            if self.every:
                wait = start + sent * self.every - time.time()
                if wait > 0:
                    time.sleep(wait)
            sent += 1
            body = self.ready.pop() if self.ready else request_body(self.n_spans)
            t = time.perf_counter()
            try:
                conn.request("POST", "/otlp/v1/traces", body=body, headers=headers)
                r = conn.getresponse()
                r.read()
            except (OSError, http.client.HTTPException) as exc:
                self.errors.append(str(exc))
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                continue
            self.latencies.append(time.perf_counter() - t)
            if r.status == 200:
                self.accepted += self.n_spans
            else:
                self.errors.append(f"HTTP {r.status}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exporters", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--spans", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rate", type=int, default=5000, help="spans/s of the steady phase (the issue's goal)")
    ap.add_argument("--redis-db", type=int, default=13)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    env = bench_env(BENCH_DB, CELERY_BROKER_URL=f"redis://127.0.0.1:6379/{args.redis_db}", LOG_LEVEL="WARNING",
                    MAST_OTLP_REQUESTS_PER_SECOND="100000", MAST_LIVE_QUIET_SECONDS="1")  # fmt: skip
    scratch = Path(tempfile.mkdtemp(prefix="mast-bench-otlp-"))
    create_bench_db(env)
    django_setup(env)
    from django.contrib.auth import get_user_model

    from traces.live.keys import ingest_key_create
    from traces.models import LiveSpan, LiveTrace
    from traces.projects.services import project_create

    manager = get_user_model().objects.create_user("bench-manager")
    project = project_create(name="OTLP bench", slug="otlp", by=manager)
    _, key = ingest_key_create(project=project, name="bench", by=manager)
    port = free_port()
    server = start_gunicorn(env, port=port, workers=args.workers, threads=8, log_dir=scratch)
    worker = None
    try:
        print(f"{args.exporters} exporters, {args.spans} spans a request, {args.seconds:g} s each, "
              f"gunicorn {args.workers} x 8 threads ({load()})")  # fmt: skip
        every = args.spans * args.exporters / args.rate
        for label, pace in (("back to back", 0.0), (f"steady {args.rate:,} spans/s", every)):
            before = LiveSpan.objects.filter(live__project=project).count()
            exporters = [Exporter(port, key, args.spans, args.seconds, pace) for _ in range(args.exporters)]
            t0 = time.perf_counter()
            for e in exporters:
                e.start()
            for e in exporters:
                e.join()
            elapsed = time.perf_counter() - t0
            lat = sorted(x for e in exporters for x in e.latencies)
            accepted = sum(e.accepted for e in exporters)
            stored = LiveSpan.objects.filter(live__project=project).count() - before
            errors = [x for e in exporters for x in e.errors]
            print(f"  {label}: {len(lat):,} requests, {accepted:,} spans accepted, "
                  f"{accepted / elapsed:,.0f} spans/s; "
                  f"p50 {statistics.median(lat) * 1000:.0f} ms, p95 {pct95(lat) * 1000:.0f} ms;"
                  f" {len(errors)} errors {sorted(set(errors))[:3]}; {accepted - stored:,} lost "
                  f"({load()})")  # fmt: skip
        # the load's traces are not the lag's: their assembly (a backlog of thousands) is left out
        LiveTrace.objects.filter(project=project).delete()

        worker = WorkerProcess(env, log=scratch / "worker.log")
        worker.purge()
        worker.start(concurrency=2, name="otlp-bench")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {key}"}
        sent: dict[str, float] = {}
        for _ in range(20):
            trace_id = secrets.token_bytes(16)
            conn.request("POST", "/otlp/v1/traces", body=request_body(12, trace_id), headers=headers)
            conn.getresponse().read()
            sent[trace_id.hex()] = time.time()
            time.sleep(0.25)
        lags: dict[str, float] = {}
        deadline = time.time() + 120
        while len(lags) < len(sent) and time.time() < deadline:
            for t, at in LiveTrace.objects.filter(otel_trace_id__in=list(sent), trace__isnull=False).values_list(
                "otel_trace_id", "assembled_at"
            ):
                lags.setdefault(t, at.timestamp() - (sent[t] + 1.0))  # the quiet period ends 1 s after the last span
            time.sleep(0.05)
        values = sorted(lags.values())
        print(f"  lag from a trace's quiet period ending to its trace listed, {len(values)} of {len(sent)} traces: "
              f"p50 {statistics.median(values):.2f} s, max {max(values):.2f} s ({load()})")  # fmt: skip
    finally:
        if worker:
            worker.stop()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        from django.db import connections

        connections.close_all()
        drop_bench_db(env)


if __name__ == "__main__":
    main()
