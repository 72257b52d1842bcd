"""Attribution agreement (annotations/rounds/attribution/agreement.py) on a MAST-Data-sized round:
1,642 traces x 3 raters, 6 agents, steps 0-60, 1,000 bootstrap resamples. Prints seconds.

    .venv/bin/python bench/bench_attribution_agreement.py
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from annotations.rounds.attribution.agreement import attribution_agreement  # noqa: E402


def main(n_traces: int = 1642, n_raters: int = 3, n_boot: int = 1000, repeats: int = 5) -> None:
    rng = np.random.default_rng(1)
    names = ["Planner", "Coder", "Tester", "Reviewer", "WebSurfer", "Orchestrator"]
    truth = rng.integers(0, len(names), n_traces)
    step = rng.integers(0, 60, n_traces)
    agents, steps, none = [], [], []
    for _ in range(n_raters):
        flip = rng.random(n_traces) < 0.3
        a = np.where(flip, rng.integers(0, len(names), n_traces), truth)
        s = np.clip(step + rng.integers(-3, 4, n_traces) * (rng.random(n_traces) < 0.5), 0, 60)
        no = rng.random(n_traces) < 0.05
        agents.append([names[k] for k in a])
        steps.append([None if n else int(v) for v, n in zip(s, no, strict=True)])
        none.append(list(no))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        attribution_agreement(agents=agents, steps=steps, none=none, raters=["a", "b", "c"][:n_raters], n_boot=n_boot)
        times.append(time.perf_counter() - t0)
    load = os.getloadavg()[0]
    print(
        f"attribution agreement, {n_traces} traces x {n_raters} raters, {n_boot} resamples: "
        f"median {np.median(times):.3f} s, best {min(times):.3f} s over {repeats} runs (load {load:.1f})"
    )


if __name__ == "__main__":
    main()
