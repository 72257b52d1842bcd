"""Reads for dataset releases: which traces, a build's spec and counts, agreement, listing, who may download.

The records themselves (final labels, raters' labels, mapped across versions, streamed chunk by
chunk) are built in ``annotations.releases.records``; the traces a release selects, its spec and its
counts are defined here and shared with it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet

from annotations.labels.visibility import blind_round_traces, open_round_traces
from annotations.models import AgreementReport, Annotation, Rater, Release, ReleasePolicy, Round
from annotations.rounds.agreed import agreed_adjudications, agreed_labels_stamp
from taxonomy.mapping import mappings_fingerprint
from taxonomy.models import TaxonomyVersion
from traces.models import Project, Trace

# ------------------------------------------------------------------ which traces


def _submitted_annotations(*, project: Project) -> QuerySet[Annotation]:
    """The annotations behind ``records._submitted_labels`` (30k rows where labels are 420k: cheaper to scan)."""
    return Annotation.objects.filter(trace__project=project, state="submitted").filter(
        Q(round__isnull=True) | Q(round__state=Round.State.CLOSED)
    )


def release_traces(
    *, project: Project, selection: str, round: Round | None = None, filters: dict | None = None, majority: bool = False
) -> QuerySet[Trace]:
    """The candidate traces of a release (traces with no final label at all are dropped later).

    The blind rule: traces in a draft or open round are left out whatever the selection, because
    a release is shared (members may download it) and would show the judge's and earlier raters'
    labels of traces someone is labelling blind. ``release_withheld`` says which and why; the build
    (``records.release_records``) applies the same rule chunk by chunk."""
    return _selected_traces(
        project=project, selection=selection, round=round, filters=filters, majority=majority
    ).exclude(
        # NOT EXISTS (an anti-join), not NOT IN: the planner cannot hash a NOT IN over a round of a
        # million traces and ran it as a loop per trace (1.5 s a chunk of 5,000 at 1,000,000 traces)
        Exists(open_round_traces(project=project).filter(trace_id=OuterRef("pk")))
    )


def release_withheld(*, spec: ReleaseSpec) -> dict[str, Any]:
    """The selected traces left out because they are in draft/open rounds, for the manifest and card."""
    selected = _selected_traces(
        project=spec.project, selection=spec.selection, round=spec.round, filters=spec.filters, majority=spec.majority
    )
    blind = open_round_traces(project=spec.project).filter(trace_id__in=selected.values("id"))
    rounds = sorted(set(blind.values_list("round__name", flat=True)))
    return {
        "traces": blind.values("trace_id").distinct().count(),
        "rounds": rounds,
        "reason": "in a draft or open calibration round when the release was built (the blind rule)",
    }


def _selected_traces(
    *, project: Project, selection: str, round: Round | None, filters: dict | None, majority: bool
) -> QuerySet[Trace]:
    qs = Trace.objects.filter(project=project)
    if selection == Release.Selection.ROUND:
        return qs.filter(round_traces__round=round)
    if selection == Release.Selection.FILTER:
        filters = filters or {}
        for key, field_name in (("mas_name", "mas_name"), ("llm_name", "llm_name"), ("benchmark", "benchmark")):
            if filters.get(key):
                qs = qs.filter(**{f"{field_name}__in": filters[key]})
        return qs
    agreed = Q(id__in=agreed_adjudications(project=project).values("trace_id"))
    if majority:
        human = _submitted_annotations(project=project).filter(rater__kind=Rater.Kind.HUMAN)
        agreed |= Q(id__in=human.values("trace_id"))
    return qs.filter(agreed)


# ------------------------------------------------------------------ records


@dataclass
class ReleaseSpec:
    project: Project
    version: TaxonomyVersion
    selection: str = Release.Selection.AGREED
    round: Round | None = None
    filters: dict = field(default_factory=dict)
    majority: bool = False
    raters: bool = False
    judge: bool = False
    evidence: bool = False
    trace_text: bool = True
    name: str = ""
    number: int | None = None

    @classmethod
    def from_release(cls, release: Release) -> ReleaseSpec:
        o = release.options or {}
        return cls(
            project=release.project,
            version=release.taxonomy_version,
            selection=release.selection,
            round=release.round,
            filters=release.filters or {},
            majority=bool(o.get("majority")),
            raters=bool(o.get("raters")),
            judge=bool(o.get("judge")),
            evidence=bool(o.get("evidence")),
            trace_text=bool(o.get("trace_text", True)),
            name=f"{release.project.slug} v{release.number}",
            number=release.number,
        )


@dataclass
class ReleaseStats:
    traces: int = 0
    consensus_traces: int = 0
    majority_traces: int = 0
    skipped_no_labels: int = 0
    majority_labels: int = 0
    by_mas_name: Counter = field(default_factory=Counter)
    by_llm_name: Counter = field(default_factory=Counter)
    by_benchmark_name: Counter = field(default_factory=Counter)
    present: Counter = field(default_factory=Counter)
    rounds: set = field(default_factory=set)


def release_count_candidates(*, spec: ReleaseSpec) -> int:
    return release_traces(
        project=spec.project, selection=spec.selection, round=spec.round, filters=spec.filters, majority=spec.majority
    ).count()


def release_agreement(*, round_ids: set[int]) -> list[dict[str, Any]]:
    """Agreement figures of the rounds behind a release, from their stored reports."""
    out = []
    reports = AgreementReport.objects.filter(round_id__in=round_ids, rater_set="humans").select_related("round")
    for rep in reports.order_by("round__closed_at", "round_id"):
        data = rep.data if isinstance(rep.data, dict) else {}
        summary: dict[str, Any] = {k: data[k] for k in ("n_traces", "n_units") if k in data}
        if isinstance(data.get("raters"), list):
            summary["n_raters"] = len(data["raters"])
        overall = data.get("overall") if isinstance(data.get("overall"), dict) else {}
        for name, stat in overall.items():  # {"fleiss_kappa": {"value", "ci_low", "ci_high", ...}, ...}
            if isinstance(stat, dict) and "value" in stat:
                summary[name] = {k: stat[k] for k in ("value", "ci_low", "ci_high") if k in stat}
            elif isinstance(stat, int | float):
                summary[name] = stat
        out.append(
            {
                "round": rep.round.name,
                "round_id": rep.round_id,
                "computed_at": rep.computed_at.isoformat(),
                "summary": summary,
            }
        )
    known = {a["round_id"] for a in out}
    for r in Round.objects.filter(id__in=round_ids - known).order_by("closed_at"):
        out.append({"round": r.name, "round_id": r.pk, "summary": {}, "note": "no stored agreement report"})
    return out


def release_inputs_fingerprint(*, project: Project) -> str:
    """A digest of what a release of the project is built from (agreed labels, submitted labels,
    the mappings between versions): equal fingerprints mean a new release would hold the same labels.
    The agreed labels are read as their stamp (bumped by triggers on any adjudication or round
    write), not as an aggregate over every adjudication, which missed bulk updates."""

    stamp = agreed_labels_stamp(project=project)
    labels = _submitted_annotations(project=project).aggregate(n=Count("id"), at=Max("updated_at"))
    n_traces = Trace.objects.filter(project=project).count()
    key = f"{stamp}|{labels['n']}|{labels['at']}|{n_traces}|{mappings_fingerprint()}"
    return hashlib.sha256(key.encode()).hexdigest()


def release_list(*, project: Project) -> QuerySet[Release]:
    return (
        Release.objects.filter(project=project)
        .select_related("created_by", "taxonomy_version__taxonomy", "round")
        .prefetch_related("files")
        .order_by("-number")
    )


def release_get(*, project: Project, number: int) -> Release | None:
    return (
        Release.objects.filter(project=project, number=number)
        .select_related("created_by", "taxonomy_version__taxonomy", "round", "project")
        .prefetch_related("files")
        .first()
    )


def release_members_may_download(*, project: Project) -> bool:
    """The project's release policy: may annotators and viewers download published releases?"""
    if not hasattr(project, "_release_policy_cache"):
        project._release_policy_cache = bool(
            ReleasePolicy.objects.filter(project=project).values_list("members_may_download", flat=True).first()
        )
    return project._release_policy_cache


