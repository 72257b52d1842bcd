"""Writes on calibration rounds: create, open, review, adjudicate, discuss, close; the stored
agreement report; and drafting a revised taxonomy version from a disagreement.

State machine (no skipping, no going back):

    draft --round_open--> open --round_start_review--> review --round_close--> closed

- ``round_open`` freezes the taxonomy version: a draft version is published on opening.
- ``round_start_review`` needs every annotator to have submitted every trace (``force=True``
  lets a manager go on anyway); units on which every annotator gave the same present/absent
  answer become consensus automatically (``Adjudication.basis = unanimous``).
- ``round_close`` needs a consensus for every unit. ``with_majority=True`` decides the remaining
  units by strict majority of the present/absent answers (``basis = majority``). A TIE is never
  decided by vote (present-wins or absent-wins would bias prevalence one way): closing refuses,
  naming the tied units, so an adjudicator decides them.

The report is computed by ``annotations.rounds.agreement_report.round_report`` over the matrix built by
``selectors.rounds.round_label_matrix`` and stored in ``AgreementReport`` with a fingerprint of
what it was computed from; ``agreement_report_get`` recomputes it only when that changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotations.labels.bulk import LabelSet, labels_bulk_write
from annotations.labels.services import rater_for_user
from annotations.models import (
    Adjudication,
    AgreementReport,
    Annotation,
    DisagreementComment,
    ModeLabel,
    Rater,
    Round,
    RoundAnnotator,
    RoundTrace,
)
from annotations.rounds import agreement_report
from annotations.rounds.attribution.consensus import (
    attribution_close_with_majority,
    attribution_consensus_sync,
    attribution_pending,
    round_attribution_report,
)
from annotations.rounds.guards import round_lock, round_manager_require
from annotations.rounds.sampling import round_sample_preview
from annotations.rounds.selectors import (
    HUMANS,
    rater_set_key,
    round_label_matrix,
    round_labels_fingerprint_parts,
    round_progress,
    round_units,
)
from taxonomy.models import FailureMode, TaxonomyVersion
from taxonomy.selectors import version_is_newer, version_modes
from taxonomy.services import mode_edit, version_draft_next, version_publish
from traces.models import Membership, Project, Trace
from traces.projects.selectors import user_can
from traces.projects.services import project_working_version_set

REPORT_N_BOOT = 1000
REPORT_SEED = 20250
NEXT_STATE = {
    Round.State.DRAFT: Round.State.OPEN,
    Round.State.OPEN: Round.State.REVIEW,
    Round.State.REVIEW: Round.State.CLOSED,
}
STATE_ORDER = "draft -> open -> review -> closed"


def _check_transition(rnd: Round, to: str) -> None:
    if rnd.state == to:
        raise ValidationError(f"Round {rnd.name!r} is already {to}.")
    if NEXT_STATE.get(rnd.state) != to:
        raise ValidationError(
            f"Round {rnd.name!r} is {rnd.state} and cannot move to {to}: rounds go {STATE_ORDER}, one step at a time."
        )


# --------------------------------------------------------------------------------------
# Create and open
# --------------------------------------------------------------------------------------


@transaction.atomic
def round_create(
    *,
    project: Project,
    name: str,
    taxonomy_version: TaxonomyVersion,
    annotators: Sequence,
    method: str = "manual",
    trace_ids: Iterable[int] = (),
    n: int = 0,
    seed: int = 0,
    stratify_by: str = "framework",
    reveal_in_review: bool = True,
    make_working_version: bool = False,
    kind: str = Round.Kind.MODES,
    by=None,
) -> Round:
    """A draft round: the traces are fixed now (the same preview the form showed).

    ``kind``: what the round measures (``Round.Kind``); an attribution round's mode labels are
    context and stay out of the failure-mode agreement trend.

    ``make_working_version``: when the round's version is newer than the project's working
    version (``version_is_newer``), move the project to it: at once for a published version, when
    the round opens (and publishes it) for a draft. Ignored for a version that is not newer."""
    round_manager_require(project, by)
    name = (name or "").strip()
    if not name:
        raise ValidationError("A round needs a name.")
    if Round.objects.filter(project=project, name=name).exists():
        raise ValidationError(f"A round named {name!r} already exists in {project.name}.")
    users = list(dict.fromkeys(annotators))
    if len(users) < 2:
        raise ValidationError("A round needs at least two annotators (agreement needs a pair).")
    not_allowed = [u.username for u in users if not user_can(user=u, project=project, capability="annotate")]
    if not_allowed:
        raise ValidationError(f"Not annotators of {project.name}: {', '.join(not_allowed)}.")
    preview = round_sample_preview(
        project=project, method=method, n=n, seed=seed, stratify_by=stratify_by, trace_ids=trace_ids
    )
    rnd = Round(
        project=project,
        name=name,
        taxonomy_version=taxonomy_version,
        sampling=preview.sampling,
        reveal_in_review=reveal_in_review,
        kind=kind,
        created_by=by,
    )
    moves = make_working_version and version_is_newer(version=taxonomy_version, than=project.taxonomy_version)
    rnd.makes_working_version = bool(moves and not taxonomy_version.is_published)
    rnd.full_clean()
    rnd.save()
    if moves and taxonomy_version.is_published:
        project_working_version_set(project=project, version=taxonomy_version, by=by)
    RoundAnnotator.objects.bulk_create(RoundAnnotator(round=rnd, user=u) for u in users)
    RoundTrace.objects.bulk_create(RoundTrace(round=rnd, trace=t, order=i) for i, t in enumerate(preview.traces))
    for u in users:
        rater_for_user(user=u)
    return rnd


@transaction.atomic
def round_open(*, round: Round, by=None) -> Round:
    """Start blind labelling; the taxonomy version is frozen (published if it was a draft)."""
    rnd = round_lock(round)
    round_manager_require(rnd.project, by)
    _check_transition(rnd, Round.State.OPEN)
    if RoundAnnotator.objects.filter(round=rnd).count() < 2:
        raise ValidationError("A round needs at least two annotators before it opens.")
    if not RoundTrace.objects.filter(round=rnd).exists():
        raise ValidationError("A round needs at least one trace before it opens.")
    if not rnd.taxonomy_version.is_published:
        version_publish(version=rnd.taxonomy_version, by=by)
    if rnd.makes_working_version and version_is_newer(
        version=rnd.taxonomy_version, than=Project.objects.get(pk=rnd.project_id).taxonomy_version
    ):
        project_working_version_set(project=rnd.project, version=rnd.taxonomy_version, by=by)
    rnd.state = Round.State.OPEN
    rnd.opened_at = timezone.now()
    rnd.save(update_fields=["state", "opened_at"])
    round.__dict__.update(rnd.__dict__)
    return rnd


# --------------------------------------------------------------------------------------
# Review and adjudication
# --------------------------------------------------------------------------------------


def _consensus_unanimous(rnd: Round, by=None) -> int:
    """Bring the unanimous consensus rows in line with the labels; idempotent.

    Units every annotator answered the same get a ``unanimous`` row. Annotators may still correct
    labels during review (the workspace allows it), so a ``unanimous`` row whose unit is no longer
    unanimous (or now unanimous the other way) is removed or updated; adjudicated and majority
    rows are never touched.
    """
    rows = {(a.trace_id, a.mode_id): a for a in Adjudication.objects.filter(round=rnd)}
    new, stale, flipped = [], [], []
    for u in round_units(round=rnd):
        row = rows.get((u.trace_id, u.mode_id))
        if row is None:
            if u.unanimous is not None:
                new.append(
                    Adjudication(
                        round=rnd,
                        trace_id=u.trace_id,
                        mode_id=u.mode_id,
                        decision=u.unanimous,
                        basis=Adjudication.Basis.UNANIMOUS,
                    )
                )
        elif row.basis == Adjudication.Basis.UNANIMOUS:
            if u.unanimous is None:
                stale.append(row.pk)
            elif u.unanimous != row.decision:
                row.decision = u.unanimous
                flipped.append(row)
    Adjudication.objects.bulk_create(new, batch_size=5000)
    if stale:
        Adjudication.objects.filter(pk__in=stale).delete()
    if flipped:
        Adjudication.objects.bulk_update(flipped, ["decision"], batch_size=5000)
    return len(new)


@transaction.atomic
def round_start_review(*, round: Round, by=None, force: bool = False) -> Round:
    """Close blind labelling; unanimous units become consensus; the report is computed."""
    rnd = round_lock(round)
    round_manager_require(rnd.project, by)
    _check_transition(rnd, Round.State.REVIEW)
    progress = round_progress(round=rnd)
    if not progress.complete and not force:
        missing = ", ".join(
            f"{a.username} {a.total - a.submitted}" for a in progress.annotators if a.submitted < a.total
        )
        raise ValidationError(
            f"Not every annotator has submitted every trace (still to submit: {missing}). "
            "Wait, or start the review anyway."
        )
    rnd.state = Round.State.REVIEW
    rnd.review_at = timezone.now()
    rnd.save(update_fields=["state", "review_at"])
    _consensus_unanimous(rnd, by)
    attribution_consensus_sync(round=rnd)
    agreement_report_get(round=rnd)
    round.__dict__.update(rnd.__dict__)
    return rnd


def _unit_in_round(rnd: Round, trace: Trace | int, mode: FailureMode | str) -> tuple[int, FailureMode]:
    trace_id = trace if isinstance(trace, int) else trace.pk
    if not RoundTrace.objects.filter(round=rnd, trace_id=trace_id).exists():
        raise ValidationError(f"Trace {trace_id} is not in round {rnd.name!r}.")
    if isinstance(mode, str):
        found = FailureMode.objects.filter(version_id=rnd.taxonomy_version_id, code=mode).first()
        if found is None:
            raise ValidationError(f"Mode {mode!r} is not in {rnd.taxonomy_version.label}.")
        return trace_id, found
    if mode.version_id != rnd.taxonomy_version_id:
        raise ValidationError(f"Mode {mode.code} is not from the round's taxonomy version.")
    return trace_id, mode


@transaction.atomic
def adjudication_record(
    *, round: Round, trace: Trace | int, mode: FailureMode | str, decision: str, note: str = "", by=None
) -> Adjudication:
    """The adjudicator's consensus for one unit (an upsert: repeating it changes nothing)."""
    rnd = round_lock(round)
    round_manager_require(rnd.project, by)
    if rnd.state != Round.State.REVIEW:
        raise ValidationError(f"Adjudication happens in review; round {rnd.name!r} is {rnd.state}.")
    if decision not in Adjudication.Decision.values:
        raise ValidationError(f"Decision must be present or absent, got {decision!r}.")
    trace_id, mode_obj = _unit_in_round(rnd, trace, mode)
    adj, _ = Adjudication.objects.update_or_create(
        round=rnd,
        trace_id=trace_id,
        mode=mode_obj,
        defaults={"decision": decision, "basis": Adjudication.Basis.ADJUDICATED, "note": note.strip(), "by": by},
    )
    return adj


