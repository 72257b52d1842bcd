"""The judge's own reliability (reads): a judge run against an earlier run of the same prompt.

Two runs on the same prompt version and taxonomy version are compared mode by mode
(``reliability_stats.runs_agreement``): Cohen's kappa between their labels, with a 95% bootstrap
interval, and the change in prevalence (share present) from the earlier to the later run, a mode
flagged when the change's interval excludes 0. When the two runs are the *same judge* (same
provider, server, model, temperature and few-shot setting) the kappa is the judge's
self-agreement; otherwise (a new model version, another server) it is the drift between them.
The humans' inter-rater kappa per mode stands beside it: the latest closed round on that taxonomy
version, from its stored agreement report, as the MAST paper reports its human figures.

Decisions:
- Each run's own answers are read from its items (``JudgeItem.parsed`` of its done items), not
  from its rater's annotations: a later run of the same model and prompt writes to the same
  annotations (``worker._write_result``, ``machine_annotation_write``), so they hold only the
  latest run's labels.
- A trace counts only where both runs answered it and neither answer came from the cache: a
  cached answer repeats an earlier call, so it would agree by construction. A run meant to
  measure self-agreement is started with the cache off (``JudgeRun.use_cache``).
- The viewer's blind rule applies: an item counts only where the viewer may see the run's
  annotation of the trace (``annotations_visible_to``); the humans' row only where she may open
  the round's report (``round_access``).
- The intervals use the comparison's resamples and seed (``comparison.N_BOOT``, ``SEED``), so the
  page, the API, the CSV and the LaTeX table show the same numbers.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.core.exceptions import ValidationError
from django.db.models import Exists, OuterRef, QuerySet

from annotations.judge.comparison import N_BOOT, SEED, _tex
from annotations.judge.comparison_stats import MIN_RELIABLE, Stat
from annotations.judge.providers import provider_get
from annotations.judge.reliability_stats import human_kappa, runs_agreement
from annotations.labels.visibility import annotations_visible_to
from annotations.models import AgreementReport, JudgeItem, JudgeRun, Round
from annotations.rounds.selectors import HUMANS, round_access
from taxonomy.models import TaxonomyVersion
from taxonomy.selectors import version_modes
from traces.csv_cells import csv_writer
from traces.models import Project

SELF = "self"
DRIFT = "drift"
MAX_RUNS = 200


def _runs(project: Project) -> QuerySet[JudgeRun]:
    return JudgeRun.objects.filter(project=project).select_related("prompt", "rater", "taxonomy_version__taxonomy")


def _server(run: JudgeRun) -> str:
    return f"connection:{run.connection_id}" if run.connection_id else run.base_url.rstrip("/")


def judge_changes(*, earlier: JudgeRun, later: JudgeRun) -> list[str]:
    """What differs between two runs of one prompt and version (empty: the same judge)."""
    out = []
    if _server(earlier) != _server(later):
        out.append(f"server {earlier.base_url} → {later.base_url}")
    if earlier.model != later.model:
        out.append(f"model {earlier.model} → {later.model}")
    if earlier.temperature != later.temperature:
        out.append(f"temperature {earlier.temperature:g} → {later.temperature:g}")
    if earlier.few_shot != later.few_shot:
        out.append(f"few-shot {'on' if earlier.few_shot else 'off'} → {'on' if later.few_shot else 'off'}")
    return out


def _prompt_name(run: JudgeRun) -> str:
    return f"prompt v{run.prompt.number}" if run.prompt else f"the {run.get_provider_display()} prompt"


def judge_runs_comparable(*, run_a: JudgeRun, run_b: JudgeRun) -> list[str]:
    """Why two runs cannot be set against each other (empty: they can)."""
    if run_a.pk == run_b.pk:
        return [f"run #{run_a.pk} against itself: pick another run of the same prompt"]
    why = []
    for run in (run_a, run_b):
        if not provider_get(run.provider).per_trace:
            why.append(
                f"run #{run.pk} is a baseline classifier, trained on the labels of its day rather than "
                "prompted: set it against the humans on Compare judges"
            )
    if run_a.project_id != run_b.project_id:
        why.append("the runs belong to different projects")
    if run_a.taxonomy_version_id != run_b.taxonomy_version_id:
        why.append(
            f"run #{run_a.pk} labelled {run_a.taxonomy_version.label}, run #{run_b.pk} "
            f"{run_b.taxonomy_version.label}: self-agreement and drift compare runs on one version"
        )
    if run_a.provider != run_b.provider or run_a.prompt_id != run_b.prompt_id:
        why.append(
            f"run #{run_a.pk} used {_prompt_name(run_a)}, run #{run_b.pk} {_prompt_name(run_b)}: "
            "a changed prompt is another judge; set them side by side on Compare judges"
        )
    return why


@dataclass(frozen=True)
class Pair:
    earlier: JudgeRun
    later: JudgeRun
    kind: str  # SELF or DRIFT
    changes: list[str]

    @property
    def key(self) -> str:
        return f"{self.earlier.pk}-{self.later.pk}"


def judge_reliability_pairs(*, project: Project) -> list[Pair]:
    """Runs of one prompt on one version, each later run paired with the run before it and, where
    that one is another judge (another model, server, temperature or few-shot setting), also with
    the last earlier run of the same judge. Newest pairs first. One query."""
    runs = list(
        _runs(project)
        .filter(provider__in=[JudgeRun.Provider.OPENAI, JudgeRun.Provider.MAST], n_done__gt=0)
        .order_by("created_at", "id")[:MAX_RUNS]
    )
    groups: dict[tuple, list[JudgeRun]] = {}
    pairs: list[Pair] = []
    for run in runs:
        earlier = groups.setdefault((run.provider, run.prompt_id, run.taxonomy_version_id), [])
        if earlier:
            before = earlier[-1]
            changes = judge_changes(earlier=before, later=run)
            pairs.append(Pair(before, run, DRIFT if changes else SELF, changes))
            if changes:
                same = [r for r in earlier if not judge_changes(earlier=r, later=run)]
                if same:
                    pairs.append(Pair(same[-1], run, SELF, []))
        earlier.append(run)
    pairs.reverse()
    return pairs


def judge_run_pair(*, project: Project, run_id: int, against: int | None = None) -> tuple[JudgeRun, JudgeRun]:
    """The run and the one to set it against: ``against``, else the run it follows (or the run that
    follows it) in ``judge_reliability_pairs``. ValidationError says why there is none."""
    runs = {r.pk: r for r in _runs(project).filter(pk__in=[run_id, against or run_id])}
    if run_id not in runs:
        raise JudgeRun.DoesNotExist(f"no judge run #{run_id} in this project")
    if against is not None:
        if against not in runs:
            raise ValidationError({"against": f"run #{against} is not a judge run of this project"})
        return runs[run_id], runs[against]
    pairs = judge_reliability_pairs(project=project)
    for pair in pairs:
        if pair.later.pk == run_id:
            return pair.later, pair.earlier
    for pair in pairs:
        if pair.earlier.pk == run_id:
            return pair.earlier, pair.later
    raise ValidationError(
        {
            "against": f"run #{run_id} has no other finished run of the same prompt and taxonomy version: "
            "run the same judge again (with the cache off) to measure its self-agreement"
        }
    )


# ------------------------------------------------------------------ the comparison


def _answers(*, user, project: Project, runs: list[JudgeRun], codes: list[str]) -> dict[str, Any]:
    """Each run's parsed answers of its done items, and what was left out. One query."""
    visible = annotations_visible_to(user=user, project=project).filter(pk=OuterRef("annotation_id"))
    rows = (
        JudgeItem.objects.filter(run__in=[r.pk for r in runs], state=JudgeItem.State.DONE)
        .annotate(visible=Exists(visible))
        .values_list("run_id", "trace_id", "parsed", "cached", "visible")
    )
    known = set(codes)
    labels: dict[int, dict[int, dict[str, int]]] = {r.pk: {} for r in runs}
    cached: dict[int, set[int]] = {r.pk: set() for r in runs}
    hidden: set[int] = set()
    for run_id, trace_id, parsed, was_cached, seen in rows:
        if not seen:
            hidden.add(trace_id)
            continue
        if was_cached:
            cached[run_id].add(trace_id)
        modes = (parsed or {}).get("modes") or []
        labels[run_id][trace_id] = {
            m["code"]: int(bool(m.get("present"))) for m in modes if isinstance(m, dict) and m.get("code") in known
        }
    return {"labels": labels, "cached": cached, "hidden": hidden}


