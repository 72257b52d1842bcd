"""MAST's own calibration rounds, rebuilt from a MAST-Data human-labelled file.

Records of that file carry ``round`` ("Round 1", "Round 2", "Round 3", "Generlazability" [sic])
and ``annotations``: one entry per failure mode of that round's taxonomy,
``{"failure mode": "<code> <name>\\n\\n<definition>", "annotator_1": bool, "annotator_2": ...}``
(a missing judgement is NaN/null). ``MastHumanRoundsHook`` (registered in
``AnnotationsConfig.ready()``) turns them, inside the trace import's transaction, into:

* one CLOSED round per ``round`` value, named after it (``imported_from`` says where from);
  the round is written directly in its final state: an import records rounds that happened,
  it does not replay the draft -> open -> review -> closed workflow;
* the annotators as raters: users ``mast_annotator_<n>`` (inactive, unusable password), added
  to the project as annotators;
* a taxonomy version per distinct mode list, in the taxonomy "MAST-Data rounds", published
  (an identical list reuses the version, so importing twice does not multiply versions);
  a mode string is split into code, name (first line, plus a parenthesised qualifier line
  such as "(between agents)") and definition (the rest);
* one submitted annotation per annotator and trace (NaN -> no label for that mode);
* consensus by strict majority of the annotators' answers (``basis=majority``, noted as
  imported); a tie (possible only when a judgement is missing) gets no consensus row;
* the stored agreement report of each round;
* a mapping of each version onto the project's working version, matched by name and code
  (``taxonomy.cross_mapping``), so the file's labels count under the project's codes (a manager
  edits it on the mapping page; an edited mapping is kept on re-import).

A trace that appears in two rounds (MAST-Data has one: the same ChatDev trace in Rounds 1 and
2) is stored once by the import; the optional ``on_duplicate`` hook call gives us its record
so it joins both rounds. Re-importing the same file changes nothing.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone

from annotations.labels.bulk import LabelSet, labels_bulk_write
from annotations.models import Adjudication, ModeLabel, Rater, Round, RoundAnnotator, RoundTrace
from annotations.rounds.services import agreement_report_get
from taxonomy.cross_mapping import cross_mapping_automap
from taxonomy.models import FailureMode, Taxonomy, TaxonomyVersion
from taxonomy.services import version_import
from traces.importing.results import TraceImportError
from traces.models import Membership, Project, Trace

TAXONOMY_NAME = "MAST-Data rounds"
SOURCE = "MAST-Data human labels"
USER_PREFIX = "mast_annotator_"
_STATE_KEY = "annotations.mast_rounds"
_CODE = re.compile(r"^\s*(\d+(?:\.\d+)*)\s+(.*)$", re.S)
_ANNOTATOR_KEY = re.compile(r"^annotator_(\d+)$")


def split_mode(text: str) -> tuple[str, str, str]:
    """ "2.2 Fail to ask for clarification\\n(between agents)\\nInability ..." ->
    ("2.2", "Fail to ask for clarification (between agents)", "Inability ...")."""
    m = _CODE.match(text or "")
    if not m:
        raise ValidationError(f"failure mode {text[:60]!r} does not start with a code like '1.2'")
    code, rest = m.group(1), m.group(2)
    lines = [ln.rstrip() for ln in rest.strip().split("\n")]
    name = lines[0].strip()
    i = 1
    while i < len(lines) and lines[i].strip().startswith("(") and lines[i].strip().endswith(")"):
        name = f"{name} {lines[i].strip()}"
        i += 1
    definition = "\n".join(lines[i:]).strip() or name
    return code, name[:200], definition


def _judgement(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool | int) and value in (0, 1):
        return ModeLabel.Decision.PRESENT if value else ModeLabel.Decision.ABSENT
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return ModeLabel.Decision.PRESENT if value.strip().lower() in ("true", "1") else ModeLabel.Decision.ABSENT
    raise ValidationError(f"annotator judgement {value!r} is not true/false/null")


@dataclass
class RoundRecord:
    """One human-labelled record: its trace (id, or content hash for a duplicate) and labels."""

    round: str
    modes: list[tuple[str, str, str]]  # (code, name, definition) in file order
    labels: dict[str, dict[str, str | None]]  # annotator key -> code -> decision/None
    trace_id: int | None = None
    content_hash: str = ""
    source_file: str = ""
    record_number: int | None = None
    extra: dict = field(default_factory=dict)


def record_from_extra(*, extra: dict, trace_id: int | None = None, content_hash: str = "") -> RoundRecord | None:
    """The round part of an import record (``extra`` of the import hooks), or None if it has none."""
    rnd, annotations = extra.get("round"), extra.get("annotations")
    if rnd in (None, "") or not annotations:
        return None
    number = extra.get("record_number")
    where = f"{extra.get('source_file', '')} record {'?' if number is None else number + 1}"
    modes, labels = [], defaultdict(dict)
    for i, item in enumerate(annotations):
        if not isinstance(item, dict) or "failure mode" not in item:
            raise ValidationError(f"{where}: annotations[{i}] has no 'failure mode'")
        try:
            code, name, definition = split_mode(str(item["failure mode"]))
            for key, value in item.items():
                if _ANNOTATOR_KEY.match(key):
                    labels[key][code] = _judgement(value)
        except ValidationError as exc:
            raise ValidationError(f"{where}, annotations[{i}]: {' '.join(exc.messages)}") from None
        modes.append((code, name, definition))
    if len({c for c, _, _ in modes}) != len(modes):
        raise ValidationError(f"{where}: a failure-mode code appears twice")
    if len(labels) < 2:
        raise ValidationError(f"{where}: a round needs at least two annotators (annotator_1, annotator_2, ...)")
    return RoundRecord(
        round=str(rnd).strip(),
        modes=modes,
        labels=dict(labels),
        trace_id=trace_id,
        content_hash=content_hash,
        source_file=str(extra.get("source_file") or ""),
        record_number=extra.get("record_number"),
    )


# --------------------------------------------------------------------------------------
# Building the rounds
# --------------------------------------------------------------------------------------


def _annotator_user(key: str, project: Project):
    n = _ANNOTATOR_KEY.match(key).group(1)
    User = get_user_model()
    user = User.objects.filter(username=f"{USER_PREFIX}{n}").first()
    if user is None:
        user = User(username=f"{USER_PREFIX}{n}", first_name="MAST", last_name=f"annotator {n}", is_active=False)
        user.set_unusable_password()
        user.save()
    Membership.objects.get_or_create(project=project, user=user, defaults={"role": Membership.Role.ANNOTATOR})
    rater = Rater.objects.filter(user=user).first() or Rater.objects.create(
        kind=Rater.Kind.HUMAN, name=user.username, user=user, description="A MAST paper annotator (imported)."
    )
    return user, rater


def _version_for(round_name: str, modes: list[tuple[str, str, str]], by=None) -> TaxonomyVersion:
    """The published version of "MAST-Data rounds" with exactly these modes (created if new)."""
    wanted = [(c, n, d) for c, n, d in modes]
    taxonomy = Taxonomy.objects.filter(name=TAXONOMY_NAME).first()
    if taxonomy is not None:
        for version in taxonomy.versions.order_by("number"):
            have = list(version.modes.order_by("order", "id").values_list("code", "name", "definition"))
            if have == wanted:
                return version
    cats = list(dict.fromkeys(c.split(".")[0] for c, _, _ in modes))
    return version_import(
        data={
            "name": TAXONOMY_NAME,
            "description": "The failure-mode lists the MAST authors used in their calibration rounds, "
            "as shipped with MAST-Data's human-labelled file.",
            "notes": f"Modes of {round_name!r} in MAST-Data's human-labelled file ({len(modes)} modes).",
            "categories": [{"code": c, "name": f"Category {c}"} for c in cats],
            "modes": [{"code": c, "name": n, "definition": d} for c, n, d in modes],
        },
        publish=True,
        by=by,
    )


def _imported_round(project: Project, name: str, version: TaxonomyVersion, source: str, by=None) -> Round:
    existing = Round.objects.filter(project=project, name=name).first()
    if existing is not None and existing.imported_from.startswith(SOURCE):
        if existing.taxonomy_version_id != version.pk:
            raise ValidationError(
                f"Round {name!r} was imported before with {existing.taxonomy_version.label}, "
                f"but this file lists other failure modes for it."
            )
        return existing
    if existing is not None:
        name = f"{name} ({SOURCE})"
        again = Round.objects.filter(project=project, name=name).first()
        if again is not None:
            return again
    return closed_round_record(
        project=project, name=name, version=version, source=source, imported_from=f"{SOURCE}: {source}", by=by
    )


def closed_round_record(
    *, project: Project, name: str, version: TaxonomyVersion, source: str, imported_from: str, by=None
) -> Round:
    """A round that happened elsewhere, written in its final state (closed): an import records
    decisions that were made; it does not replay the draft -> open -> review -> closed workflow."""
    now = timezone.now()
    rnd = Round(
        project=project,
        name=name,
        taxonomy_version=version,
        state=Round.State.CLOSED,
        sampling={"method": "imported", "source": source},
        reveal_in_review=True,
        closed_with_majority=True,
        imported_from=imported_from,
        created_by=by if getattr(by, "pk", None) else None,
        opened_at=now,
        review_at=now,
        closed_at=now,
    )
    rnd.full_clean()
    rnd.save()
    return rnd


def rounds_build(*, project: Project, records: list[RoundRecord], by=None) -> list[Round]:
    """Create (or extend) the imported rounds for these records; returns the rounds touched.

    Records must have ``trace_id`` set (the hook resolves duplicates' content hashes first).
    """

    by_round: dict[str, list[RoundRecord]] = defaultdict(list)
    # File order (duplicates reach the hook before the new traces are flushed).
    for rec in sorted(records, key=lambda r: (r.source_file, r.record_number is None, r.record_number or 0)):
        by_round[rec.round].append(rec)
    touched = []
    for name, recs in by_round.items():
        first = recs[0]
        for rec in recs[1:]:
            if rec.modes != first.modes:
                raise ValidationError(
                    f"{rec.source_file} record {rec.record_number + 1}: its failure-mode list differs from record "
                    f"{first.record_number + 1} of the same round {name!r}"
                )
        version = _version_for(name, first.modes, by)
        working = project.taxonomy_version
        if working is not None and working.pk != version.pk:
            # the file's versions reach the project's working version by name and code (README: the loop)
            cross_mapping_automap(source=version, target=working, by=by)
        source = first.source_file or "file"
        rnd = _imported_round(project, name, version, source, by)
        keys = sorted({k for rec in recs for k in rec.labels}, key=lambda k: int(_ANNOTATOR_KEY.match(k).group(1)))
        people = {k: _annotator_user(k, project) for k in keys}
        have_users = set(RoundAnnotator.objects.filter(round=rnd).values_list("user_id", flat=True))
        RoundAnnotator.objects.bulk_create(
            RoundAnnotator(round=rnd, user=u) for u, _ in people.values() if u.pk not in have_users
        )
        in_round = set(RoundTrace.objects.filter(round=rnd).values_list("trace_id", flat=True))
        new = []
        for rec in sorted(recs, key=lambda r: (r.record_number is None, r.record_number or 0)):
            if rec.trace_id in in_round or rec.trace_id in {r.trace_id for r in new}:
                continue
            new.append(rec)
        if not new:
            touched.append(rnd)
            continue
        start = len(in_round)
        RoundTrace.objects.bulk_create(
            RoundTrace(round=rnd, trace_id=rec.trace_id, order=start + i) for i, rec in enumerate(new)
        )
        mode_ids = dict(FailureMode.objects.filter(version=version).values_list("code", "id"))
        entries = [
            LabelSet(
                trace_id=rec.trace_id,
                rater=rater,
                labels=rec.labels.get(key, {}),
                source={"import": SOURCE, "file": rec.source_file, "record": rec.record_number, "annotator": key},
            )
            for rec in new
            for key, (_user, rater) in people.items()
        ]
        labels_bulk_write(entries=entries, version=version, mode_ids=mode_ids, round=rnd)
        adjudications = []
        for rec in new:
            for code, _, _ in rec.modes:
                votes = [rec.labels.get(k, {}).get(code) for k in keys]
                yes = votes.count(ModeLabel.Decision.PRESENT)
                no = votes.count(ModeLabel.Decision.ABSENT)
                if yes == no:
                    continue  # a tie (a judgement is missing): no consensus rather than a guess
                adjudications.append(
                    Adjudication(
                        round=rnd,
                        trace_id=rec.trace_id,
                        mode_id=mode_ids[code],
                        decision=Adjudication.Decision.PRESENT if yes > no else Adjudication.Decision.ABSENT,
                        basis=Adjudication.Basis.MAJORITY,
                        note=f"Imported from {SOURCE}: majority of {yes + no} annotators ({yes} present, {no} absent).",
                    )
                )
        Adjudication.objects.bulk_create(adjudications, batch_size=5000)
        touched.append(rnd)
    for rnd in touched:
        agreement_report_get(round=rnd)
    return touched


def _refuse(exc: ValidationError):

    return TraceImportError(" ".join(exc.messages))


class MastHumanRoundsHook:
    """Import hook: human-labelled MAST-Data records -> closed calibration rounds.

    Errors abort the whole import (TraceImportError naming the file and record)."""

    def on_trace(self, *, batch: Any, trace_id: int, parsed: Any, extra: dict) -> None:
        try:
            rec = record_from_extra(extra=extra, trace_id=trace_id)
        except ValidationError as exc:
            raise _refuse(exc) from None
        if rec is not None:
            batch.state.setdefault(_STATE_KEY, []).append(rec)

    def on_duplicate(self, *, batch: Any, content_hash: str, parsed: Any, extra: dict) -> None:
        try:
            rec = record_from_extra(extra=extra, content_hash=content_hash)
        except ValidationError as exc:
            raise _refuse(exc) from None
        if rec is not None:
            batch.state.setdefault(_STATE_KEY, []).append(rec)

    def on_finish(self, *, batch: Any) -> None:
        try:
            self._finish(batch)
        except ValidationError as exc:
            raise _refuse(exc) from None

    def _finish(self, batch: Any) -> None:
        records: list[RoundRecord] = batch.state.pop(_STATE_KEY, None) or []
        if not records:
            return
        hashes = {r.content_hash for r in records if r.trace_id is None}
        ids = dict(
            Trace.objects.filter(project=batch.project, content_hash__in=hashes).values_list("content_hash", "id")
        )
        for rec in records:
            if rec.trace_id is None:
                rec.trace_id = ids.get(rec.content_hash)
                if rec.trace_id is None:
                    raise ValidationError(f"{rec.source_file} record {rec.record_number + 1}: its trace was not stored")
        rounds_build(project=batch.project, records=records, by=getattr(batch, "by", None))
