"""Writes on the open codebook: rename, merge, promote to a failure mode (managers only).

* Rename and merge change every annotation that carries the code, whatever its round or state
  (the codebook is the project's; a rename is not a change of anyone's labels). Each changed
  annotation gets a history row (``AnnotationEvent`` action ``recode``, by the manager, open codes
  before and after) and its revision goes up, so an editor open on it meets a 409 conflict instead
  of silently writing the old name back. Its ``updated_at`` (the author's last edit) is kept.
* Renaming onto a name the project already has is refused: that is a merge, said as such.
* Merging keeps the target's row; an annotation that carried several of the merged codes keeps one.
* Promoting adds a mode (or extends an existing one's definition and examples) in the draft of the
  next version of the working version (``taxonomy.services.version_draft_next``, the draft a
  round's "Revise definition" writes to), seeded from the code's examples; the version's mapping
  records it (an ``add`` row, or the ``edit`` of the extended mode) with the code named in its
  note, and the code remembers the mode. A round on that draft labels the mode; opening the round
  publishes the draft.
* A manager acts only on codes in their own codebook (``open_code_list``): one who labels in a
  blind round cannot rename a code only the round's other raters used.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotations.codes.selectors import open_code_seed, open_code_uses, promote_sources
from annotations.labels.content import MAX_OPEN_CODE
from annotations.labels.selectors import annotation_snapshot, open_code_list
from annotations.models import Annotation, AnnotationEvent, OpenCode
from taxonomy.access import version_user_can_change
from taxonomy.models import FailureMode, ModeMapping, TaxonomyVersion
from taxonomy.services import mode_add, mode_edit, version_draft_next
from traces.models import Project
from traces.projects.selectors import user_can


def _require_manager(*, project: Project, by) -> None:
    if not user_can(user=by, project=project, capability="manage"):
        raise PermissionDenied(f"Only managers of {project.name} rename, merge or promote open codes.")


def open_code_name_clean(raw: str) -> str:
    name = " ".join(str(raw or "").split())
    if not name:
        raise ValidationError("An open code needs a name.")
    if len(name) > MAX_OPEN_CODE:
        raise ValidationError(f"An open code has at most {MAX_OPEN_CODE} characters, got {len(name)}.")
    return name


def _recode(
    *, annotation_ids: list[int], by, apply: Callable[[], None], rewrite: Callable[[list[str]], list[str]]
) -> int:
    """Lock the annotations, read their state, ``apply()`` the codebook change, then write one
    history row per annotation whose open codes changed (names before -> ``rewrite(names)``) and
    raise its revision. Returns how many annotations changed."""
    anns = list(
        Annotation.objects.select_for_update(of=("self",))
        .select_related("attribution")  # the snapshot reads it from here, not with a query each
        .filter(pk__in=annotation_ids)
        .order_by("pk")
    )
    befores = {ann.pk: annotation_snapshot(annotation=ann) for ann in anns}
    apply()
    events = []
    for ann in anns:
        before = befores[ann.pk]
        names = sorted(set(rewrite(before["open_codes"])))
        if names == before["open_codes"]:
            continue
        after = {**before, "revision": before["revision"] + 1, "open_codes": names}
        events.append(
            AnnotationEvent(
                annotation=ann,
                by=by,
                action=AnnotationEvent.Action.RECODE,
                revision=after["revision"],
                before=before,
                after=after,
            )
        )
    # the rows are locked: one UPDATE and one INSERT for all of them
    Annotation.objects.filter(pk__in=[e.annotation_id for e in events]).update(revision=F("revision") + 1)
    AnnotationEvent.objects.bulk_create(events)
    changed = len(events)
    return changed


def _managed_code(*, project: Project, code: OpenCode, by) -> OpenCode:
    """The code, locked, if it is in the manager's codebook (else 404-like ``OpenCode.DoesNotExist``)."""
    if not open_code_list(project=project, user=by).filter(pk=code.pk).exists():
        raise OpenCode.DoesNotExist(f"No open code {code.pk} in {project.name}.")
    return OpenCode.objects.select_for_update().get(pk=code.pk, project=project)


@transaction.atomic
def open_code_rename(*, project: Project, code: OpenCode, name: str, by) -> int:
    """Give the code a new name everywhere it is used (see the module doc); returns the annotations changed."""
    _require_manager(project=project, by=by)
    name = open_code_name_clean(name)
    code = _managed_code(project=project, code=code, by=by)
    old = code.name
    if name == old:
        return 0
    if OpenCode.objects.filter(project=project, name=name).exists():
        raise ValidationError(f"{name!r} is already an open code of {project.name}: merge the two instead.")

    def apply() -> None:
        code.name = name
        code.full_clean()
        code.save(update_fields=["name"])

    return _recode(
        annotation_ids=list(code.annotations.values_list("pk", flat=True)),
        by=by,
        apply=apply,
        rewrite=lambda names: [name if n == old else n for n in names],
    )