def _humans(*, user, project: Project, version: TaxonomyVersion, codes: list[str]) -> dict[str, Any]:
    """The latest closed round on the version with a stored report, or why there is no human row."""
    rnd = (
        Round.objects.filter(project=project, taxonomy_version=version, state=Round.State.CLOSED)
        .select_related("project")
        .order_by("-closed_at", "-id")
        .first()
    )
    if rnd is None:
        return {
            "round": None,
            "why": f"no closed round on {version.label} yet: the humans' kappa comes from a closed round's report",
        }
    access = round_access(user=user, round=rnd)
    if not access.can_see_report:
        return {"round": None, "why": f"{rnd.title}: {access.why_not}"}
    report = AgreementReport.objects.filter(round=rnd, rater_set=HUMANS).values_list("data", flat=True).first()
    if report is None:
        return {
            "round": rnd,
            "why": f"{rnd.title} has no stored agreement report yet: open its report page to compute it",
        }
    per_mode, overall = human_kappa(report, codes)
    return {"round": rnd, "why": "", "modes": per_mode, "overall": overall, "n_traces": report.get("n_traces")}


def judge_self_agreement(
    *, project: Project, user, run_a: JudgeRun, run_b: JudgeRun, n_boot: int = N_BOOT
) -> dict[str, Any]:
    """Two runs of one prompt and version set against each other (see the module doc).

    ValidationError when they cannot be compared (another version, another prompt, a baseline)."""
    why = judge_runs_comparable(run_a=run_a, run_b=run_b)
    if why:
        raise ValidationError(why)
    earlier, later = sorted((run_a, run_b), key=lambda r: (r.created_at, r.pk))
    changes = judge_changes(earlier=earlier, later=later)
    version = earlier.taxonomy_version
    modes = version_modes(version=version)
    codes = [m.code for m in modes]
    got = _answers(user=user, project=project, runs=[earlier, later], codes=codes)
    la, lb = got["labels"][earlier.pk], got["labels"][later.pk]
    cached = got["cached"][earlier.pk] | got["cached"][later.pk]
    both = set(la) & set(lb)
    traces = sorted(both - cached)

    def matrix(labels: dict[int, dict[str, int]]) -> np.ndarray:
        out = np.full((len(traces), len(codes)), np.nan)
        for i, t in enumerate(traces):
            for j, c in enumerate(codes):
                if c in labels[t]:
                    out[i, j] = labels[t][c]
        return out

    stats = runs_agreement(matrix(la), matrix(lb), n_boot=n_boot, seed=SEED)
    humans = _humans(user=user, project=project, version=version, codes=codes)
    rows = []
    for j, m in enumerate(modes):
        rows.append({"mode": m, **stats["modes"][j], "human": humans["modes"][j] if "modes" in humans else None})
    problems = []
    if not traces:
        if both and both <= cached:
            problems.append(
                f"every trace both runs answered came from the cache ({len(both)}): a cached answer repeats an "
                "earlier call. Run the judge again with the cache off to measure its self-agreement."
            )
        elif got["hidden"] and not both:
            problems.append("the runs' labels are hidden from you here (the blind rule)")
        else:
            problems.append(f"runs #{earlier.pk} and #{later.pk} answered no trace in common")
    return {
        "earlier": earlier,
        "later": later,
        "kind": DRIFT if changes else SELF,
        "changes": changes,
        "version": version,
        "modes": modes,
        "rows": rows,
        "pooled": stats["pooled"],
        "n_traces": len(traces),
        "left_out": {
            "cached": len(both & cached),
            "hidden": len(got["hidden"]),
            "only_earlier": len(set(la) - set(lb)),
            "only_later": len(set(lb) - set(la)),
        },
        "humans": humans,
        "problems": problems,
        "n_boot": n_boot,
        "min_reliable": MIN_RELIABLE,
        "n_moved": sum(1 for r in rows if r["moved"]),
    }


