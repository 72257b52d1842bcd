"""Several judges side by side (reads): the MAST paper's Table 2 and honest failure shares.

``judge_comparison`` sets any set of judge runs and imported raters against the agreed human
labels of one closed round (its consensus) or of the whole project, on one taxonomy version:
per rater, per mode and pooled, accuracy / precision / recall / F1 / Cohen's kappa with 95%
bootstrap intervals over traces (``comparison_stats.compare``), judge-vs-judge kappa on the traces
both labelled, and each mode's prevalence three ways (``prevalence.prevalence_three_ways``).

Decisions:
- A run's labels are its rater's annotations of the run's traces (a later run of the same model
  and prompt replaces them); an imported rater's are all its annotations in the project.
- The reference is ``rounds.agreed.agreed_labels_on_version`` on the chosen version (default: the
  project's working version): agreed labels of other versions are mapped onto it; values a
  mapping cannot decide are unknown and left out. The judges' own labels count in that version.
- The viewer's blind rule applies (``annotations_visible_to``), as on every judge page.
- The intervals use 1,000 resamples with a fixed seed, so the page, the API, the CSV and the
  LaTeX table show the same numbers.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import numpy as np

from annotations.judge.comparison_stats import MIN_RELIABLE, STATS, compare
from annotations.judge.prevalence import prevalence_three_ways
from annotations.labels.visibility import annotations_visible_to
from annotations.models import JudgeRun, ModeLabel, Rater, Round
from annotations.rounds.agreed import agreed_labels_on_version
from taxonomy.models import TaxonomyVersion
from taxonomy.selectors import version_modes
from traces.models import Project

N_BOOT = 1000
SEED = 2026
STAT_LABELS = {"accuracy": "Accuracy", "precision": "Precision", "recall": "Recall", "f1": "F1", "kappa": "κ"}


@dataclass(frozen=True)
class Source:
    key: str  # "run:<id>" or "rater:<id>"
    label: str
    rater_id: int
    trace_ids: list[int] | None  # None: every trace of the project


def comparison_choices(*, project: Project) -> list[Source]:
    """Judge runs with a rater (newest first), then the project's imported raters."""
    out = []
    for run in JudgeRun.objects.filter(project=project, rater__isnull=False).select_related("rater")[:100]:
        out.append(Source(f"run:{run.pk}", f"Run #{run.pk}: {run.rater.name}", run.rater_id, list(run.trace_ids)))
    for r in (
        Rater.objects.filter(kind=Rater.Kind.IMPORTED, annotations__trace__project=project).distinct().order_by("name")
    ):
        out.append(Source(f"rater:{r.pk}", f"Imported: {r.name}", r.pk, None))
    return out


def _reference(*, project: Project, round: Round | None, version: TaxonomyVersion) -> dict[tuple[int, str], int]:
    """The agreed human labels of the round (its consensus) or of the project, on ``version``:
    labels given on other versions come through the recorded mappings; a value a mapping cannot
    decide is left out (unknown), never guessed."""
    agreed = agreed_labels_on_version(project=project, target=version, round=round)
    return {(t, c): v for t, codes in agreed.labels.items() for c, v in codes.items()}


def _labels(*, user, project: Project, version: TaxonomyVersion, source: Source) -> dict[tuple[int, str], int]:
    visible = annotations_visible_to(user=user, project=project).filter(
        rater_id=source.rater_id, taxonomy_version=version, round__isnull=True
    )
    if source.trace_ids is not None:
        visible = visible.filter(trace_id__in=source.trace_ids)
    rows = (
        ModeLabel.objects.filter(annotation__in=visible)
        .exclude(decision="unsure")
        .values_list("annotation__trace_id", "mode__code", "decision")
    )
    return {(t, c): int(d == "present") for t, c, d in rows}


def _matrix(labels: dict[tuple[int, str], int], traces: list[int], codes: list[str]) -> np.ndarray:
    row = {t: i for i, t in enumerate(traces)}
    col = {c: j for j, c in enumerate(codes)}
    out = np.full((len(traces), len(codes)), np.nan)
    for (t, c), v in labels.items():
        if t in row and c in col:
            out[row[t], col[c]] = v
    return out


