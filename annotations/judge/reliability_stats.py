"""The judge's own reliability (pure numpy: no Django, no ORM): two runs of a judge against each other.

Input: the labels of an earlier run ``a`` and a later run ``b`` on the same traces, both
traces x modes arrays of 0/1 with NaN where a run gave no label. A unit counts where both runs
labelled it. Per mode and pooled over modes:

- Cohen's kappa between the runs (``comparison_stats.compare``: the statistic the judge pages
  show, with its 95% percentile bootstrap interval over traces and the reason when it is
  undefined: kappa is 0/0 when both runs give one and the same answer on every trace);
- each run's prevalence (share present) and the change ``b - a``, with a 95% percentile bootstrap
  interval drawn from the *same* resamples as kappa's (same seed, same traces drawn). A mode
  "moved" when that interval excludes 0: the later run says present significantly more (or less)
  often than the earlier one on the same traces.

Below ``MIN_RELIABLE`` traces an interval is flagged ``reliable = False`` (as on Compare judges).

``human_kappa`` reads the humans' per-mode kappa out of a round's stored agreement report
(``annotations.rounds.agreement_report.round_report``: ``per_mode[*].mean_pairwise_kappa``) into
the same ``Stat`` shape, so the page can set the judge's self-agreement beside the humans'
inter-rater agreement, as the MAST paper reports its human figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from annotations.judge.comparison_stats import MIN_RELIABLE, Stat, compare

__all__ = ["MIN_RELIABLE", "human_kappa", "runs_agreement"]

NO_UNITS = "no trace was labelled by both runs"


def _weights(n_traces: int, n_boot: int, seed: int) -> NDArray[np.float64]:
    """How often each trace is drawn in each resample: the draws ``compare`` makes for this seed."""
    rng = np.random.default_rng(seed)
    w = np.zeros((n_boot, n_traces))
    if n_traces:
        draws = rng.integers(0, n_traces, size=(n_boot, n_traces))
        for b in range(n_boot):
            w[b] = np.bincount(draws[b], minlength=n_traces)
    return w


def _interval(point: float, boot: NDArray[np.float64]) -> Stat:
    if np.isnan(point):
        return Stat(None, None, None, NO_UNITS)
    ok = boot[~np.isnan(boot)]
    if ok.size < 2:
        return Stat(float(point), None, None, None)
    low, high = np.percentile(ok, [2.5, 97.5])
    return Stat(float(point), float(low), float(high), None)


def _share(num: NDArray[np.float64], den: NDArray[np.float64]) -> NDArray[np.float64]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def runs_agreement(a: np.ndarray, b: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Per mode and pooled: kappa between the runs and the change in prevalence, with CIs.

    Returns ``{"modes": [row], "pooled": row}``; a row holds ``n_traces``, the 2x2 counts
    ``both_present``, ``only_a``, ``only_b``, ``both_absent``, ``kappa`` and ``agreement``
    (``Stat``), ``prevalence_a`` and ``prevalence_b`` (float or None), ``change`` (``Stat``),
    ``moved`` (bool) and ``reliable`` (bool)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"a and b must be traces x modes of one shape, not {a.shape} and {b.shape}")
    n_traces, _ = a.shape
    stats = compare(a, b, n_boot=n_boot, seed=seed)
    both = ~np.isnan(a) & ~np.isnan(b)
    only_a = (both & (a == 1) & (b == 0)).astype(float)
    only_b = (both & (a == 0) & (b == 1)).astype(float)
    units = both.astype(float)
    w = _weights(n_traces, n_boot, seed)
    # change = prevalence_b - prevalence_a = (only_b - only_a) / units, per mode and pooled
    point_modes = _share(only_b.sum(0) - only_a.sum(0), units.sum(0))
    boot_modes = _share(w @ only_b - w @ only_a, w @ units)
    point_pooled = _share(np.array(only_b.sum() - only_a.sum()), np.array(units.sum()))
    boot_pooled = _share((w @ only_b).sum(1) - (w @ only_a).sum(1), (w @ units).sum(1))

    def row(s: dict[str, Any], point: float, boot: NDArray[np.float64]) -> dict[str, Any]:
        n_units = s["tp"] + s["fp"] + s["fn"] + s["tn"]
        change = _interval(point, boot)
        moved = change.low is not None and change.high is not None and (change.low > 0 or change.high < 0)
        return {
            "n_traces": s["n_traces"],
            "n_units": n_units,
            # compare() takes a as the reference: tp both present, fn a only, fp b only
            "both_present": s["tp"],
            "only_a": s["fn"],
            "only_b": s["fp"],
            "both_absent": s["tn"],
            "kappa": s["kappa"],
            "agreement": s["accuracy"],
            "prevalence_a": (s["tp"] + s["fn"]) / n_units if n_units else None,
            "prevalence_b": (s["tp"] + s["fp"]) / n_units if n_units else None,
            "change": change,
            "moved": bool(moved),
            "reliable": s["reliable"],
        }

    modes = [row(s, float(point_modes[j]), boot_modes[:, j]) for j, s in enumerate(stats["modes"])]
    pooled = row(stats["pooled"], float(point_pooled), boot_pooled)
    return {"modes": modes, "pooled": pooled}


def _stored_stat(stored: dict[str, Any] | None) -> Stat:
    if not stored:
        return Stat(None, None, None, "the round's report has no figure for this mode")
    value = stored.get("value")
    if value is None:
        return Stat(None, None, None, stored.get("undefined") or "undefined")
    ci = stored.get("ci")
    if ci:
        return Stat(float(value), float(ci[0]), float(ci[1]), None)
    return Stat(float(value), None, None, None)


def human_kappa(report: dict[str, Any], codes: Sequence[str]) -> tuple[list[Stat], Stat]:
    """The humans' mean pairwise Cohen's kappa per mode (in ``codes`` order) and overall, from a
    stored round report; a mode the report lacks is said to be missing, not 0."""
    by_code = {b.get("mode"): b for b in report.get("per_mode", [])}
    per_mode = [_stored_stat((by_code.get(c) or {}).get("mean_pairwise_kappa")) for c in codes]
    return per_mode, _stored_stat(report.get("mean_pairwise_kappa"))