# ------------------------------------------------------------------ JSON and downloads (same numbers)


def _stat(s: Stat | None) -> dict[str, Any] | None:
    return None if s is None else s.as_dict()


def _row_json(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "n_traces": row["n_traces"],
        "both_present": row["both_present"],
        "only_earlier": row["only_a"],
        "only_later": row["only_b"],
        "both_absent": row["both_absent"],
        "kappa": _stat(row["kappa"]),
        "agreement": _stat(row["agreement"]),
        "reliable": row["reliable"],
        "prevalence_earlier": row["prevalence_a"],
        "prevalence_later": row["prevalence_b"],
        "prevalence_change": _stat(row["change"]),
        "prevalence_moved": row["moved"],
    }


def _run_json(run: JudgeRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "rater": run.rater.name if run.rater else None,
        "model": run.model,
        "prompt_version": run.prompt.number if run.prompt else None,
        "use_cache": run.use_cache,
        "created_at": run.created_at.isoformat(),
    }


def reliability_json(result: dict[str, Any]) -> dict[str, Any]:
    humans = result["humans"]
    return {
        "kind": result["kind"],
        "changes": result["changes"],
        "earlier": _run_json(result["earlier"]),
        "later": _run_json(result["later"]),
        "taxonomy_version": {"id": result["version"].pk, "label": result["version"].label},
        "n_traces": result["n_traces"],
        "left_out": result["left_out"],
        "problems": result["problems"],
        "n_boot": result["n_boot"],
        "min_reliable_traces": result["min_reliable"],
        "humans": {
            "round": (
                {"id": humans["round"].pk, "name": humans["round"].name} if humans.get("round") is not None else None
            ),
            "why_not": humans["why"] or None,
            "overall_kappa": _stat(humans.get("overall")),
        },
        "pooled": _row_json(result["pooled"]),
        "modes": [
            {"code": r["mode"].code, "name": r["mode"].name, **_row_json(r), "human_kappa": _stat(r["human"])}
            for r in result["rows"]
        ],
    }


