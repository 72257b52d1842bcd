"""Judges against the humans, as the MAST paper's Table 2 (pure numpy: no Django, no ORM).

Input: the reference labels ``ref`` and one rater's labels ``lab``, both traces x modes arrays of
0/1 with NaN where there is no label. A unit counts where both have a label. Per mode and pooled
over modes: accuracy, precision, recall, F1 and Cohen's kappa, each with a 95% percentile
bootstrap interval over *traces* (a trace is resampled with all its modes, so the pooled
interval respects that a trace's modes are not independent).

Undefined, said as such (``None`` with a reason, never 0 or a crash):
- precision when the rater never said present (TP + FP = 0); recall when the reference never did;
- F1 = 2TP / (2TP + FP + FN): 0 when TP = 0 and FP + FN > 0 (the worst judge, not an undefined
  one); undefined only when TP = FP = FN = 0;
- kappa when chance agreement is 1 (both constant and equal).
A bootstrap interval is taken over the resamples where the statistic is defined; where fewer
than ``MIN_RELIABLE`` traces carry the units, the interval is flagged ``reliable = False``: a
percentile bootstrap over 4-5 traces (MAST's own rounds) is not a 95% interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_RELIABLE = 20
STATS = ("accuracy", "precision", "recall", "f1", "kappa")
UNDEFINED = {
    "accuracy": "no unit labelled by both",
    "precision": "the rater never said present",
    "recall": "the reference never said present",
    "f1": "nobody said present",
    "kappa": "chance agreement is 1 (both constant)",
}


def _metrics(tp, fp, fn, tn):
    """Each statistic from counts (arrays of any shape); NaN where undefined."""
    tp, fp, fn, tn = (np.asarray(x, dtype=float) for x in (tp, fp, fn, tn))
    n = tp + fp + fn + tn
    with np.errstate(divide="ignore", invalid="ignore"):
        acc = np.where(n > 0, (tp + tn) / n, np.nan)
        prec = np.where(tp + fp > 0, tp / (tp + fp), np.nan)
        rec = np.where(tp + fn > 0, tp / (tp + fn), np.nan)
        f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan)
        po = acc
        pe = np.where(n > 0, ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n), np.nan)
        kappa = np.where((n > 0) & (pe < 1 - 1e-12), (po - pe) / (1 - pe), np.nan)
    return {"accuracy": acc, "precision": prec, "recall": rec, "f1": f1, "kappa": kappa}


@dataclass(frozen=True)
class Stat:
    value: float | None
    low: float | None
    high: float | None
    undefined: str | None

    def as_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "undefined": self.undefined}


def _stat(name: str, point: float, boot: np.ndarray) -> Stat:
    if np.isnan(point):
        return Stat(None, None, None, UNDEFINED[name])
    ok = boot[~np.isnan(boot)]
    if ok.size < 2:
        return Stat(float(point), None, None, None)
    low, high = np.percentile(ok, [2.5, 97.5])
    return Stat(float(point), float(low), float(high), None)


def _counts(ref: np.ndarray, lab: np.ndarray):
    """Per trace x mode indicator arrays of TP, FP, FN, TN (0 where either label is missing)."""
    both = ~np.isnan(ref) & ~np.isnan(lab)
    r = np.where(both, ref, 0) > 0.5
    j = np.where(both, lab, 0) > 0.5
    return (both & r & j), (both & ~r & j), (both & r & ~j), (both & ~r & ~j), both


def compare(ref: np.ndarray, lab: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> dict:
    """Per mode and pooled statistics with bootstrap CIs. Returns
    ``{"modes": [{n_traces, tp, fp, fn, tn, reliable, <stat>: Stat}], "pooled": {...}}``."""
    ref = np.asarray(ref, dtype=float)
    lab = np.asarray(lab, dtype=float)
    if ref.shape != lab.shape or ref.ndim != 2:
        raise ValueError(f"ref and lab must be traces x modes of one shape, not {ref.shape} and {lab.shape}")
    T, M = ref.shape
    tp, fp, fn, tn, both = (x.astype(float) for x in _counts(ref, lab))
    rng = np.random.default_rng(seed)
    # W[b, t] = how often trace t is drawn in resample b; counts per resample are W @ indicator.
    W = np.zeros((n_boot, T))
    if T:
        draws = rng.integers(0, T, size=(n_boot, T))
        for b in range(n_boot):
            W[b] = np.bincount(draws[b], minlength=T)
    per = [W @ x for x in (tp, fp, fn, tn)]  # each n_boot x M
    boot_modes = _metrics(*per)
    boot_pooled = _metrics(*(p.sum(axis=1) for p in per))
    point_modes = _metrics(*(x.sum(axis=0) for x in (tp, fp, fn, tn)))
    point_pooled = _metrics(*(x.sum() for x in (tp, fp, fn, tn)))
    modes = []
    for m in range(M):
        n_tr = int(both[:, m].sum())
        row = {
            "n_traces": n_tr,
            "tp": int(tp[:, m].sum()),
            "fp": int(fp[:, m].sum()),
            "fn": int(fn[:, m].sum()),
            "tn": int(tn[:, m].sum()),
            "reliable": n_tr >= MIN_RELIABLE,
        }
        for s in STATS:
            row[s] = _stat(s, float(point_modes[s][m]), boot_modes[s][:, m])
        modes.append(row)
    n_pooled = int(both.any(axis=1).sum())
    pooled = {
        "n_traces": n_pooled,
        "n_units": int(both.sum()),
        "tp": int(tp.sum()),
        "fp": int(fp.sum()),
        "fn": int(fn.sum()),
        "tn": int(tn.sum()),
        "reliable": n_pooled >= MIN_RELIABLE,
    }
    for s in STATS:
        pooled[s] = _stat(s, float(point_pooled[s]), boot_pooled[s])
    return {"modes": modes, "pooled": pooled}
