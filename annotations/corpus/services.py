"""What a search becomes in the taxonomy loop, one action each, and its undo.

* **Open code on the hits** (anyone who annotates): the user's own annotation of each hit trace
  outside rounds, on the working version, gets the code (created as a draft where she has none).
  Each changed annotation gets a history row and its revision goes up (an editor open on it meets a
  409, as a manager's rename does). Undo takes the code off those annotations and deletes the ones
  the action created if they still hold nothing else; one she has written in since is kept, and
  the undo says how many.
* **Sample for a round** (managers): every hit trace, or a stratified sample of ``n`` of them
  (``rounds.sampling.sample_ids``, by framework, benchmark or LLM), added to a draft round; undo
  removes exactly those traces while the round is still a draft (once open, its traces are fixed).
* **Examples of a draft mode** (those who may edit the draft): the hits' lines, each naming its trace
  and step, appended to the mode's examples through ``taxonomy.services.mode_edit``; undo restores
  the text if nobody edited it since.

Every action is one ``SearchAction`` row holding what it changed; undo is refused twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from annotations.codes.services import open_code_name_clean
from annotations.labels.services import rater_for_user
from annotations.models import Annotation, AnnotationEvent, OpenCode, Round, RoundTrace, SearchAction
from annotations.rounds.sampling import STRATA_FIELDS, sample_ids
from taxonomy.access import version_user_can_change
from taxonomy.models import FailureMode
from taxonomy.services import mode_edit
from traces.models import Project, Trace
from traces.projects.selectors import user_can

MAX_TRACES = 10_000  # traces one action may touch (the search's own cap)
MAX_EXAMPLES = 12  # hit lines one "examples" action appends


def _traces_of(project: Project, trace_ids: Sequence[int]) -> list[int]:
    ids = sorted({int(i) for i in trace_ids})
    if not ids:
        raise ValidationError("The search has no hits to act on.")
    if len(ids) > MAX_TRACES:
        raise ValidationError(f"At most {MAX_TRACES:,} traces per action, got {len(ids):,}: narrow the search.")
    found = set(Trace.objects.filter(project=project, pk__in=ids).values_list("pk", flat=True))
    missing = [i for i in ids if i not in found]
    if missing:
        raise ValidationError(f"Not traces of {project.name}: {', '.join(map(str, missing[:10]))}.")
    return ids


def _codes_of(annotation_ids: Sequence[int]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {i: [] for i in annotation_ids}
    through = Annotation.open_codes.through
    for aid, name in through.objects.filter(annotation_id__in=annotation_ids).values_list(
        "annotation_id", "opencode__name"
    ):
        out[aid].append(name)
    return {k: sorted(v) for k, v in out.items()}


def _record(annotation_ids: Sequence[int], before: dict[int, list[str]], *, by, note: str) -> None:
    """Revision up and one history row per annotation whose open codes changed."""
    if not annotation_ids:
        return
    Annotation.objects.filter(pk__in=annotation_ids).update(revision=F("revision") + 1)
    after = _codes_of(annotation_ids)
    revisions = dict(Annotation.objects.filter(pk__in=annotation_ids).values_list("pk", "revision"))
    AnnotationEvent.objects.bulk_create(
        AnnotationEvent(annotation_id=aid, by=by, action=AnnotationEvent.Action.SEARCH, revision=revisions[aid],
                        before={"open_codes": before.get(aid, []), "note": note},
                        after={"open_codes": after.get(aid, [])})
        for aid in annotation_ids
    )  # fmt: skip


@transaction.atomic
def search_code_apply(*, project: Project, by, trace_ids: Sequence[int], name: str, query: dict) -> SearchAction:
    """The open code ``name`` on the user's own annotation of every trace (module docstring)."""
    if not user_can(user=by, project=project, capability="annotate"):
        raise PermissionDenied(f"Only annotators of {project.name} add open codes.")
    ids = _traces_of(project, trace_ids)
    name = open_code_name_clean(name)
    code, code_created = OpenCode.objects.get_or_create(project=project, name=name)
    rater = rater_for_user(user=by)
    version = project.taxonomy_version
    mine = Annotation.objects.filter(trace_id__in=ids, rater=rater, round__isnull=True, taxonomy_version=version)
    have = set(mine.values_list("trace_id", flat=True))
    Annotation.objects.bulk_create(
        Annotation(trace_id=t, rater=rater, taxonomy_version=version, state=Annotation.State.DRAFT)
        for t in ids
        if t not in have
    )
    annotations = dict(mine.values_list("trace_id", "pk"))
    created = sorted(annotations[t] for t in ids if t not in have)
    through = Annotation.open_codes.through
    already = set(through.objects.filter(opencode=code, annotation_id__in=annotations.values()).values_list(
        "annotation_id", flat=True))  # fmt: skip
    added = sorted(a for a in annotations.values() if a not in already)
    before = _codes_of(added)
    through.objects.bulk_create(through(annotation_id=a, opencode=code) for a in added)
    _record(added, before, by=by, note=f"open code {name!r} from a search")
    return SearchAction.objects.create(
        project=project, kind=SearchAction.Kind.CODE, query=query, trace_ids=ids, code=code, created_by=by,
        detail={"added": added, "created": created, "code_created": code_created},
    )  # fmt: skip


