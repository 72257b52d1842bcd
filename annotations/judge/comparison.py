"""Several judges side by side (reads): the MAST paper's Table 2 and honest failure shares.

``judge_comparison`` sets any set of judge runs and imported raters against the agreed human
labels of one closed round (its consensus) or of the whole project, per taxonomy version: per
rater, per mode and pooled, accuracy / precision / recall / F1 / Cohen's kappa with 95% bootstrap
intervals over traces (``comparison_stats.compare``), judge-vs-judge kappa on the traces both
labelled, and each mode's prevalence three ways (``prevalence.prevalence_three_ways``).

Every judge measured on every version (decisions):
- A judge is compared first on **the version it labelled** (a run's ``taxonomy_version``; an
  imported rater's most used version), with the humans' agreed labels carried onto that version
  through the recorded mappings (``rounds.agreed.agreed_labels_on_version``). Then on **the working
  version** (or the version asked for), with the judge's own labels carried there through the same
  mappings, where they decide any. The result is one section per version; a section names its
  version, how many reference labels and judge labels came through a mapping, and why a judge or a
  mode could not be compared there ("this run labelled MAST v1; no mapping from MAST v1 to MAST v3
  decides 2.6"). A value a mapping cannot decide (a split mode's "present", an added mode) is
  unknown and left out, never guessed.
- A run's labels are its rater's annotations of the run's traces (a later run of the same model
  and prompt replaces them); an imported rater's are all its annotations in the project.
- The viewer's blind rule applies (``annotations_visible_to`` for the judges' labels,
  ``reference_visible_to`` for the reference: a trace she labels blind now has no reference).
- A run is not scored on traces whose reference labels it saw (``excluded.scored_trace_exclusions``:
  its few-shot examples); a cross-fitted baseline's answers count (each trace was predicted by a
  model that did not see it), and the page says so.
- The intervals use 1,000 resamples with a fixed seed, so the page, the API, the CSV and the
  LaTeX table show the same numbers.
"""

from __future__ import annotations

import io
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from annotations.judge.comparison_stats import MIN_RELIABLE, STATS, compare
from annotations.judge.excluded import cross_fit_note, scored_trace_exclusions
from annotations.judge.prevalence import prevalence_three_ways
from annotations.labels.visibility import annotations_visible_to, reference_visible_to
from annotations.models import JudgeRun, ModeLabel, Rater, Round
from annotations.rounds.agreed import agreed_labels_on_version
from taxonomy.mapping import VersionMapper
from taxonomy.models import TaxonomyVersion
from taxonomy.selectors import version_modes
from traces.csv_cells import csv_writer
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
    version_id: int | None = None  # the version a run labelled; None: read from the labels (imported)

    @property
    def short(self) -> str:
        return self.label.split(":", 1)[0] if self.key.startswith("run:") else self.label

    @property
    def noun(self) -> str:
        return "run" if self.key.startswith("run:") else "rater"


def comparison_choices(*, project: Project) -> list[Source]:
    """Judge runs with a rater (newest first), then the project's imported raters."""
    out = []
    runs = JudgeRun.objects.filter(project=project, rater__isnull=False).select_related(
        "rater", "taxonomy_version__taxonomy"
    )
    for run in runs[:100]:
        label = f"Run #{run.pk}: {run.rater.name} ({run.taxonomy_version.label})"
        out.append(Source(f"run:{run.pk}", label, run.rater_id, list(run.trace_ids), run.taxonomy_version_id))
    for r in (
        Rater.objects.filter(kind=Rater.Kind.IMPORTED, annotations__trace__project=project).distinct().order_by("name")
    ):
        out.append(Source(f"rater:{r.pk}", f"Imported: {r.name}", r.pk, None))
    return out


def comparison_versions(*, project: Project):
    """The versions a comparison can be asked on: the working one and those of the project's rounds
    and judge runs (three small queries' worth of ids, whatever the number of labels)."""
    ids = {project.taxonomy_version_id}
    ids |= set(Round.objects.filter(project=project).values_list("taxonomy_version_id", flat=True))
    ids |= set(JudgeRun.objects.filter(project=project).values_list("taxonomy_version_id", flat=True))
    return TaxonomyVersion.objects.filter(pk__in=ids).select_related("taxonomy").order_by("taxonomy__name", "number")


