"""Writes on annotations: get-or-create my annotation, save it (optimistic concurrency), submit it.

Rules (the API and the screen only call these):

* A save sends the WHOLE state (every label I gave, task success, notes, open codes) with the
  revision it was based on. Modes not listed are undecided.
* Same content as stored -> nothing changes (no revision bump, no history row), even when the
  base revision is stale: a retried request whose first attempt got through is harmless.
* Different content on a stale base revision -> ``AnnotationConflict`` carrying the stored state
  (HTTP 409). The row is locked (``SELECT ... FOR UPDATE``) for the compare-and-write, so two
  concurrent saves on the same base cannot both win.
* Decisions: present / absent / unsure. "Unsure" is a draft-only state: submitting needs a
  present or absent decision for EVERY mode of the version (agreement statistics need a full
  matrix).
* A submitted annotation is read-only: a save that would change it is refused
  (``AnnotationSubmittedReadOnly``, HTTP 409) on every path, until its author reopens it
  (``annotation_reopen``: back to draft, history action "reopen", counted as not submitted until she
  submits again). Reopening is refused once the round is in review or closed.
* Evidence: ``{"step": <step index>}`` of an existing step of the trace, or
  ``{"lines": [first, last]}`` inside the trace (1-based, inclusive).
* Limits: rationale 2,000 characters, notes 10,000, open code 80, at most 50 open codes and 50
  evidence items per mode.
* Only the author edits an annotation, while they may still annotate in the project, and only
  while its round (if any) is open or in review.
* Attribution (``attribution``: decisive step or "no single decisive step", responsible agent,
  modes, reason, located errors) is part of the state; ``annotations.labels.attribution`` checks it.
  Submitting does not require it (a succeeded trace has none).
* Every accepted change writes an ``AnnotationEvent`` with the state before and after. A refused
  request changes nothing (everything happens in one transaction, validation first).
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotations.labels import sql
from annotations.labels.attribution import attribution_write
from annotations.labels.content import content_clean, missing_decisions, version_mode_order
from annotations.labels.selectors import annotation_snapshot, annotation_snapshot_of_rows
from annotations.labels.visibility import BLIND_ROUND_STATES
from annotations.models import (
    Annotation,
    AnnotationEvent,
    Rater,
    Round,
    RoundAnnotator,
    RoundTrace,
)
from taxonomy.models import TaxonomyVersion
from traces.api_errors import ProductError
from traces.models import Trace
from traces.projects.selectors import user_can

EDITABLE_ROUND_STATES = (Round.State.OPEN, Round.State.REVIEW)


class AnnotationError(ProductError):
    """A refused annotation request; the API's exception handler answers with ``status``."""

    status = 400

    def __init__(self, message: str, *, errors: list[dict[str, str]] | None = None):
        super().__init__(message, errors=errors or [])


class AnnotationInvalid(AnnotationError):
    status = 400


class AnnotationForbidden(AnnotationError):
    status = 403


class AnnotationLocked(AnnotationError):
    """The annotation's round is closed (or not open yet): no more edits."""

    status = 403


class AnnotationSubmittedReadOnly(AnnotationError):
    """A save that would change a submitted annotation: it must be reopened first."""

    status = 409


class AnnotationConflict(AnnotationError):
    """The save was based on an old revision; ``current`` is the stored state."""

    status = 409

    def __init__(self, message: str, *, current: dict[str, Any]):
        super().__init__(message)
        self.current = current


# ------------------------------------------------------------------ raters and annotations


def rater_for_user(*, user) -> Rater:
    """The human rater of a user, created on first use (name = username)."""
    rater = Rater.objects.filter(user=user).first()
    if rater is not None:
        return rater
    name = user.get_username()
    if Rater.objects.filter(name=name).exclude(user=user).exists():
        name = f"{name} (user {user.pk})"  # a non-human rater already has this name
    try:
        with transaction.atomic():
            return Rater.objects.create(kind=Rater.Kind.HUMAN, name=name, user=user)
    except IntegrityError:  # created concurrently by another request of the same user
        return Rater.objects.get(user=user)


def _round_refusal(round: Round) -> str | None:
    if round.state == Round.State.CLOSED:
        return f"Round {round.name!r} is closed: its annotations can no longer be changed."
    if round.state == Round.State.DRAFT:
        return f"Round {round.name!r} is not open yet."
    return None


def annotation_get_or_create(
    *, trace: Trace, user, taxonomy_version: TaxonomyVersion, round: Round | None = None
) -> Annotation:
    """My annotation of the trace (for this version and round), created empty if missing."""
    return _get_or_create(trace=trace, user=user, taxonomy_version=taxonomy_version, round=round, lock=False)


