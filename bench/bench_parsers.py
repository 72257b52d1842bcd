"""Print parsing throughput (MB/s) per format on the real samples in ../shared/mast.

Run: .venv/bin/python bench/bench_parsers.py [--min-seconds 0.5]
Throughput counts the bytes of the input file; each file is parsed repeatedly until
--min-seconds have passed. Missing sample directories are skipped.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from traces.parsers import iter_mast_records, parse_mast_record, parse_trace  # noqa: E402

MAST = REPO.parent / "shared" / "mast"
GROUPS = {
    "chatdev": "traces/chatdev/*/*.log",
    "hyperagent": "traces/hyperagent/*.json",
    "appworld": "traces/appworld/*.txt",
    "ag2": "traces/ag2/*.json",
    "magentic_one": "traces/magentic_one/*",
    "openmanus": "traces/openmanus/*",
    "metagpt": "traces/metagpt/runs/*.json",
    "metagpt_mmlu": "traces/metagpt_mmlu/*.txt",
}


def timed(fn, min_seconds: float) -> float:
    runs, start = 0, time.perf_counter()
    while True:
        fn()
        runs += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-seconds", type=float, default=0.3)
    args = ap.parse_args()
    if not MAST.is_dir():
        print(f"no samples: {MAST} is missing")
        return
    print(f"{'group':<14}{'format(s)':<28}{'files':>6}{'MB':>8}{'MB/s':>9}")
    for group, pattern in GROUPS.items():
        files = sorted(MAST.glob(pattern))
        if not files:
            print(f"{group:<14}(skipped: no files for {pattern})")
            continue
        total_bytes, total_time, formats = 0, 0.0, defaultdict(int)
        for path in files:
            data = path.read_bytes()
            text = data.decode("utf-8")
            fmt = parse_trace(text, filename=path.name).format
            formats[fmt] += 1
            total_bytes += len(data)
            total_time += timed(lambda t=text, n=path.name: parse_trace(t, filename=n), args.min_seconds / len(files))
        label = ",".join(sorted(formats))
        print(f"{group:<14}{label:<28}{len(files):>6}{total_bytes / 1e6:>8.2f}{total_bytes / total_time / 1e6:>9.1f}")
    for path in sorted((MAST / "human_annotations").glob("*.json")):
        size = path.stat().st_size

        def stream(p: Path = path) -> None:
            with p.open("rb") as f:
                for rec in iter_mast_records(f, filename=p.name):
                    parse_mast_record(rec)

        per_run = timed(stream, args.min_seconds)
        print(f"{'MAST-Data':<14}{path.name[:27]:<28}{'':>6}{size / 1e6:>8.2f}{size / per_run / 1e6:>9.1f}")


if __name__ == "__main__":
    main()