def release_blind_for(*, user, release: Release) -> str:
    """Why ``user`` may not download ``release`` now, or "": a release built before a draft or open
    round began may hold the earlier consensus, rationales and judge labels of traces that round
    labels blind again, so whoever is blind on them (``blind_round_traces``) waits until it goes
    to review. A release built while the round was already there left those traces out."""
    selected = _selected_traces(
        project=release.project,
        selection=release.selection,
        round=release.round,
        filters=release.filters,
        majority=bool((release.options or {}).get("majority")),
    )
    rows = blind_round_traces(user=user, project=release.project).filter(
        round__created_at__gte=release.created_at, trace_id__in=selected.values("id")
    )
    names = sorted(set(rows.values_list("round__name", flat=True)))
    if not names:
        return ""
    n = rows.values("trace_id").distinct().count()
    return (
        f"Release v{release.number} was built before {', '.join(names)} began and holds labels of {n} "
        f"trace{'s' if n != 1 else ''} you are labelling blind there: you can download it once that round "
        "is in review."
    )


def release_may_download(*, project: Project, role: str | None) -> bool:
    """Managers always; annotators and viewers only where the project's release policy allows it."""
    if role == "manager":
        return True
    return role is not None and release_members_may_download(project=project)


def release_filter_choices(*, project: Project) -> dict[str, list[str]]:
    qs = Trace.objects.filter(project=project)
    return {
        key: list(qs.order_by(key).values_list(key, flat=True).distinct())
        for key in ("mas_name", "llm_name", "benchmark")
    }