def _get_or_create(*, trace: Trace, user, taxonomy_version: TaxonomyVersion, round: Round | None, lock: bool):
    if not user_can(user=user, project=trace.project, capability="annotate"):
        raise AnnotationForbidden("Your role in this project does not allow labelling.")
    if round is not None:
        _check_round(round=round, trace=trace, user=user, taxonomy_version=taxonomy_version)
    qs = Annotation.objects.select_for_update(of=("self",)) if lock else Annotation.objects.all()
    # One query on the hot path (an autosave): the rater comes with the annotation.
    annotation = (
        qs.select_related("rater", "attribution")
        .filter(trace=trace, rater__user=user, taxonomy_version=taxonomy_version, round=round)
        .first()
    )
    rater = annotation.rater if annotation is not None else rater_for_user(user=user)
    keys = {"trace": trace, "rater": rater, "taxonomy_version": taxonomy_version, "round": round}
    if annotation is None and round is None:
        # A trace in a draft or open round is labelled inside that round (blind), not beside it.
        blind = Round.objects.filter(round_traces__trace=trace, state__in=BLIND_ROUND_STATES).first()
        if blind is not None:
            raise AnnotationLocked(
                f"Trace {trace.pk} is in round {blind.name!r} ({blind.state}): it is labelled inside that round "
                "while the round is blind."
            )
    if annotation is None:
        try:
            with transaction.atomic():
                annotation = Annotation.objects.create(**keys)
        except IntegrityError:  # the same user opened the trace twice at once
            annotation = qs.get(**keys)
    # The caller's objects, so that later checks need no query.
    annotation.trace, annotation.rater, annotation.taxonomy_version = trace, rater, taxonomy_version
    if round is not None:
        annotation.round = round
    return annotation


def _check_round(
    *,
    round: Round,
    trace: Trace,
    user,
    taxonomy_version: TaxonomyVersion,
    in_round: bool | None = None,
    is_annotator: bool | None = None,
) -> None:
    """May ``user`` label ``trace`` in ``round`` now? ``in_round``/``is_annotator``: already read (None: ask)."""
    if in_round is None:
        in_round = RoundTrace.objects.filter(round=round, trace=trace).exists()
    if round.project_id != trace.project_id or not in_round:
        raise AnnotationInvalid(f"Trace {trace.pk} is not part of round {round.name!r}.")
    if is_annotator is None:
        is_annotator = RoundAnnotator.objects.filter(round=round, user=user).exists()
    if not is_annotator:
        raise AnnotationForbidden(f"You are not an annotator of round {round.name!r}.")
    if round.taxonomy_version_id != taxonomy_version.pk:
        raise AnnotationInvalid(f"Round {round.name!r} uses {round.taxonomy_version}, not {taxonomy_version}.")
    refusal = _round_refusal(round)
    if refusal:
        raise AnnotationLocked(refusal)


# ------------------------------------------------------------------ validation


# Published taxonomy versions are frozen (database triggers), so their modes can be cached.
def _clean_content(**state: Any) -> dict[str, Any]:
    """``content_clean``, refusing the save (``AnnotationInvalid``) on any problem."""
    content, errors = content_clean(**state)
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise AnnotationInvalid(f"{first['field']}: {first['message']}{more}", errors=errors)
    return content