def judge_comparison(
    *,
    project: Project,
    user,
    sources: list[Source],
    round: Round | None = None,
    taxonomy_version: TaxonomyVersion | None = None,
    n_boot: int = N_BOOT,
) -> dict:
    version = round.taxonomy_version if round is not None else (taxonomy_version or project.taxonomy_version)
    modes = version_modes(version=version)
    codes = [m.code for m in modes]
    ref = _reference(project=project, round=round, version=version)
    ref_traces = sorted({t for t, _ in ref})
    ref_m = _matrix(ref, ref_traces, codes)
    labels = {s.key: _labels(user=user, project=project, version=version, source=s) for s in sources}
    raters = []
    for s in sources:
        lab = labels[s.key]
        stats = compare(ref_m, _matrix(lab, ref_traces, codes), n_boot=n_boot, seed=SEED)
        judged = sorted({t for t, _ in lab})
        j_m = _matrix(lab, judged, codes)
        h_m = _matrix(ref, judged, codes)
        prevalence = []
        for j, m in enumerate(modes):
            known = ~np.isnan(j_m[:, j])
            shares = prevalence_three_ways(judge=j_m[known, j], human=h_m[known, j])
            prevalence.append({"code": m.code, "name": m.name, **shares})
        raters.append({"source": s, "stats": stats, "n_judged": len(judged), "prevalence": prevalence})
    pairs = []
    for a in range(len(sources)):
        for b in range(a + 1, len(sources)):
            la, lb = labels[sources[a].key], labels[sources[b].key]
            both = sorted({t for t, _ in la} & {t for t, _ in lb})
            pooled = compare(_matrix(la, both, codes), _matrix(lb, both, codes), n_boot=n_boot, seed=SEED)["pooled"]
            pairs.append(
                {
                    "a": sources[a],
                    "b": sources[b],
                    "n_traces": len(both),
                    "kappa": pooled["kappa"],
                    "reliable": pooled["reliable"],
                }
            )
    return {
        "version": version,
        "round": round,
        "modes": modes,
        "mode_rows": [(m, [r["stats"]["modes"][j] for r in raters]) for j, m in enumerate(modes)],
        "n_reference_traces": len(ref_traces),
        "raters": raters,
        "pairs": pairs,
        "min_reliable": MIN_RELIABLE,
        "n_boot": n_boot,
    }


# ------------------------------------------------------------------ downloads (same numbers as the page)


def _fmt(stat, digits: int = 2) -> tuple[str, str, str]:
    if stat.value is None:
        return "", "", ""
    f = f"{{:.{digits}f}}"
    low = f.format(stat.low) if stat.low is not None else ""
    high = f.format(stat.high) if stat.high is not None else ""
    return f.format(stat.value), low, high


def comparison_csv(result: dict) -> str:
    """One row per rater and mode (and a pooled row per rater), values rounded as on the page."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(
        ["rater", "mode", "n_traces", "tp", "fp", "fn", "tn", "reliable_95_ci"]
        + [f"{s}{suffix}" for s in STATS for suffix in ("", "_low", "_high")]
    )
    for r in result["raters"]:
        rows = [(m.code, row) for m, row in zip(result["modes"], r["stats"]["modes"], strict=True)]
        rows.append(("pooled", r["stats"]["pooled"]))
        for code, row in rows:
            vals = [v for s in STATS for v in _fmt(row[s])]
            w.writerow(
                [
                    r["source"].label,
                    code,
                    row["n_traces"],
                    row["tp"],
                    row["fp"],
                    row["fn"],
                    row["tn"],
                    "yes" if row["reliable"] else "no",
                    *vals,
                ]
            )
    return buf.getvalue()


def _tex(text: str) -> str:
    for a, b in (
        ("\\", r"\textbackslash{}"),
        ("&", r"\&"),
        ("%", r"\%"),
        ("$", r"\$"),
        ("#", r"\#"),
        ("_", r"\_"),
        ("{", r"\{"),
        ("}", r"\}"),
        ("~", r"\textasciitilde{}"),
        ("^", r"\textasciicircum{}"),
    ):
        text = text.replace(a, b)
    return text.replace("κ", r"$\kappa$").replace("·", r"$\cdot$")


def _cell(stat) -> str:
    v, lo, hi = _fmt(stat)
    if not v:
        return "--"
    return f"{v} [{lo}, {hi}]" if lo else v


def comparison_latex(result: dict) -> str:
    """Table 2 as LaTeX (booktabs): pooled statistics per rater, then kappa per mode."""
    where = f"round {_tex(result['round'].name)}" if result["round"] else "the project's agreed labels"
    lines = [
        "% MAST Studio judge comparison; 95% bootstrap intervals over traces "
        f"({result['n_boot']} resamples); reference: {where}",
        r"\begin{table}[t]",
        r"\centering",
        r"\begin{tabular}{lr" + "c" * len(STATS) + "}",
        r"\toprule",
        "Judge & Traces & " + " & ".join(_tex(STAT_LABELS[s]) for s in STATS) + r" \\",
        r"\midrule",
    ]
    for r in result["raters"]:
        p = r["stats"]["pooled"]
        mark = "" if p["reliable"] else r"$^\dagger$"
        lines.append(
            f"{_tex(r['source'].label)}{mark} & {p['n_traces']} & " + " & ".join(_cell(p[s]) for s in STATS) + r" \\"
        )
    lines += [r"\bottomrule", r"\end{tabular}"]
    lines.append(
        r"\caption{Judges against " + where + r". $^\dagger$: fewer than "
        f"{result['min_reliable']}" + r" traces; the interval is not a reliable 95\% interval.}"
    )
    lines += [
        r"\end{table}",
        "",
        r"\begin{table}[t]",
        r"\centering",
        r"\begin{tabular}{l" + "c" * len(result["raters"]) + "}",
        r"\toprule",
        "Mode & " + " & ".join(_tex(r["source"].label) for r in result["raters"]) + r" \\",
        r"\midrule",
    ]
    for j, m in enumerate(result["modes"]):
        cells = [_cell(r["stats"]["modes"][j]["kappa"]) for r in result["raters"]]
        lines.append(f"{_tex(m.code)} {_tex(m.name)} & " + " & ".join(cells) + r" \\")
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        r"\caption{Cohen's $\kappa$ per mode with 95\% bootstrap intervals.}",
        r"\end{table}",
        "",
    ]
    return "\n".join(lines)
