"""Import speed and memory for span files: ~200 MB of OTLP/JSON (GenAI conventions) or of
OpenInference span records (Phoenix JSONL) into PostgreSQL.

Run: .venv/bin/python bench/bench_import_spans.py [--format otlp|openinference] [--mb 200] [--keep]

1. Builds the file in a child process (so its memory does not count): multi-agent traces shaped
   like the fixtures in tests/fixtures/import/ (an orchestrator invoking three agents, each with LLM
   calls that resend the growing conversation, as real exports do, and tool calls with outputs),
   their text cut from the real MAST logs in ../shared/mast/traces. OTLP: one ``resourceSpans``
   batch of ~200 spans per line, spans in end-time order (a trace's root last), two traces
   interleaved. OpenInference: one span per line, a trace's spans together.
2. Creates a fresh PostgreSQL database (DATABASE_URL's server, name mast_bench_spans), migrates it.
3. Imports the file with traces_import in this process; prints MB/s, traces/s, steps, peak RSS
   and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench_import import self_cpu_seconds
from benchdb import bench_env, create_bench_db, django_setup, drop_bench_db, proc_cpu_seconds

REPO = Path(__file__).resolve().parents[1]
MAST = REPO.parent / "shared" / "mast"
BENCH_DB = "mast_bench_spans"
AGENTS = ["Researcher", "Coder", "Reviewer"]
TOOLS = ["web_search", "python", "read_file"]


def corpus() -> str:
    paths = sorted(MAST.glob("traces/chatdev/*/*.log"))[:40] + sorted(MAST.glob("traces/openmanus/*.log"))[:20]
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in paths)
    if not text:
        sys.exit(f"no sample logs under {MAST}/traces")
    return text


class Text:
    def __init__(self, seed: int) -> None:
        self.src = corpus()
        self.rng = random.Random(seed)

    def take(self, mean: int) -> str:
        n = max(40, int(self.rng.lognormvariate(0, 0.5) * mean / 1.13))
        start = self.rng.randrange(0, max(1, len(self.src) - n))
        return self.src[start : start + n]


def trace_spans(t: int, text: Text) -> list[dict]:
    """One trace as neutral span dicts (converted to OTLP or OpenInference by the writers)."""
    tid = f"{t:032x}"
    spans: list[dict] = []
    clock = [t * 1000.0]

    def new(kind, name, parent, **kw):
        sid = f"{len(spans) + 1:016x}"
        start = clock[0]
        clock[0] += 0.5
        s = {"trace": tid, "id": sid, "parent": parent, "kind": kind, "name": name, "start": start, **kw}
        spans.append(s)
        return s

    task = f"Task {t}: " + text.take(400)
    root = new("agent", "Orchestrator", "", agent="Orchestrator", input=task)
    history = [("system", "You are the Orchestrator. " + text.take(600)), ("user", task)]
    for agent in AGENTS:
        ask = f"{agent}, please: " + text.take(300)
        inv = new("agent", agent, root["id"], agent=agent, input=ask)
        conv = [("system", f"You are the {agent}. " + text.take(800)), ("user", ask)]
        for call in range(3):
            tool = TOOLS[(call + t) % 3]
            args = json.dumps({"query": text.take(80)})
            out_text = text.take(300)
            new(
                "llm",
                "chat",
                inv["id"],
                agent=agent,
                model="gpt-4o",
                inputs=list(conv),
                outputs=[("assistant", out_text)],
                call=(f"c{call}", tool, args),
                tin=200 + 50 * call,
                tout=80,
            )
            conv.append(("assistant", out_text))
            result = text.take(2500)
            new("tool", tool, inv["id"], tool=tool, args=args, output=result, call_id=f"c{call}")
            conv.append(("tool", result))
        answer = f"{agent} done: " + text.take(500)
        new(
            "llm",
            "chat",
            inv["id"],
            agent=agent,
            model="gpt-4o-mini",
            inputs=list(conv[-2:]),
            outputs=[("assistant", answer)],
            tin=900,
            tout=120,
        )
        inv["output"] = answer
        history.append(("user", answer))
    new(
        "llm",
        "chat",
        root["id"],
        agent="Orchestrator",
        model="gpt-4o",
        inputs=list(history),
        outputs=[("assistant", "Final: " + text.take(400))],
        tin=1500,
        tout=150,
    )
    for s in spans:
        s["end"] = s["start"] + 0.4
    root["end"] = clock[0] + 1
    for s in spans:
        if s["kind"] == "agent" and s is not root:
            s["end"] = max(x["end"] for x in spans if x["parent"] == s["id"]) + 0.01
    return spans


def _kv(d: dict) -> list[dict]:
    return [
        {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}} for k, v in d.items()
    ]


def otlp_span(s: dict) -> dict:
    a: dict = {}
    if s["kind"] == "agent":
        a = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": s["agent"]}
    elif s["kind"] == "llm":
        parts_in = [{"role": r, "parts": [{"type": "text", "content": c}]} for r, c in s["inputs"]]
        out_parts = [{"type": "text", "content": s["outputs"][0][1]}]
        if "call" in s:
            cid, tool, args = s["call"]
            out_parts.append({"type": "tool_call", "id": cid, "name": tool, "arguments": json.loads(args)})
        a = {
            "gen_ai.operation.name": "chat",
            "gen_ai.agent.name": s["agent"],
            "gen_ai.request.model": s["model"],
            "gen_ai.usage.input_tokens": s["tin"],
            "gen_ai.usage.output_tokens": s["tout"],
            "gen_ai.input.messages": json.dumps(parts_in, ensure_ascii=False),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": out_parts}], ensure_ascii=False),
        }
    else:
        a = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": s["tool"],
            "gen_ai.tool.call.id": s["call_id"],
            "gen_ai.tool.call.arguments": s["args"],
            "gen_ai.tool.call.result": s["output"],
        }
    return {
        "traceId": s["trace"],
        "spanId": s["id"],
        "parentSpanId": s["parent"],
        "name": s["name"],
        "startTimeUnixNano": str(int(s["start"] * 1e9)),
        "endTimeUnixNano": str(int(s["end"] * 1e9)),
        "attributes": _kv(a),
        "status": {"code": 1},
    }


def oi_span(s: dict) -> dict:
    a: dict = {}
    if s["kind"] == "agent":
        a = {"openinference.span.kind": "AGENT", "agent.name": s["agent"], "input.value": s["input"]}
    elif s["kind"] == "llm":
        a = {
            "openinference.span.kind": "LLM",
            "llm.model_name": s["model"],
            "llm.token_count.prompt": s["tin"],
            "llm.token_count.completion": s["tout"],
        }
        for i, (r, c) in enumerate(s["inputs"]):
            a[f"llm.input_messages.{i}.message.role"], a[f"llm.input_messages.{i}.message.content"] = r, c
        a["llm.output_messages.0.message.role"] = "assistant"
        a["llm.output_messages.0.message.content"] = s["outputs"][0][1]
        if "call" in s:
            cid, tool, args = s["call"]
            p = "llm.output_messages.0.message.tool_calls.0.tool_call."
            a.update({p + "id": cid, p + "function.name": tool, p + "function.arguments": args})
    else:
        a = {
            "openinference.span.kind": "TOOL",
            "tool.name": s["tool"],
            "input.value": s["args"],
            "output.value": s["output"],
        }
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s["start"]))
    return {
        "name": s["name"],
        "context": {"trace_id": s["trace"], "span_id": s["id"]},
        "parent_id": s["parent"] or None,
        "span_kind": a["openinference.span.kind"],
        "start_time": iso + "Z",
        "end_time": iso + "Z",
        "status_code": "OK",
        "attributes": a,
    }


def build(path: Path, fmt: str, target_mb: float, seed: int = 11) -> tuple[int, int]:
    text = Text(seed)
    target = target_mb * 1024**2
    n = 0
    with path.open("w", encoding="utf-8") as f:
        while f.tell() < target:
            pair = [trace_spans(n, text), trace_spans(n + 1, text)]
            n += 2
            if fmt == "openinference":
                for spans in pair:
                    for s in spans:
                        f.write(json.dumps(oi_span(s), ensure_ascii=False) + "\n")
                continue
            both = sorted((s for spans in pair for s in spans), key=lambda s: s["end"])  # root of each trace last
            for i in range(0, len(both), 200):
                batch = [otlp_span(s) for s in both[i : i + 200]]
                line = {
                    "resourceSpans": [
                        {
                            "resource": {"attributes": _kv({"service.name": "bench"})},
                            "scopeSpans": [{"scope": {"name": "bench"}, "spans": batch}],
                        }
                    ]
                }
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
    return path.stat().st_size, n


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--format", choices=["otlp", "openinference"], default="otlp")
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--out", default="")
    ap.add_argument("--keep", action="store_true", help="keep the bench database")
    ap.add_argument("--no-build", action="store_true", help="reuse the file built by an earlier run")
    ap.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = Path(args.out or f"/tmp/mast_bench_spans_{args.format}.jsonl")
    if args.build_only:
        size, n = build(out, args.format, args.mb)
        print(f"built {out}: {n} traces, {size / 1024**2:.1f} MB")
        return
    if not (args.no_build and out.exists()):
        t = time.perf_counter()
        cmd = [
            sys.executable,
            __file__,
            "--build-only",
            "--format",
            args.format,
            "--mb",
            str(args.mb),
            "--out",
            str(out),
        ]
        subprocess.run(cmd, check=True)
        print(f"  (built in {time.perf_counter() - t:.1f} s, in a child process)")
    size = out.stat().st_size

    env = bench_env(BENCH_DB)
    create_bench_db(env)
    django_setup(env)
    from django.db import connection

    from traces.importing.service import traces_import
    from traces.models import Step
    from traces.projects.services import project_get_or_create

    project, _ = project_get_or_create(slug="bench-spans", name="Span import bench")
    rss_before = rss_mb()

    def progress(p) -> None:
        pct = 100 * p.bytes_done / p.bytes_total if p.bytes_total else 0
        print(f"\r  {pct:5.1f}%  {p.imported} imported", end="", file=sys.stderr, flush=True)

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    load_before = os.getloadavg()
    cpu_self, cpu_server = self_cpu_seconds(), proc_cpu_seconds(backend)
    t = time.perf_counter()
    result = traces_import(project=project, paths_or_files=[out], progress=progress)
    elapsed = time.perf_counter() - t
    cpu_self = self_cpu_seconds() - cpu_self
    end_server = proc_cpu_seconds(backend)
    cpu_server = end_server - cpu_server if cpu_server is not None and end_server is not None else None
    print(file=sys.stderr)
    mb = size / 1024**2
    steps = Step.objects.count()
    print(
        f"imported {result.imported} traces ({result.duplicates} duplicates) from {mb:.1f} MB of {args.format} "
        f"in {elapsed:.1f} s"
    )
    print(
        f"  {mb / elapsed:.1f} MB/s, {result.imported / elapsed:.0f} traces/s, {steps:,} steps "
        f"({Step.objects.filter(parent_index__isnull=False).count():,} with a parent)"
    )
    print(
        f"  load average (2 cores) when the import started: {load_before[0]:.2f} {load_before[1]:.2f} "
        f"{load_before[2]:.2f}; after: {os.getloadavg()[0]:.2f}"
    )
    server = f", PostgreSQL backend {cpu_server:.1f} s" if cpu_server is not None else ""
    print(
        f"  CPU time: importing process {cpu_self:.1f} s{server} (wall {elapsed:.1f} s; "
        f"{mb / (cpu_self + (cpu_server or 0)):.1f} MB per CPU-second, both together)"
    )
    print(f"  peak RSS {rss_mb():.0f} MB (importing process; {rss_before:.0f} MB after Django setup)")
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(octet_length(raw_text)), 0) FROM traces_trace")
        stored = cursor.fetchone()[0]
    print(f"  stored text {stored / 1024**2:.1f} MB (repeated LLM inputs are shown once)")
    connection.close()
    if not args.keep:
        drop_bench_db(env)


if __name__ == "__main__":
    main()