@transaction.atomic
def disagreement_comment_add(
    *, round: Round, trace: Trace | int, mode: FailureMode | str, body: str, by
) -> DisagreementComment:
    """A message in the thread of one disagreement (managers and the round's annotators, in review)."""
    rnd = Round.objects.select_related("project", "taxonomy_version").get(pk=round.pk)
    if rnd.state not in (Round.State.REVIEW, Round.State.CLOSED):
        raise ValidationError("Disagreements are discussed once the round is in review.")
    is_manager = user_can(user=by, project=rnd.project, capability="manage")
    is_annotator = RoundAnnotator.objects.filter(round=rnd, user=by).exists()
    if not (is_manager or (is_annotator and rnd.reveal_in_review)):
        raise ValidationError("Only managers and the round's annotators discuss its disagreements.")
    body = (body or "").strip()
    if not body:
        raise ValidationError("The comment is empty.")
    trace_id, mode_obj = _unit_in_round(rnd, trace, mode)
    return DisagreementComment.objects.create(round=rnd, trace_id=trace_id, mode=mode_obj, author=by, body=body)


@transaction.atomic
def round_close(*, round: Round, by=None, with_majority: bool = False) -> Round:
    """Close the round: its consensus becomes the project's agreed labels."""
    rnd = round_lock(round)
    round_manager_require(rnd.project, by)
    _check_transition(rnd, Round.State.CLOSED)
    _consensus_unanimous(rnd, by)
    decided = set(Adjudication.objects.filter(round=rnd).values_list("trace_id", "mode_id"))
    pending = [u for u in round_units(round=rnd) if (u.trace_id, u.mode_id) not in decided]
    attribution_consensus_sync(round=rnd)
    n_attribution = len(attribution_pending(round=rnd))
    if (pending or n_attribution) and not with_majority:
        what = f"{len(pending)} disagreement(s)" + (
            f" and {n_attribution} attribution disagreement(s)" if n_attribution else ""
        )
        raise ValidationError(f"{what} are not adjudicated yet. Adjudicate them, or close with majority vote.")
    if n_attribution:
        attribution_close_with_majority(round=rnd, by=by)
    if pending:
        ties = [u for u in pending if u.majority() is None]
        if ties:
            codes = {m.pk: m.code for m in version_modes(version=rnd.taxonomy_version)}
            shown = ", ".join(f"trace {u.trace_id} / {codes[u.mode_id]}" for u in ties[:10])
            more = f" and {len(ties) - 10} more" if len(ties) > 10 else ""
            raise ValidationError(
                f"{len(ties)} unit(s) are tied (no strict majority): {shown}{more}. "
                "A vote cannot decide a tie: adjudicate these, then close with majority vote."
            )
        Adjudication.objects.bulk_create(
            [
                Adjudication(
                    round=rnd,
                    trace_id=u.trace_id,
                    mode_id=u.mode_id,
                    decision=u.majority(),
                    basis=Adjudication.Basis.MAJORITY,
                    note="Closed with majority vote.",
                    by=by,
                )
                for u in pending
            ],
            batch_size=5000,
        )
        rnd.closed_with_majority = True
    rnd.state = Round.State.CLOSED
    rnd.closed_at = timezone.now()
    rnd.save(update_fields=["state", "closed_at", "closed_with_majority"])
    round.__dict__.update(rnd.__dict__)
    return rnd