def _num(v: float | None, digits: int = 2) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def _trio(s: Stat | None) -> list[str]:
    if s is None:
        return ["", "", "", ""]
    return [_num(s.value), _num(s.low), _num(s.high), s.undefined or ""]


def reliability_csv(result: dict[str, Any]) -> str:
    """One row per mode and a pooled row, values rounded as on the page."""
    buf = io.StringIO()
    w = csv_writer(buf)
    e, lt = result["earlier"], result["later"]
    w.writerow(
        [
            "earlier_run",
            "later_run",
            "kind",
            "mode",
            "n_traces",
            "both_present",
            "only_earlier",
            "only_later",
            "both_absent",
            "kappa",
            "kappa_low",
            "kappa_high",
            "kappa_undefined",
            "reliable_95_ci",
            "prevalence_earlier",
            "prevalence_later",
            "prevalence_change",
            "change_low",
            "change_high",
            "prevalence_moved",
            "human_kappa",
            "human_low",
            "human_high",
            "human_undefined",
            "human_round",
        ]
    )
    humans = result["humans"]
    round_name = humans["round"].name if humans.get("round") is not None else ""
    rows = [(r["mode"].code, r, r["human"]) for r in result["rows"]]
    rows.append(("pooled", result["pooled"], humans.get("overall")))
    for code, r, human in rows:
        w.writerow(
            [
                e.pk,
                lt.pk,
                result["kind"],
                code,
                r["n_traces"],
                r["both_present"],
                r["only_a"],
                r["only_b"],
                r["both_absent"],
                *_trio(r["kappa"]),
                "yes" if r["reliable"] else "no",
                _num(r["prevalence_a"], 3),
                _num(r["prevalence_b"], 3),
                _num(r["change"].value, 3),
                _num(r["change"].low, 3),
                _num(r["change"].high, 3),
                "yes" if r["moved"] else "no",
                *(_trio(human) if human is not None else ["", "", "", humans["why"]]),
                round_name if human is not None else "",
            ]
        )
    return buf.getvalue()