def _content(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {key: snapshot.get(key) for key in ("task_success", "notes", "open_codes", "labels", "attribution")}


def _ensure_author(*, annotation: Annotation, by) -> None:
    if annotation.rater.user_id != by.pk:
        raise AnnotationForbidden("This annotation belongs to another rater; you can only edit your own.")
    if not user_can(user=by, project=annotation.trace.project, capability="annotate"):
        raise AnnotationForbidden("Your role in this project does not allow labelling.")


def _ensure_round_editable(*, annotation: Annotation, fresh_round: Round | None = None) -> None:
    """Refuse edits once the round is closed; ``fresh_round``: its name and state read in this transaction."""
    if annotation.round_id is None:
        return
    round = fresh_round or Round.objects.only("id", "name", "state").get(pk=annotation.round_id)
    refusal = _round_refusal(round)
    if refusal:
        raise AnnotationLocked(refusal)


def _lock(annotation: Annotation) -> Annotation:
    current = Annotation.objects.select_for_update(of=("self",)).get(pk=annotation.pk)
    # Keep the related rows already loaded on the caller's instance (trace, version, rater).
    for name in ("trace", "taxonomy_version", "rater"):
        if name in annotation._state.fields_cache:
            setattr(current, name, getattr(annotation, name))
    return current


# ------------------------------------------------------------------ save and submit


def annotation_save(
    *,
    annotation: Annotation,
    by,
    base_revision: int,
    labels: list[dict[str, Any]],
    task_success: str = Annotation.TaskSuccess.UNKNOWN,
    notes: str = "",
    open_codes: list[str] | None = None,
    attribution: dict[str, Any] | None = None,
) -> Annotation:
    """Replace the annotation's state with the given one (see the module docstring for the rules)."""
    _ensure_author(annotation=annotation, by=by)
    content = _clean_content(
        annotation=annotation,
        labels=labels,
        task_success=task_success,
        notes=notes,
        open_codes=open_codes,
        attribution=attribution,
    )
    with transaction.atomic():
        return _apply(current=_lock(annotation), by=by, base_revision=base_revision, content=content)


def _apply(
    *,
    current: Annotation,
    by,
    base_revision: int,
    content: dict[str, Any],
    before: dict | None = None,
    fresh_round: Round | None = None,
) -> Annotation:
    """Compare-and-write on a row locked by the caller's transaction (``before``: its state, if read;
    ``fresh_round``: its round as read with the lock). Writes only what changed, in plain SQL."""
    _ensure_round_editable(annotation=current, fresh_round=fresh_round)
    if before is None:
        before = annotation_snapshot(annotation=current)
    if _content(before) == content:
        current.snapshot = before
        return current
    if current.state == Annotation.State.SUBMITTED:
        raise AnnotationSubmittedReadOnly(
            "This annotation is submitted, so it is read-only: nothing was changed. "
            + _reopen_hint(current=current, fresh_round=fresh_round)
        )
    if current.revision != base_revision:
        raise AnnotationConflict(
            f"This annotation changed since revision {base_revision} (now at revision {current.revision}); "
            "reload it before saving.",
            current=before,
        )
    if before.get("attribution") != content["attribution"]:
        attribution_write(annotation=current, value=content["attribution"])
    action = AnnotationEvent.Action.SAVE
    update = ["task_success", "notes", "revision", "updated_at"]
    current.task_success = content["task_success"]
    current.notes = content["notes"]
    current.revision += 1
    current.updated_at = now = timezone.now()
    after = {"revision": current.revision, "state": current.state, **content}
    gone, put = _label_changes(annotation=current, old=before["labels"], new=content["labels"])
    sql.annotation_change_write(  # one round trip: labels, open codes, the row, the history event
        annotation_id=current.pk,
        gone=gone,
        put=put,
        values={name: getattr(current, name) for name in update},
        by_id=by.pk,
        at=now,
        action=action,
        revision=current.revision,
        before=before,
        after=after,
        open_codes=(current.trace.project_id, content["open_codes"])
        if before["open_codes"] != content["open_codes"]
        else None,
    )
    current.snapshot = after
    return current


def _label_changes(*, annotation: Annotation, old: list[dict], new: list[dict]) -> tuple[list[int], list[tuple]]:
    """(mode ids of the labels no longer listed, (mode id, decision, evidence, rationale) of the new and
    changed ones): only these are written."""
    modes = version_mode_order(annotation.taxonomy_version)
    old_by_code = {lab["code"]: lab for lab in old}
    new_codes = {lab["code"] for lab in new}
    gone = [modes[code][0] for code in old_by_code if code not in new_codes]
    put = [
        (modes[lab["code"]][0], lab["decision"], lab["evidence"], lab["rationale"])
        for lab in new
        if old_by_code.get(lab["code"]) != lab
    ]
    return gone, put


def annotation_submit(*, annotation: Annotation, by, base_revision: int) -> Annotation:
    """Mark the annotation submitted. Submitting a submitted annotation changes nothing."""
    _ensure_author(annotation=annotation, by=by)
    with transaction.atomic():
        current = _lock(annotation)
        _ensure_round_editable(annotation=current)
        if current.state == Annotation.State.SUBMITTED:
            return current
        before = annotation_snapshot(annotation=current)
        if current.revision != base_revision:
            raise AnnotationConflict(
                f"This annotation changed since revision {base_revision} (now at revision {current.revision}); "
                "reload it before submitting.",
                current=before,
            )
        missing = missing_decisions(annotation=current, labels=before["labels"])
        if missing:
            raise AnnotationInvalid(
                f"Submitting needs a present/absent decision for every mode; still undecided or unsure: "
                f"{', '.join(missing)}.",
                errors=[
                    {"field": "labels", "message": f"mode {code} has no present/absent decision."} for code in missing
                ],
            )
        current.state = Annotation.State.SUBMITTED
        current.submitted_at = timezone.now()
        current.revision += 1
        current.save(update_fields=["state", "submitted_at", "revision", "updated_at"])
        after = {**before, "revision": current.revision, "state": current.state}
        AnnotationEvent.objects.create(
            annotation=current,
            by=by,
            action=AnnotationEvent.Action.SUBMIT,
            revision=current.revision,
            before=before,
            after=after,
        )
    current.snapshot = after
    return current


def _reopen_refusal(round: Round | None) -> str | None:
    """Why a submitted annotation of this round can no longer be reopened (None: it can)."""
    if round is None or round.state == Round.State.OPEN:
        return None
    where = "in review" if round.state == Round.State.REVIEW else str(round.state)
    return f"Round {round.name!r} is {where}: submitted labels can no longer be reopened or changed."


def _reopen_hint(*, current: Annotation, fresh_round: Round | None) -> str:
    if current.round_id is None:
        return "Reopen it to change it."
    round = fresh_round or Round.objects.only("id", "name", "state").get(pk=current.round_id)
    return _reopen_refusal(round) or "Reopen it to change it (it then counts as not submitted until you submit again)."


def annotation_reopen(*, annotation: Annotation, by, base_revision: int) -> Annotation:
    """Make my submitted annotation a draft again, so that it can be changed: recorded in its history
    (action "reopen") and counted as not submitted until it is submitted again. Reopening a draft
    changes nothing. Refused once the annotation's round is in review or closed."""
    _ensure_author(annotation=annotation, by=by)
    with transaction.atomic():
        current = _lock(annotation)
        if current.state != Annotation.State.SUBMITTED:
            _ensure_round_editable(annotation=current)
            return current
        if current.round_id is not None:
            refusal = _reopen_refusal(Round.objects.only("id", "name", "state").get(pk=current.round_id))
            if refusal:
                raise AnnotationLocked(refusal)
        before = annotation_snapshot(annotation=current)
        if current.revision != base_revision:
            raise AnnotationConflict(
                f"This annotation changed since revision {base_revision} (now at revision {current.revision}); "
                "reload it before reopening.",
                current=before,
            )
        current.state = Annotation.State.DRAFT
        current.submitted_at = None
        current.revision += 1
        current.save(update_fields=["state", "submitted_at", "revision", "updated_at"])
        after = {**before, "revision": current.revision, "state": current.state}
        AnnotationEvent.objects.create(
            annotation=current,
            by=by,
            action=AnnotationEvent.Action.REOPEN,
            revision=current.revision,
            before=before,
            after=after,
        )
    current.snapshot = after
    return current


def annotation_upsert(
    *,
    trace: Trace,
    user,
    taxonomy_version: TaxonomyVersion,
    round: Round | None = None,
    base_revision: int,
    labels: list[dict[str, Any]],
    task_success: str = Annotation.TaskSuccess.UNKNOWN,
    notes: str = "",
    open_codes: list[str] | None = None,
    attribution: dict[str, Any] | None = None,
) -> Annotation:
    """Save MY annotation of the trace, creating it on the first save; a refusal stores nothing at all.

    The annotation's row, rater, round state, round membership and attribution come in one locking
    statement and its labels and open codes in one more, sent with it (``annotations.labels.sql``); the
    writes of an accepted change go in one more round trip; the first save, which creates the row, goes
    through ``_get_or_create``."""
    with transaction.atomic():
        locked = sql.annotation_lock(
            trace_id=trace.pk,
            user_id=user.pk,
            version_id=taxonomy_version.pk,
            round_id=round.pk if round else None,
            with_rows=True,
        )
        fresh_round = None
        if locked is None:
            current = _get_or_create(trace=trace, user=user, taxonomy_version=taxonomy_version, round=round, lock=True)
            _ensure_author(annotation=current, by=user)
            before = annotation_snapshot(annotation=current)
        else:
            current = locked.annotation
            current.trace, current.taxonomy_version = trace, taxonomy_version
            if not user_can(user=user, project=trace.project, capability="annotate"):
                raise AnnotationForbidden("Your role in this project does not allow labelling.")
            if round is not None:
                current.round = round
                _check_round(
                    round=round,
                    trace=trace,
                    user=user,
                    taxonomy_version=taxonomy_version,
                    in_round=locked.in_round,
                    is_annotator=locked.round_annotator,
                )
                fresh_round = Round(id=round.pk, name=locked.round_name, state=locked.round_state)
            _ensure_author(annotation=current, by=user)
            before = _locked_snapshot(locked)
        known = frozenset(ev["step"] for lab in before["labels"] for ev in lab["evidence"] if "step" in ev)
        content = _clean_content(
            annotation=current,
            labels=labels,
            task_success=task_success,
            notes=notes,
            open_codes=open_codes,
            known_steps=known,
            attribution=attribution,
        )
        return _apply(
            current=current,
            by=user,
            base_revision=base_revision,
            content=content,
            before=before,
            fresh_round=fresh_round,
        )


def _locked_snapshot(locked: sql.LockedAnnotation) -> dict[str, Any]:
    """``annotation_snapshot`` of a locked annotation from its label and open code rows (one query)."""
    return annotation_snapshot_of_rows(annotation=locked.annotation, attribution=locked.attribution, rows=locked.rows)