@transaction.atomic
def open_code_merge(*, project: Project, codes: list[OpenCode], into: OpenCode, by) -> int:
    """Fold ``codes`` into ``into``: every annotation that carried one of them carries ``into``,
    and the merged codes are gone. Returns the annotations changed."""
    _require_manager(project=project, by=by)
    into = _managed_code(project=project, code=into, by=by)
    sources = [_managed_code(project=project, code=c, by=by) for c in codes if c.pk != into.pk]
    if not sources:
        raise ValidationError("Pick at least one other code to merge into it.")
    old_names = {c.name for c in sources}
    through = Annotation.open_codes.through
    ids = sorted(set(through.objects.filter(opencode__in=sources).values_list("annotation_id", flat=True)))

    def apply() -> None:
        has_target = set(
            through.objects.filter(opencode=into, annotation_id__in=ids).values_list("annotation_id", flat=True)
        )
        through.objects.bulk_create([through(annotation_id=a, opencode_id=into.pk) for a in ids if a not in has_target])
        if into.promoted_mode_id is None:
            carried = next((c for c in sources if c.promoted_mode_id), None)
            if carried is not None:
                for f in ("promoted_mode_id", "promoted_how", "promoted_at", "promoted_by_id"):
                    setattr(into, f, getattr(carried, f))
                into.save(update_fields=["promoted_mode", "promoted_how", "promoted_at", "promoted_by"])
        OpenCode.objects.filter(pk__in=[c.pk for c in sources]).delete()

    return _recode(
        annotation_ids=ids,
        by=by,
        apply=apply,
        rewrite=lambda names: [into.name if n in old_names else n for n in names],
    )


@transaction.atomic
def open_code_promote(
    *,
    project: Project,
    code: OpenCode,
    by,
    mode_code: str = "",
    name: str = "",
    definition: str = "",
    extend: str = "",
    examples: str | None = None,
    source: TaxonomyVersion | None = None,
) -> FailureMode:
    """Promote the code into the next version's draft: a new mode ``mode_code``/``name``/``definition``,
    or, with ``extend`` (a mode code of the draft), that mode's definition replaced by ``definition``
    (the caller's form starts from the old one) and the code's examples appended to its examples.
    ``examples`` defaults to the code's seeded examples (``open_code_seed``). ``source`` is the
    version the draft starts from: the working version (default) or a published newer one
    (``promote_sources``)."""
    _require_manager(project=project, by=by)
    code = _managed_code(project=project, code=code, by=by)
    sources = promote_sources(project=project)
    if not sources:
        raise ValidationError(f"{project.name} has no working taxonomy version to draft from.")
    source = source or sources[0]
    if source.pk not in {v.pk for v in sources}:
        raise ValidationError(
            f"A promotion drafts from {project.name}'s working version or a published newer one, not {source.label}."
        )
    draft = version_draft_next(
        source=source, by=by, notes=f"Drafted from {source.label} to promote open codes of {project.name}."
    )
    if draft.created_by_id != getattr(by, "pk", None) and not version_user_can_change(user=by, version=draft):
        raise ValidationError(f"The draft {draft.label} was started by someone else and you may not change it.")
    if examples is None:
        examples = open_code_seed(code=code, uses=open_code_uses(project=project, user=by, code=code))
    n_uses = code.annotations.count()
    note = f"Promoted from the open code '{code.name}' ({n_uses} use{'s' if n_uses != 1 else ''} in {project.name})."
    if extend:
        mode = FailureMode.objects.filter(version=draft, code=extend).first()
        if mode is None:
            raise ValidationError(f"{draft.label} has no mode {extend!r}.")
        header = f"From the open code '{code.name}':"
        merged = f"{mode.examples.rstrip()}\n\n{header}\n{examples}".strip() if examples else mode.examples
        mode = mode_edit(mode=mode, definition=definition or mode.definition, examples=merged, note=note)
        # a mode revised before keeps its edit row: the promotion is added to that row's note
        for row in ModeMapping.objects.filter(version=draft, new_code=mode.code).exclude(note__contains=note):
            row.note = f"{row.note} {note}".strip()
            row.save(update_fields=["note"])
        how = OpenCode.Promotion.EXTEND
    else:
        mode = mode_add(version=draft, code=mode_code, name=name or code.name, definition=definition, note=note)
        if examples:
            mode = mode_edit(mode=mode, examples=examples, note=note)
        how = OpenCode.Promotion.ADD
    code.promoted_mode, code.promoted_how, code.promoted_at, code.promoted_by = mode, how, timezone.now(), by
    code.save(update_fields=["promoted_mode", "promoted_how", "promoted_at", "promoted_by"])
    return mode