@transaction.atomic
def search_sample_apply(
    *, project: Project, by, trace_ids: Sequence[int], round: Round, how: str = "all", n: int = 0,
    stratify_by: str = "framework", seed: int = 0, query: dict,
) -> SearchAction:  # fmt: skip
    """Every hit trace, or a stratified sample of ``n``, added to the draft ``round``."""
    if not user_can(user=by, project=project, capability="manage"):
        raise PermissionDenied(f"Only managers of {project.name} change a round's traces.")
    rnd = Round.objects.select_for_update().get(pk=round.pk)
    if rnd.project_id != project.pk:
        raise ValidationError("That round belongs to another project.")
    if rnd.state != Round.State.DRAFT:
        raise ValidationError(f"{rnd.name} is {rnd.get_state_display().lower()}: only a draft round takes new traces.")
    ids = _traces_of(project, trace_ids)
    present = set(RoundTrace.objects.filter(round=rnd, trace_id__in=ids).values_list("trace_id", flat=True))
    pool = [t for t in ids if t not in present]
    if how == "stratified":
        if stratify_by not in STRATA_FIELDS:
            raise ValidationError(f"Stratify by one of {', '.join(STRATA_FIELDS)}.")
        strata = Trace.objects.filter(pk__in=pool).values_list("pk", STRATA_FIELDS[stratify_by])
        chosen = sample_ids(list(strata), method="stratified", n=n, seed=seed)
    elif how == "all":
        chosen = pool
    else:
        raise ValidationError("Add all hits or a stratified sample.")
    if not chosen:
        raise ValidationError(f"Every hit trace is in {rnd.name} already.")
    start = (RoundTrace.objects.filter(round=rnd).order_by("-order").values_list("order", flat=True).first() or 0) + 1
    rows = RoundTrace.objects.bulk_create(
        RoundTrace(round=rnd, trace_id=t, order=start + i) for i, t in enumerate(chosen)
    )
    return SearchAction.objects.create(
        project=project, kind=SearchAction.Kind.SAMPLE, query=query, trace_ids=sorted(chosen), round=rnd,
        created_by=by, detail={"round_traces": [r.pk for r in rows], "how": how, "n": len(chosen),
                               "already_in_round": len(present), "stratify_by": stratify_by if how != "all" else ""},
    )  # fmt: skip


def _example_lines(hits: Sequence[dict]) -> str:
    lines = []
    for h in hits[:MAX_EXAMPLES]:
        text = " ".join(str(h.get("text", "")).split())[:300]
        agent = f" ({h['agent']})" if h.get("agent") else ""
        lines.append(f"- Trace {h['trace']}, step {h['step']}{agent}: “{text}”")
    return "\n".join(lines)


@transaction.atomic
def search_examples_apply(
    *, project: Project, by, mode: FailureMode, hits: Sequence[dict], query: dict
) -> SearchAction:
    """The hits' lines (``{"trace", "step", "agent", "text"}``) appended to a draft mode's examples."""
    mode = FailureMode.objects.select_for_update().select_related("version").get(pk=mode.pk)
    if mode.version.is_published:
        raise ValidationError(f"{mode.code} is in a published version: add examples to a draft's mode.")
    if not version_user_can_change(user=by, version=mode.version):
        raise PermissionDenied("You may not edit that taxonomy version.")
    if not hits:
        raise ValidationError("The search has no hits to take examples from.")
    before = mode.examples
    block = _example_lines(hits)
    after = (before.rstrip() + "\n\n" if before.strip() else "") + block
    mode_edit(mode=mode, examples=after, note="examples from a corpus search")
    return SearchAction.objects.create(
        project=project, kind=SearchAction.Kind.EXAMPLES, query=query,
        trace_ids=sorted({int(h["trace"]) for h in hits[:MAX_EXAMPLES]}), mode=mode, created_by=by,
        detail={"before": before, "after": after},
    )  # fmt: skip


