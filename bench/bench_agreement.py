"""Benchmark: round_report vs looping scikit-learn's cohen_kappa_score over the same resamples.

A MAST-sized calibration round: 4 raters x 1642 traces x 14 modes, 1000 trace resamples.
Prints figures; asserts nothing about time (see STYLE.md).

    PYTHONPATH=. .venv/bin/python bench/bench_agreement.py [--n-boot 1000] [--repeat 3]
"""

import argparse
import itertools
import time
import warnings

import numpy as np
from sklearn.metrics import cohen_kappa_score

from annotations.rounds.agreement_report import bootstrap_indices, round_report

MODES = ["1.1", "1.2", "1.3", "1.4", "1.5", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "3.1", "3.2", "3.3"]
CATEGORIES = {m: m.split(".")[0] for m in MODES}
RATERS = ["human-1", "human-2", "human-3", "llm-judge"]


def make_labels(n_traces: int, seed: int = 0, missing: float = 0.02) -> np.ndarray:
    """Raters who copy a latent truth 85% of the time; per-mode prevalence 5-30%; a few gaps."""
    rng = np.random.default_rng(seed)
    shape = (len(RATERS), n_traces, len(MODES))
    prevalence = rng.uniform(0.05, 0.30, len(MODES))
    truth = rng.random(shape[1:]) < prevalence
    labels = np.where(rng.random(shape) < 0.85, truth, rng.random(shape) < prevalence).astype(float)
    labels[rng.random(shape) < missing] = np.nan
    return labels


def sklearn_mean_kappas(labels: np.ndarray, indices: np.ndarray) -> list[float]:
    """The mean pooled pairwise kappa per resample, one cohen_kappa_score call per pair."""
    out = []
    for idx in indices:
        units = labels[:, idx].reshape(len(labels), -1)
        kappas = []
        for i, j in itertools.combinations(range(len(labels)), 2):
            keep = ~np.isnan(units[i]) & ~np.isnan(units[j])
            kappas.append(cohen_kappa_score(units[i][keep], units[j][keep], labels=[0.0, 1.0]))
        out.append(float(np.nanmean(kappas)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-traces", type=int, default=1642)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3, help="round_report runs; the best is reported")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    labels = make_labels(args.n_traces, args.seed)
    shape = "x".join(map(str, labels.shape))
    print(f"labels {shape} (raters x traces x modes), {args.n_boot} trace resamples")

    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        report = round_report(
            labels, raters=RATERS, modes=MODES, categories=CATEGORIES, n_boot=args.n_boot, seed=args.seed
        )
        times.append(time.perf_counter() - start)
    ours = min(times)
    runs = ", ".join(f"{t:.3f}" for t in times)
    print(f"round_report (all statistics, per mode/category/overall, with CIs): {ours:.3f} s (runs: {runs})")

    indices = bootstrap_indices(labels.shape[1], args.n_boot, args.seed)
    n_pairs = len(RATERS) * (len(RATERS) - 1) // 2
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        replicates = sklearn_mean_kappas(labels, indices)
    slow = time.perf_counter() - start
    calls = args.n_boot * n_pairs
    print(f"sklearn cohen_kappa_score loop ({calls} calls, overall mean pairwise kappa only): {slow:.3f} s")
    print(f"speedup: {slow / ours:.1f}x")

    tail = (1 - report["bootstrap"]["ci_level"]) / 2
    reference = np.quantile(replicates, [tail, 1 - tail])
    ci = report["overall"]["mean_pairwise_kappa"]["ci"]
    print(f"same CI? round_report {ci} vs sklearn loop {reference.tolist()}")


if __name__ == "__main__":
    main()