Labels = dict[tuple[int, str], int]  # (trace id, code) -> 1 present / 0 absent


@dataclass
class SourceLabels:
    """One source's labels as stored: per version, per trace, {code: 1|0}."""

    by_version: dict[int, dict[int, dict[str, int]]]

    @property
    def own_version(self) -> int | None:
        """The version with most labels (a run labels one)."""
        counts = Counter({vid: sum(len(c) for c in traces.values()) for vid, traces in self.by_version.items()})
        return counts.most_common(1)[0][0] if counts else None


def _source_labels(*, user, project: Project, source: Source) -> SourceLabels:
    visible = annotations_visible_to(user=user, project=project).filter(rater_id=source.rater_id, round__isnull=True)
    if source.trace_ids is not None:
        visible = visible.filter(trace_id__in=source.trace_ids)
    if source.version_id is not None:
        visible = visible.filter(taxonomy_version_id=source.version_id)
    rows = (
        ModeLabel.objects.filter(annotation__in=visible)
        .exclude(decision="unsure")
        .values_list("annotation__taxonomy_version_id", "annotation__trace_id", "mode__code", "decision")
    )
    out: dict[int, dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for vid, t, c, d in rows:
        out[vid][t][c] = int(d == "present")
    return SourceLabels({v: dict(ts) for v, ts in out.items()})


@dataclass
class Carried:
    """A source's labels on one version: decided values, and what the mapping did to get them."""

    labels: Labels
    native: int  # labels given in this version
    via_mapping: int  # labels decided on this version from another version's labels
    unknown: int  # target units a label reached but the mapping could not decide
    no_path: int  # labels of a version with no recorded mapping to this one
    why: dict[str, str]  # target code -> why this source has no value for it here
    note: str  # why the source has no label at all here ("" when it has some)


def _carry(
    *,
    source: Source,
    labels: SourceLabels,
    version: TaxonomyVersion,
    codes: list[str],
    mapper: VersionMapper,
    version_label: dict[int, str],
) -> Carried:
    out: Labels = {}
    native = via = unknown = no_path = 0
    decided: set[str] = set()
    undecided: set[str] = set()
    for vid, traces in labels.by_version.items():
        if vid == version.pk:
            for t, vals in traces.items():
                for c, v in vals.items():
                    out[(t, c)] = v
                    native += 1
                    decided.add(c)
            continue
        if mapper.steps(vid) is None:
            no_path += sum(len(v) for v in traces.values())
            continue
        for t, vals in traces.items():
            for c, v in mapper.map(vid, dict(vals)).items():
                if c not in codes:
                    continue
                if v is None:
                    unknown += 1
                    undecided.add(c)
                elif (t, c) not in out:  # a label given in this version wins over a carried one
                    out[(t, c)] = v
                    via += 1
                    decided.add(c)
    src = ", ".join(version_label[v] for v in sorted(labels.by_version)) or "nothing"
    what = f"this {source.noun} labelled {src}"
    why: dict[str, str] = {}
    note = ""
    if not labels.by_version:
        note = f"this {source.noun} has no labels you may see yet"
    elif not out:
        if no_path and not unknown:
            note = f"{what}; no recorded mapping connects it to {version.label}"
        else:
            note = f"{what}; no mapping from it to {version.label} decides any mode"
    for c in codes:
        if c in decided or note:
            continue
        if c in undecided:
            why[c] = f"{what}; no mapping from it to {version.label} decides {c} (a split: which part is not recorded)"
        elif version.pk not in labels.by_version:
            why[c] = f"{what}; no mapping from it to {version.label} decides {c}"
        else:
            why[c] = f"this {source.noun} gave no label for {c}"
    return Carried(out, native, via, unknown, no_path, why, note)


def _matrix(labels: Labels, traces: list[int], codes: list[str]) -> np.ndarray:
    row = {t: i for i, t in enumerate(traces)}
    col = {c: j for j, c in enumerate(codes)}
    out = np.full((len(traces), len(codes)), np.nan)
    for (t, c), v in labels.items():
        if t in row and c in col:
            out[row[t], col[c]] = v
    return out


def _rater_row(
    *,
    s: Source,
    c: Carried,
    ref: Labels,
    ref_m: np.ndarray,
    ref_traces: list[int],
    modes: list,
    codes: list[str],
    own: dict[str, int | None],
    version_label: dict[int, str],
    n_boot: int,
    left_out_of: dict[str, tuple[set[int], str]],
) -> dict:
    """One source scored on a version: its agreement with the reference (the traces it is left out
    of excluded), the failure shares three ways, and what the carrying onto the version did."""
    excluded, excluded_why = left_out_of.get(s.key, (set(), ""))
    scored = {k: v for k, v in c.labels.items() if k[0] not in excluded} if excluded else c.labels
    stats = compare(ref_m, _matrix(scored, ref_traces, codes), n_boot=n_boot, seed=SEED)
    for code, row in zip(codes, stats["modes"], strict=True):
        row["why"] = c.why.get(code, "")
    judged = sorted({t for t, _ in c.labels})
    j_m = _matrix(c.labels, judged, codes)
    h_m = _matrix({k: v for k, v in ref.items() if k[0] not in excluded}, judged, codes)
    prevalence = []
    for j, m in enumerate(modes):
        known = ~np.isnan(j_m[:, j])
        shares = prevalence_three_ways(judge=j_m[known, j], human=h_m[known, j])
        prevalence.append({"code": m.code, "name": m.name, "why": c.why.get(m.code, ""), **shares})
    return {
        "source": s,
        "stats": stats,
        "n_judged": len(judged),
        "prevalence": prevalence,
        "own_version": version_label.get(own[s.key]) if own[s.key] else None,
        "native": c.native,
        "via_mapping": c.via_mapping,
        "unknown": c.unknown,
        "no_path": c.no_path,
        "note": c.note,
        "n_excluded": len(excluded & {t for t, _ in ref}),
        "excluded_reason": excluded_why,
        "cross_fitted": left_out_of.get(s.key + ":cross_fit", ""),
    }


def _pairs(raters: list[dict], carried: dict, codes: list[str], n_boot: int) -> list[dict]:
    """Each pair of scored sources' pooled kappa on the traces both labelled."""
    pairs = []
    for a in range(len(raters)):
        for b in range(a + 1, len(raters)):
            sa, sb = raters[a]["source"], raters[b]["source"]
            la, lb = carried[sa.key].labels, carried[sb.key].labels
            both = sorted({t for t, _ in la} & {t for t, _ in lb})
            pooled = compare(_matrix(la, both, codes), _matrix(lb, both, codes), n_boot=n_boot, seed=SEED)["pooled"]
            pairs.append(
                {"a": sa, "b": sb, "n_traces": len(both), "kappa": pooled["kappa"], "reliable": pooled["reliable"]}
            )
    return pairs


def _section(
    *,
    project: Project,
    round: Round | None,
    version: TaxonomyVersion,
    sources: list[Source],
    labels: dict[str, SourceLabels],
    own: dict[str, int | None],
    version_label: dict[int, str],
    working_id: int,
    n_boot: int,
    user,
    left_out_of: dict[str, tuple[set[int], str]],
) -> dict:
    """The comparison on one version (see the module doc)."""
    modes = version_modes(version=version)
    codes = [m.code for m in modes]
    agreed = agreed_labels_on_version(project=project, target=version, round=round)
    everything: Labels = {(t, c): v for t, vals in agreed.labels.items() for c, v in vals.items()}
    ref = reference_visible_to(user=user, project=project, reference=everything)
    n_blind = len({t for t, _ in everything}) - len({t for t, _ in ref})
    ref_mapped = agreed.via_mapping
    ref_traces = sorted({t for t, _ in ref})
    ref_m = _matrix(ref, ref_traces, codes)
    mapper = VersionMapper(version, codes=codes)
    carried = {
        s.key: _carry(
            source=s, labels=labels[s.key], version=version, codes=codes, mapper=mapper, version_label=version_label
        )
        for s in sources
    }
    raters, left_out = [], []
    for s in sources:
        c = carried[s.key]
        if c.note and own[s.key] != version.pk:
            left_out.append({"source": s, "why": c.note})
            continue
        raters.append(
            _rater_row(
                s=s,
                c=c,
                ref=ref,
                ref_m=ref_m,
                ref_traces=ref_traces,
                modes=modes,
                codes=codes,
                own=own,
                version_label=version_label,
                n_boot=n_boot,
                left_out_of=left_out_of,
            )
        )
    pairs = _pairs(raters, carried, codes, n_boot)
    why_empty = ""
    if not ref_traces:
        where = f"round “{round.name}”" if round else "the project's closed rounds"
        why_empty = (
            f"no agreed label of {where} reaches {version.label}"
            + (" (the mapping decides none of them)" if agreed.mapping else "")
            + ": nothing to score against"
        )
    return {
        "version": version,
        "is_working": version.pk == working_id,
        "labelled_by": [s for s in sources if own[s.key] == version.pk],
        "modes": modes,
        "mode_rows": [(m, [r["stats"]["modes"][j] for r in raters]) for j, m in enumerate(modes)],
        "n_reference_traces": len(ref_traces),
        "n_blind_traces": n_blind,
        "reference_via_mapping": ref_mapped,
        "reference_unknown": agreed.n_unknown,
        "reference_mapping": agreed.mapping,
        "why_no_reference": why_empty,
        "raters": raters,
        "left_out": left_out,
        "pairs": pairs,
    }


def judge_comparison(
    *,
    project: Project,
    user,
    sources: list[Source],
    round: Round | None = None,
    taxonomy_version: TaxonomyVersion | None = None,
    n_boot: int = N_BOOT,
) -> dict:
    """One section per version: each source's own version first (in the sources' order), then the
    working version; ``taxonomy_version`` asks for that one version only."""
    labels = {s.key: _source_labels(user=user, project=project, source=s) for s in sources}
    own = {s.key: s.version_id or labels[s.key].own_version for s in sources}
    runs = JudgeRun.objects.in_bulk([int(s.key[4:]) for s in sources if s.key.startswith("run:")])
    left_out_of: dict = {}
    for s in sources:
        run = runs.get(int(s.key[4:])) if s.key.startswith("run:") else None
        if run is not None:
            left_out_of[s.key] = scored_trace_exclusions(run)
            left_out_of[s.key + ":cross_fit"] = cross_fit_note(run)
    working = project.taxonomy_version
    if taxonomy_version is not None:
        wanted = [taxonomy_version.pk]
    else:
        wanted = list(dict.fromkeys([v for v in own.values() if v is not None] + [working.pk]))
    all_ids = set(wanted) | {v for sl in labels.values() for v in sl.by_version}
    versions = {v.pk: v for v in TaxonomyVersion.objects.filter(pk__in=all_ids).select_related("taxonomy")}
    version_label = {pk: v.label for pk, v in versions.items()}
    sections = [
        _section(
            project=project,
            round=round,
            version=versions[vid],
            sources=sources,
            labels=labels,
            own=own,
            version_label=version_label,
            working_id=working.pk,
            n_boot=n_boot,
            user=user,
            left_out_of=left_out_of,
        )
        for vid in wanted
    ]
    # a working-version section no judge reaches says so once, in the sections before it
    return {
        "round": round,
        "sections": sections,
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
    """One row per version, rater and mode (and a pooled row per rater and version), values rounded
    as on the page; a rater that cannot be compared on a version gets one row saying why."""
    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(
        ["taxonomy_version", "rater", "rater_labelled", "mode", "n_traces", "tp", "fp", "fn", "tn", "reliable_95_ci"]
        + [f"{s}{suffix}" for s in STATS for suffix in ("", "_low", "_high")]
        + ["labels_via_mapping", "reference_labels_via_mapping", "why_undefined"]
    )
    for sec in result["sections"]:
        v = sec["version"].label
        for r in sec["raters"]:
            rows = [(m.code, row) for m, row in zip(sec["modes"], r["stats"]["modes"], strict=True)]
            rows.append(("pooled", r["stats"]["pooled"]))
            for code, row in rows:
                vals = [x for s in STATS for x in _fmt(row[s])]
                why = row.get("why") or r["note"] or (sec["why_no_reference"] if not sec["n_reference_traces"] else "")
                w.writerow(
                    [v, r["source"].label, r["own_version"] or "", code, row["n_traces"], row["tp"], row["fp"]]
                    + [row["fn"], row["tn"], "yes" if row["reliable"] else "no", *vals]
                    + [r["via_mapping"], sec["reference_via_mapping"], why]
                )
        for lo in sec["left_out"]:
            w.writerow(
                [v, lo["source"].label, "", "", 0, "", "", "", "", "no"] + [""] * 3 * len(STATS) + ["", "", lo["why"]]
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
    """Table 2 as LaTeX (booktabs), per version: pooled statistics per rater, then kappa per mode."""
    where = f"round {_tex(result['round'].name)}" if result["round"] else "the project's agreed labels"
    lines = [
        "% MAST Studio judge comparison; 95% bootstrap intervals over traces "
        f"({result['n_boot']} resamples); reference: {where}",
    ]
    for sec in result["sections"]:
        v = _tex(sec["version"].label)
        lines.append(
            f"% on {v}: {sec['n_reference_traces']} reference traces, "
            f"{sec['reference_via_mapping']} reference labels carried through a mapping"
        )
        if not sec["raters"] or not sec["n_reference_traces"]:
            why = sec["why_no_reference"] or "; ".join(lo["why"] for lo in sec["left_out"])
            lines += [f"% no table on {v}: {why}", ""]
            continue
        lines += [
            r"\begin{table}[t]",
            r"\centering",
            r"\begin{tabular}{lr" + "c" * len(STATS) + "}",
            r"\toprule",
            "Judge & Traces & " + " & ".join(_tex(STAT_LABELS[s]) for s in STATS) + r" \\",
            r"\midrule",
        ]
        mapped = False
        for r in sec["raters"]:
            p = r["stats"]["pooled"]
            mark = "" if p["reliable"] else r"$^\dagger$"
            if r["via_mapping"]:
                mark += r"$^\ddagger$"
                mapped = True
            lines.append(
                f"{_tex(r['source'].label)}{mark} & {p['n_traces']} & "
                + " & ".join(_cell(p[s]) for s in STATS)
                + r" \\"
            )
        lines += [r"\bottomrule", r"\end{tabular}"]
        note = r" $^\ddagger$: labels carried onto this version through the recorded mappings." if mapped else ""
        lines.append(
            r"\caption{Judges against " + where + f" on {v}" + r". $^\dagger$: fewer than "
            f"{result['min_reliable']}" + r" traces; the interval is not a reliable 95\% interval." + note + "}"
        )
        lines += [
            r"\end{table}",
            "",
            r"\begin{table}[t]",
            r"\centering",
            r"\begin{tabular}{l" + "c" * len(sec["raters"]) + "}",
            r"\toprule",
            "Mode & " + " & ".join(_tex(r["source"].label) for r in sec["raters"]) + r" \\",
            r"\midrule",
        ]
        for j, m in enumerate(sec["modes"]):
            cells = [_cell(r["stats"]["modes"][j]["kappa"]) for r in sec["raters"]]
            lines.append(f"{_tex(m.code)} {_tex(m.name)} & " + " & ".join(cells) + r" \\")
        lines += [
            r"\bottomrule",
            r"\end{tabular}",
            r"\caption{Cohen's $\kappa$ per mode with 95\% bootstrap intervals, on " + v + ".}",
            r"\end{table}",
            "",
        ]
    return "\n".join(lines)