def _cell(s: Stat | None) -> str:
    if s is None or s.value is None:
        return "--"
    if s.low is None or s.high is None:
        return f"{s.value:.2f}"
    return f"{s.value:.2f} [{s.low:.2f}, {s.high:.2f}]"


def _pct(v: float | None) -> str:
    return "--" if v is None else f"{100 * v:.0f}\\%"


def _change(row: dict[str, Any]) -> str:
    c = row["change"]
    if c.value is None:
        return "--"
    text = f"{100 * c.value:+.0f}"
    if c.low is not None and c.high is not None:
        text += f" [{100 * c.low:+.0f}, {100 * c.high:+.0f}]"
    return text + (r"$^{*}$" if row["moved"] else "")


def reliability_latex(result: dict[str, Any]) -> str:
    """Per mode: the judge's kappa between the runs beside the humans' kappa, and the prevalence shift."""
    e, lt = result["earlier"], result["later"]
    humans = result["humans"]
    what = "Self-agreement" if result["kind"] == SELF else "Drift"
    who = _tex(lt.rater.name if lt.rater else lt.model)
    human_head = f"Humans ({_tex(humans['round'].name)})" if humans.get("modes") else "Humans"
    lines = [
        f"% MAST Studio judge reliability: run #{e.pk} vs run #{lt.pk} on {result['n_traces']} traces; "
        f"95% bootstrap intervals over traces ({result['n_boot']} resamples)",
        r"\begin{table}[t]",
        r"\centering",
        r"\begin{tabular}{lrcccc}",
        r"\toprule",
        f"Mode & Traces & Judge $\\kappa$ & {human_head} $\\kappa$ & Present (run 1 / run 2) & $\\Delta$ pp \\\\",
        r"\midrule",
    ]
    for r in [*result["rows"], {**result["pooled"], "mode": None, "human": humans.get("overall")}]:
        name = f"{_tex(r['mode'].code)} {_tex(r['mode'].name)}" if r["mode"] is not None else "All modes"
        mark = "" if r["reliable"] else r"$^\dagger$"
        lines.append(
            f"{name}{mark} & {r['n_traces']} & {_cell(r['kappa'])} & {_cell(r['human'])} & "
            f"{_pct(r['prevalence_a'])} / {_pct(r['prevalence_b'])} & {_change(r)} \\\\"
        )
    changes = "; ".join(result["changes"]) or "same model, prompt, version and settings"
    changes_tex = _tex(changes).replace("→", r"$\to$")
    human_note = (
        f"humans: mean pairwise Cohen's $\\kappa$ of {_tex(humans['round'].name)}"
        if humans.get("modes")
        else f"humans: {_tex(humans['why'])}"
    )
    lines += [
        r"\bottomrule",
        r"\end{tabular}",
        r"\caption{" + f"{what} of {who}: run \\#{e.pk} against run \\#{lt.pk} ({changes_tex}); "
        f"{human_note}. $^{{*}}$: the prevalence changed beyond its 95\\% interval. "
        f"$^\\dagger$: fewer than {result['min_reliable']} traces; the interval is not a reliable 95\\% interval."
        + "}",
        r"\end{table}",
        "",
    ]
    return "\n".join(lines)
