"""Where failures start (pure: no Django): counts over attributed traces.

Each input row is one failed trace with its agreed (or ground-truth) attribution:
``{"framework", "n_steps", "step" (index or None), "agent", "modes" (the decisive step's modes),
"later_modes" (modes shown by evidence on steps after the decisive step)}``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

N_BINS = 10


def relative_position(step: int, n_steps: int) -> float:
    """0.0 = the first step, 1.0 = the last (a one-step trace: 0.0)."""
    return 0.0 if n_steps <= 1 else step / (n_steps - 1)


def position_histogram(rows: Iterable[Mapping[str, Any]], bins: int = N_BINS) -> list[tuple[str, int]]:
    """Decisive steps by relative position in their trace, in ``bins`` equal bins (last bin closed)."""
    counts = [0] * bins
    for r in rows:
        if r.get("step") is None or not r.get("n_steps"):
            continue
        counts[min(int(relative_position(r["step"], r["n_steps"]) * bins), bins - 1)] += 1
    width = 100 // bins
    return [(f"{k * width}–{(k + 1) * width}%", n) for k, n in enumerate(counts)]


def agents_by_framework(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, int]]:
    """(framework, responsible agent, traces), most frequent first."""
    counts = Counter((r.get("framework") or "unknown", r.get("agent") or "(no agent)") for r in rows)
    return [(f, a, n) for (f, a), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def decisive_modes(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, int]]:
    counts = Counter(code for r in rows for code in r.get("modes") or [])
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def following_modes(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, int]]:
    """(decisive-step mode or "(none given)", a mode shown later in the same trace, traces)."""
    counts: Counter[tuple[str, str]] = Counter()
    for r in rows:
        for first in r.get("modes") or ["(none given)"]:
            for later in set(r.get("later_modes") or []):
                counts[(first, later)] += 1
    return [(a, b, n) for (a, b), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