def _undo_code(action: SearchAction, by) -> str:
    code = action.code
    if code is None:
        return "its open code was deleted since: nothing to take off"
    added = action.detail.get("added", [])
    through = Annotation.open_codes.through
    still = list(through.objects.filter(opencode=code, annotation_id__in=added).values_list("annotation_id", flat=True))
    before = _codes_of(still)
    through.objects.filter(opencode=code, annotation_id__in=still).delete()
    created = action.detail.get("created", [])
    empty_qs = (
        Annotation.objects.filter(pk__in=created, state=Annotation.State.DRAFT, notes="")
        .annotate(n_labels=Count("labels", distinct=True), n_codes=Count("open_codes", distinct=True))
        .filter(n_labels=0, n_codes=0)
        .values_list("pk", flat=True)
    )
    empty = list(empty_qs)
    Annotation.objects.filter(pk__in=empty).delete()
    _record([a for a in still if a not in set(empty)], before, by=by, note=f"open code {code.name!r} undone")
    kept = len(created) - len(empty)
    if action.detail.get("code_created") and not code.annotations.exists():
        code.delete()  # the action's row keeps its name in undone_note; its FK is set null
        action.code = None
    note = f"code {code.name!r} taken off {len(still)} annotation(s)"
    return note + (f"; {kept} annotation(s) it had created kept: written in since" if kept else "")


def _undo_sample(action: SearchAction) -> str:
    rnd = action.round
    if rnd is None:
        return "its round was deleted since"
    rnd = Round.objects.select_for_update().get(pk=rnd.pk)
    if rnd.state != Round.State.DRAFT:
        raise ValidationError(f"{rnd.name} has opened: its traces are fixed now.")
    n, _ = RoundTrace.objects.filter(round=rnd, pk__in=action.detail.get("round_traces", [])).delete()
    return f"{n} trace(s) taken out of {rnd.name}"


def _undo_examples(action: SearchAction, by) -> str:
    mode = action.mode
    if mode is None:
        return "its mode was deleted since"
    mode = FailureMode.objects.select_for_update().select_related("version").get(pk=mode.pk)
    if mode.version.is_published:
        raise ValidationError(f"{mode.code}'s version is published now: its examples are frozen.")
    if mode.examples != action.detail.get("after"):
        raise ValidationError(f"{mode.code}'s examples were edited since: undo by editing the mode.")
    mode_edit(mode=mode, examples=action.detail.get("before", ""), note="corpus-search examples undone")
    return f"{mode.code}'s examples restored"


@transaction.atomic
def search_action_undo(*, action: SearchAction, by) -> SearchAction:
    action = SearchAction.objects.select_for_update().get(pk=action.pk)
    if action.undone_at:
        raise ValidationError("This action was undone already.")
    capability = "annotate" if action.kind == SearchAction.Kind.CODE else "manage"
    if action.kind == SearchAction.Kind.CODE and action.created_by_id != by.pk:
        raise PermissionDenied("Only who added an open code from a search can undo it (it is on her annotations).")
    if not user_can(user=by, project=action.project, capability=capability):
        raise PermissionDenied("You may not undo this action.")
    if action.kind == SearchAction.Kind.CODE:
        note = _undo_code(action, by)
    elif action.kind == SearchAction.Kind.SAMPLE:
        note = _undo_sample(action)
    else:
        note = _undo_examples(action, by)
    action.undone_at = timezone.now()
    action.undone_note = note[:300]
    action.save(update_fields=["undone_at", "undone_note"])
    return action


def search_actions_for_user(*, user, project: Project):
    """The actions a user sees: her own, and every sample/examples action for managers."""
    qs = SearchAction.objects.filter(project=project).select_related("code", "round", "mode", "created_by")
    if user_can(user=user, project=project, capability="manage"):
        return qs.filter(Q(created_by=user) | ~Q(kind=SearchAction.Kind.CODE))
    return qs.filter(created_by=user)


__all__ = [
    "search_action_undo",
    "search_actions_for_user",
    "search_code_apply",
    "search_examples_apply",
    "search_sample_apply",
]
