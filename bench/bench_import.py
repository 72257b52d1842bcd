"""Import speed and memory: a MAST-Data-shaped file of 1,642 records (~200 MB) into PostgreSQL.

Run: .venv/bin/python bench/bench_import.py [--records 1642] [--mb 200] [--keep]

1. Builds a JSON array of MAST-Data records in /tmp from the real samples in ../shared/mast
   (native logs under traces/ and the step lists under mad_thirdparty_derived/, the latter
   rendered as AG2-style message JSON). Each record's trajectory is its sample repeated to a
   size drawn around the target mean, plus a variant marker, so every content hash differs.
   Records carry a random mast_annotation, so the "MAST-Data judge" hook runs too; one record in
   50 has a bare ``NaN`` label, as real copies do (orjson refuses it: the json fallback reads it).
2. Creates a fresh PostgreSQL database (DATABASE_URL's server, name mast_bench_import), migrates it.
3. Imports the file with traces_import in this process and prints MB/s, records/s, peak RSS.

Needs ../shared/mast beside the repo and a PostgreSQL server (DATABASE_URL, default 127.0.0.1).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import resource
import sys
import time
from pathlib import Path

from benchdb import (  # bench/ is on sys.path when run as a script
    bench_env,
    create_bench_db,
    django_setup,
    drop_bench_db,
    proc_cpu_seconds,
    set_toast_compression,
)

REPO = Path(__file__).resolve().parents[1]
MAST = REPO.parent / "shared" / "mast"
BENCH_DB = "mast_bench_import"
CODES = ["1.1", "1.2", "1.3", "1.4", "1.5", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "3.1", "3.2", "3.3"]
NATIVE = {
    "ChatDev": "traces/chatdev/*/*.log",
    "AppWorld": "traces/appworld/*.txt",
    "Magentic-One": "traces/magentic_one/*console_log.txt",
    "OpenManus": "traces/openmanus/*.log",
    "HyperAgent": "traces/hyperagent/*_human.json",
    "AG2": "traces/ag2/*_human.json",
}


def samples() -> list[tuple[str, str, str]]:
    """(mas_name, kind, text) where kind is "text" (repeat as is) or "messages" (JSON message list)."""
    out: list[tuple[str, str, str]] = []
    for mas, pattern in NATIVE.items():
        for path in sorted(MAST.glob(pattern)):
            out.append((mas, "text", path.read_text(encoding="utf-8", errors="replace")))
    for path in sorted((MAST / "mad_thirdparty_derived").glob("*_output_mad.json")):
        for item in json.loads(path.read_text(encoding="utf-8")):
            meta = item.get("metadata")
            if isinstance(meta, str):
                try:
                    meta = ast.literal_eval(meta)
                except (ValueError, SyntaxError):
                    meta = {}
            mas = (meta or {}).get("mas_name") or path.name.split("_")[0]
            msgs = [
                {"name": s.get("agent") or "agent", "role": "assistant", "content": s.get("content", "")}
                for s in item["steps"]
            ]
            out.append((str(mas), "messages", json.dumps(msgs, ensure_ascii=False)))
    if not out:
        sys.exit(f"no samples under {MAST}")
    return out


def trajectory(kind: str, text: str, size: int, variant: int) -> str:
    marker = f"bench variant {variant}"
    if kind == "text" and text.lstrip().startswith("{"):  # a native JSON file: repeat its trajectory list
        obj = json.loads(text)
        reps = max(1, round(size / max(len(text), 1)))
        traj = list(obj.get("trajectory") or []) * reps
        if traj and isinstance(traj[0], str):
            traj.append(marker)
        else:
            traj.append({"content": [marker], "role": "user", "name": traj[0].get("name", "user") if traj else "user"})
        obj["trajectory"] = traj
        return json.dumps(obj, ensure_ascii=False, indent=1)
    if kind == "text":
        reps = max(1, round(size / max(len(text), 1)))
        return "\n".join([text] * reps) + f"\n{marker}\n"
    msgs = json.loads(text)
    unit = max(len(text), 1)
    reps = max(1, round(size / unit))
    msgs = msgs * reps
    if msgs:
        msgs = [dict(msgs[0], content=f"{msgs[0]['content']}\n{marker}"), *msgs[1:]]
    return json.dumps({"trajectory": msgs}, ensure_ascii=False)


def build(path: Path, n_records: int, target_mb: float, seed: int = 7) -> int:
    rng = random.Random(seed)
    pool = samples()
    mean = target_mb * 1024**2 / n_records
    with path.open("w", encoding="utf-8") as f:
        f.write("[\n")
        for i in range(n_records):
            mas, kind, text = pool[i % len(pool)]
            size = int(mean * rng.lognormvariate(0, 0.6) / 1.197)  # E[lognormal(0, .6)] = 1.197
            rec = {
                "mas_name": mas,
                "llm_name": rng.choice(["GPT-4o", "Claude-3.7-Sonnet", "Qwen2.5-Coder-32B"]),
                "benchmark_name": rng.choice(["ProgramDev", "GSM-Plus", "GAIA", "SWE-Bench-Lite", "AppWorld"]),
                "trace_id": i,
                "trace": {"key": f"{mas}_bench", "index": i, "trajectory": trajectory(kind, text, size, i)},
                "mast_annotation": {c: rng.choice([0, 0, 0, 1, None]) for c in CODES},
            }
            if i % 50 == 7:  # real MAST-Data copies hold bare NaN labels: the standard-library fallback
                rec["mast_annotation"]["2.2"] = float("nan")
            if i:
                f.write(",\n")
            json.dump(rec, f, ensure_ascii=False)
        f.write("\n]\n")
    return path.stat().st_size


def self_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def rss_mb() -> float:
    """Peak RSS of this process: /proc's VmHWM (Linux), which starts again at exec; getrusage's
    ru_maxrss is kept across exec, so a child of a large process would report its parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1642)
    ap.add_argument("--mb", type=float, default=200)
    ap.add_argument("--out", default="/tmp/mast_bench_import.json")
    ap.add_argument("--keep", action="store_true", help="keep the bench database")
    ap.add_argument("--no-build", action="store_true", help="reuse the file built by an earlier run")
    ap.add_argument("--db", default=BENCH_DB, help="bench database name (several people bench at once)")
    ap.add_argument("--reuse", action="store_true", help="import into the existing database --db (its indexes and all)")
    ap.add_argument("--into", default="bench", help="the project's slug (made if missing)")
    ap.add_argument("--seed", type=int, default=7, help="another seed: other records (for a project that has these)")
    ap.add_argument(
        "--compression", choices=["lz4", "pglz"], default="lz4", help="TOAST compression of the text (migrations: lz4)"
    )
    args = ap.parse_args()

    env = bench_env(args.db)

    out = Path(args.out)
    t = time.perf_counter()
    if args.no_build and out.exists():
        size = out.stat().st_size
    else:
        size = build(out, args.records, args.mb, seed=args.seed)
        print(f"built {out}: {args.records} records, {size / 1024**2:.1f} MB in {time.perf_counter() - t:.1f} s")

    create_bench_db(env, reuse=args.reuse)
    if args.compression != "lz4":
        set_toast_compression(env, args.compression)
    django_setup(env)
    from django.db import connection

    from annotations.models import ModeLabel
    from traces.importing.service import traces_import
    from traces.models import Step
    from traces.projects.services import project_get_or_create

    project, _ = project_get_or_create(slug=args.into, name="Import bench")
    rss_before = rss_mb()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]

    def progress(p) -> None:
        pct = 100 * p.bytes_done / p.bytes_total if p.bytes_total else 0
        print(f"\r  {pct:5.1f}%  {p.imported} imported", end="", file=sys.stderr, flush=True)

    load_before = os.getloadavg()[0]
    cpu_self, cpu_server = self_cpu_seconds(), proc_cpu_seconds(backend)
    cpu_main = time.thread_time()  # the importer's main thread: parsing, statistics, rows, hooks
    t = time.perf_counter()
    result = traces_import(project=project, paths_or_files=[out], progress=progress)
    elapsed = time.perf_counter() - t
    cpu_main = time.thread_time() - cpu_main
    cpu_self = self_cpu_seconds() - cpu_self
    end_server = proc_cpu_seconds(backend)
    cpu_server = end_server - cpu_server if cpu_server is not None and end_server is not None else None
    print(file=sys.stderr)
    peak = rss_mb()
    mb = size / 1024**2
    print(f"imported {result.imported} traces ({result.duplicates} duplicates) from {mb:.1f} MB in {elapsed:.1f} s")
    print(f"  {mb / elapsed:.1f} MB/s, {result.imported / elapsed:.0f} records/s")
    print(f"  load average (2 cores) at the start: {load_before:.1f}; at the end: {os.getloadavg()[0]:.1f}")
    print(f"  TOAST compression: {args.compression}")
    server = f", PostgreSQL backend {cpu_server:.1f} s" if cpu_server is not None else ""
    print(f"  CPU time: importing process {cpu_self:.1f} s{server} (wall {elapsed:.1f} s)")
    print(f"  CPU time of the importer's main thread: {cpu_main:.2f} s (the rest of the process: the COPY writer)")
    print(f"  peak RSS {peak:.0f} MB (importing process; {rss_before:.0f} MB after Django setup)")
    print(
        f"  rows: {len(result.trace_ids)} traces, {Step.objects.filter(trace_id__in=result.trace_ids).count()} steps, "
        f"{ModeLabel.objects.filter(annotation__trace_id__in=result.trace_ids).count()} MAST-Data judge labels"
    )
    connection.close()
    if not (args.keep or args.reuse):
        drop_bench_db(env)


if __name__ == "__main__":
    main()