@transaction.atomic
def round_transition(*, round: Round, to: str, by=None, with_majority: bool = False, force: bool = False) -> Round:
    """One entry point for the API and pages: move a round to ``to`` (its next state)."""
    if to == Round.State.OPEN:
        return round_open(round=round, by=by)
    if to == Round.State.REVIEW:
        return round_start_review(round=round, by=by, force=force)
    if to == Round.State.CLOSED:
        return round_close(round=round, by=by, with_majority=with_majority)
    raise ValidationError(f"Cannot move a round to {to!r}: rounds go {STATE_ORDER}.")


@transaction.atomic
def round_settings_update(*, round: Round, reveal_in_review: bool, by=None) -> Round:
    rnd = round_lock(round)
    round_manager_require(rnd.project, by)
    rnd.reveal_in_review = reveal_in_review
    rnd.save(update_fields=["reveal_in_review"])
    round.__dict__.update(rnd.__dict__)
    return rnd


# --------------------------------------------------------------------------------------
# The stored agreement report
# --------------------------------------------------------------------------------------


def _fingerprint(parts: list[Any]) -> str:
    raw = json.dumps([*parts, REPORT_N_BOOT, REPORT_SEED], default=str, sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()


def _rater_prevalence(matrix) -> dict[str, dict[str, float]]:
    """Each rater's share of the round's traces marked present, per mode (the mode x rater view),
    from the matrix in hand: not a COUNT(DISTINCT) over every mode label on each page view."""
    present = (np.asarray(matrix.labels) == 1).sum(axis=1) / max(1, len(matrix.trace_ids))
    return {
        rater: {code: float(present[i, j]) for j, code in enumerate(matrix.modes)}
        for i, rater in enumerate(matrix.raters)
    }


def agreement_report_compute(
    *, round: Round, extra_rater_ids: Sequence[int] = (), n_boot: int = REPORT_N_BOOT, seed: int = REPORT_SEED
) -> dict[str, Any]:
    """The report JSON (not stored): ``agreement_report.round_report`` over the round's label matrix."""
    matrix = round_label_matrix(round=round, extra_rater_ids=extra_rater_ids)
    data = agreement_report.round_report(
        matrix.labels,
        raters=matrix.raters,
        modes=matrix.modes,
        categories=matrix.categories,
        n_boot=n_boot,
        seed=seed,
    )
    data["attribution"] = round_attribution_report(round=round, n_boot=n_boot, seed=seed)
    data["rater_prevalence"] = _rater_prevalence(matrix)
    data["rater_ids"] = matrix.rater_ids
    data["human_raters"] = len(matrix.raters) - len(extra_rater_ids)
    return data


def agreement_report_get(*, round: Round, extra_rater_ids: Sequence[int] = (), force: bool = False) -> AgreementReport:
    """The stored report for this rater set, recomputed only when the labels changed.

    The default rater set is the round's human annotators ("humans"); non-human raters with
    labels on the round's traces can be added (rater set "humans+<ids>").
    """
    key = rater_set_key(extra_rater_ids)
    extra = sorted(set(extra_rater_ids))
    fingerprint = _fingerprint(round_labels_fingerprint_parts(round=round, extra_rater_ids=extra))
    stored = AgreementReport.objects.filter(round=round, rater_set=key).first()
    if stored is not None and stored.fingerprint == fingerprint and not force and "attribution" in stored.data:
        if "rater_prevalence" not in stored.data:
            # stored before the prevalences were part of a report: add them, without the bootstrap
            # (minutes at 100,000 traces) that recomputing the whole report would cost
            stored.data["rater_prevalence"] = _rater_prevalence(round_label_matrix(round=round, extra_rater_ids=extra))
            stored.save(update_fields=["data"])
        return stored
    data = agreement_report_compute(round=round, extra_rater_ids=extra)
    report, _ = AgreementReport.objects.update_or_create(
        round=round, rater_set=key, defaults={"fingerprint": fingerprint, "data": data}
    )
    return report


def agreement_report_json(*, report: AgreementReport) -> dict[str, Any]:
    """The JSON the API and ``manage.py round_report`` give: the round, then the report."""
    rnd = report.round
    return {
        "round": {
            "id": rnd.pk,
            "name": rnd.name,
            "state": rnd.state,
            "taxonomy_version": rnd.taxonomy_version.label,
        },
        "rater_set": report.rater_set,
        "computed_at": report.computed_at.isoformat(),
        **report.data,
    }


# --------------------------------------------------------------------------------------
# Labels written in bulk (imports, demo, benchmarks)
# --------------------------------------------------------------------------------------


@transaction.atomic
def round_labels_import(
    *,
    round: Round,
    rater: Rater,
    labels: Mapping[int, Mapping[str, str]],
    source: dict | None = None,
    submitted: bool = True,
) -> int:
    """Write one rater's labels for traces of a round in bulk: {trace_id: {mode code: decision}}.

    For imported data (MAST-Data human labels), scripted demo labels and benchmarks; people label
    through the workspace. Existing annotations of this rater in the round are replaced.
    Returns the number of mode labels written.
    """
    codes = dict(FailureMode.objects.filter(version_id=round.taxonomy_version_id).values_list("code", "id"))
    in_round = set(RoundTrace.objects.filter(round=round).values_list("trace_id", flat=True))
    bad_traces = [t for t in labels if t not in in_round]
    if bad_traces:
        raise ValidationError(f"Traces not in round {round.name!r}: {', '.join(map(str, bad_traces[:10]))}.")
    for trace_id, per_mode in labels.items():
        for code, decision in per_mode.items():
            if code not in codes:
                raise ValidationError(f"Trace {trace_id}: mode {code!r} is not in {round.taxonomy_version.label}.")
            if decision not in ModeLabel.Decision.values:
                raise ValidationError(f"Trace {trace_id}, mode {code}: unknown decision {decision!r}.")
    Annotation.objects.filter(round=round, rater=rater, trace_id__in=list(labels)).delete()
    entries = [LabelSet(trace_id=t, rater=rater, labels=m, source=source or {}) for t, m in labels.items()]
    _, written = labels_bulk_write(
        entries=entries, version=round.taxonomy_version, mode_ids=codes, round=round, submitted=submitted
    )
    return written


# --------------------------------------------------------------------------------------
# Refinement: revise a definition into the next taxonomy version
# --------------------------------------------------------------------------------------


@transaction.atomic
def round_revise_definition(
    *,
    round: Round,
    mode_code: str,
    definition: str,
    name: str | None = None,
    note: str = "",
    by=None,
) -> FailureMode:
    """Draft the next taxonomy version (or reuse the draft already started from this round's
    version) with a revised definition of ``mode_code``; the mapping records the edit and its
    reason. The next round can pick that draft; opening the round publishes it."""
    rnd = Round.objects.select_related("project", "taxonomy_version__taxonomy").get(pk=round.pk)
    round_manager_require(rnd.project, by)
    source = rnd.taxonomy_version
    if not FailureMode.objects.filter(version=source, code=mode_code).exists():
        raise ValidationError(f"Mode {mode_code!r} is not in {source.label}.")
    draft = version_draft_next(source=source, by=by, notes=f"Refined after round {rnd.name!r} of {rnd.project.name}.")
    mode = FailureMode.objects.filter(version=draft, code=mode_code).first()
    if mode is None:
        raise ValidationError(f"The draft {draft.label} no longer has mode {mode_code!r} (renamed or removed).")
    why = note.strip() or f"Revised after disagreements in round {rnd.name!r}."
    return mode_edit(mode=mode, name=name, definition=definition, note=why)


def round_create_next(*, round: Round) -> dict[str, Any]:
    """Form defaults for a follow-up round: same annotators and traces, the refined version if any."""
    draft = TaxonomyVersion.objects.filter(parent=round.taxonomy_version).order_by("-number").first()
    return {
        "taxonomy_version": (draft or round.taxonomy_version).pk,
        "kind": round.kind,
        "annotators": list(RoundAnnotator.objects.filter(round=round).values_list("user_id", flat=True)),
        "trace_ids": list(RoundTrace.objects.filter(round=round).order_by("order").values_list("trace_id", flat=True)),
    }


def annotator_users(*, project: Project, usernames: Iterable[str]) -> list:
    """Users by username who may annotate in the project; a clear error naming the others."""
    names = list(dict.fromkeys(u.strip() for u in usernames if u.strip()))
    users = {u.username: u for u in get_user_model().objects.filter(username__in=names)}
    unknown = [n for n in names if n not in users]
    if unknown:
        raise ValidationError(f"Unknown users: {', '.join(unknown)}.")
    out = [users[n] for n in names]
    roles = dict(Membership.objects.filter(project=project, user__in=out).values_list("user__username", "role"))
    bad = [n for n in names if roles.get(n) not in (Membership.Role.ANNOTATOR, Membership.Role.MANAGER)]
    if bad:
        raise ValidationError(f"Not annotators of {project.name}: {', '.join(bad)}.")
    return out


__all__ = [
    "HUMANS",
    "REPORT_N_BOOT",
    "adjudication_record",
    "agreement_report_compute",
    "agreement_report_get",
    "disagreement_comment_add",
    "round_close",
    "round_create",
    "round_labels_import",
    "round_open",
    "round_revise_definition",
    "round_settings_update",
    "round_start_review",
    "round_transition",
]
