"""Reads for the open-codes page: every code with its uses, raters, traces, steps and the failure
modes marked present beside it.

What a user sees (the blind rule, ``annotations.labels.visibility``):

* The codebook (names and use counts) is ``open_code_list``: shared across the project, except
  other raters' uses on traces of draft or open rounds, which are neither listed nor counted.
* The uses themselves (which trace, which steps, who, the modes beside it, rationales) come only
  from annotations ``annotations_visible_across`` lets the user see: managers everything but the
  blind traces of rounds they label in; annotators their own uses, revealed rounds' uses on traces
  they have submitted (anti-anchoring), and non-human suggestions where revealed; viewers their
  revealed rounds and suggestions. A code whose uses are all hidden shows its count and says so.

An open code is given to a whole trace; its "steps" are the steps that annotation cites (evidence
of its labels and its decisive step). Co-occurring modes are the modes that the same annotations
marked present, carried onto the working version (``taxonomy.mapping``); a mode that has no
decided place there is shown in its own version's code.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from django.db.models import Prefetch, QuerySet

from annotations.labels.selectors import open_code_list
from annotations.labels.visibility import annotations_visible_across
from annotations.models import Annotation, ModeLabel, OpenCode
from taxonomy.mapping import VersionMapper
from taxonomy.models import FailureMode, TaxonomyVersion
from taxonomy.selectors import version_is_newer, version_modes
from traces.models import Project, Step

MAX_USES_SHOWN = 200
EXCERPT_CHARS = 240


@dataclass
class CodeRow:
    code: OpenCode
    n_uses: int  # the codebook's count (open_code_list)
    n_visible: int = 0
    trace_ids: set[int] = field(default_factory=set)
    raters: Counter = field(default_factory=Counter)
    modes: Counter = field(default_factory=Counter)  # mode label -> traces

    @property
    def n_hidden(self) -> int:
        return max(self.n_uses - self.n_visible, 0)

    @property
    def top_modes(self) -> list[tuple[str, int]]:
        return self.modes.most_common(3)

    @property
    def rater_names(self) -> list[str]:
        return sorted(self.raters)


def _visible_uses(*, project: Project, user, code: OpenCode | None = None) -> QuerySet[Annotation]:
    """Annotations carrying ``code`` (or any open code) that the user may see, each once."""
    qs = Annotation.objects.filter(trace__project=project)
    if code is not None:
        qs = qs.filter(open_codes=code)
    else:  # a subquery, not a join: an annotation with several codes is still one row
        qs = qs.filter(pk__in=Annotation.open_codes.through.objects.values("annotation_id"))
    return annotations_visible_across(user=user, project=project, qs=qs)


class _ModeNamer:
    """Names a (version, code) pair by its mode on the working version where the mapping decides it."""

    def __init__(self, project: Project) -> None:
        self.target = project.taxonomy_version
        self.mapper = VersionMapper(self.target) if self.target else None
        self._names: dict[tuple[int, str], list[str]] = {}
        self._labels: dict[int, str] = {}

    def names(self, version_id: int, code: str) -> list[str]:
        key = (version_id, code)
        if key not in self._names:
            out: list[str] = []
            if self.mapper is not None:
                out = sorted(c for c, v in self.mapper.map_quiet(version_id, {code: 1}).items() if v == 1)
            if not out:
                if version_id not in self._labels:
                    v = TaxonomyVersion.objects.select_related("taxonomy").filter(pk=version_id).first()
                    self._labels[version_id] = v.label if v else f"version {version_id}"
                out = [f"{code} ({self._labels[version_id]})"]
            self._names[key] = out
        return self._names[key]


def open_code_codebook(*, project: Project, user, q: str = "") -> QuerySet[OpenCode]:
    """The codes the user may know of, most used first (``open_code_list``), for the list page."""
    return open_code_list(project=project, user=user, q=q).select_related("promoted_mode__version__taxonomy")


def open_code_overview(*, project: Project, user, q: str = "", codes: list[OpenCode] | None = None) -> list[CodeRow]:
    """``codes`` (one page of ``open_code_codebook``; default all of it) with what the user may see
    of their uses. A fixed number of queries whatever the number of codes and uses."""
    if codes is None:
        codes = list(open_code_codebook(project=project, user=user, q=q))
    rows = {c.pk: CodeRow(code=c, n_uses=c.n_uses) for c in codes}
    if not rows:
        return []
    through = Annotation.open_codes.through
    uses = through.objects.filter(opencode_id__in=list(rows), annotation__in=_visible_uses(project=project, user=user))
    by_annotation: dict[int, list[int]] = defaultdict(list)
    trace_of: dict[int, int] = {}
    for code_id, ann_id, trace_id, rater in uses.values_list(
        "opencode_id", "annotation_id", "annotation__trace_id", "annotation__rater__name"
    ):
        row = rows[code_id]
        row.n_visible += 1
        row.trace_ids.add(trace_id)
        row.raters[rater] += 1
        by_annotation[ann_id].append(code_id)
        trace_of[ann_id] = trace_id
    namer = _ModeNamer(project)
    seen: set[tuple[int, str, int]] = set()
    # The labels of every annotation carrying these codes, through a plain semi-join (the blind
    # rule's subqueries once more made the planner slow), kept below only for the visible ones.
    carrying = through.objects.filter(opencode_id__in=list(rows)).values("annotation_id")
    present = ModeLabel.objects.filter(annotation_id__in=carrying, decision=ModeLabel.Decision.PRESENT)
    for ann_id, version_id, code in present.values_list(
        "annotation_id", "annotation__taxonomy_version_id", "mode__code"
    ):
        if ann_id not in by_annotation:
            continue
        for name in namer.names(version_id, code):
            for code_id in by_annotation[ann_id]:
                key = (code_id, name, trace_of[ann_id])
                if key not in seen:  # count traces, not annotations
                    seen.add(key)
                    rows[code_id].modes[name] += 1
    return list(rows.values())


@dataclass
class CodeUse:
    annotation: Annotation
    steps: list[int]
    present: list[str]
    rationales: list[tuple[str, str]]  # (mode code, rationale) of the annotation's present labels
    excerpt: str  # the first cited step's text, shortened


def open_code_get(*, project: Project, user, code_id: int) -> OpenCode | None:
    """The code, if the user may know of it (it is in their codebook)."""
    return (
        open_code_list(project=project, user=user)
        .select_related("promoted_mode__version__taxonomy")
        .filter(pk=code_id)
        .first()
    )


def open_code_uses(*, project: Project, user, code: OpenCode, limit: int = MAX_USES_SHOWN) -> list[CodeUse]:
    """The uses of ``code`` the user may see, newest first, with the steps each cites."""

    anns = list(
        _visible_uses(project=project, user=user, code=code)
        .select_related("rater", "round", "taxonomy_version__taxonomy", "attribution")
        .select_related("trace")
        .only(
            "id",
            "state",
            "notes",
            "updated_at",
            "taxonomy_version_id",
            "round_id",
            "rater__id",
            "rater__name",
            "rater__kind",
            "round__id",
            "round__name",
            "taxonomy_version__id",
            "taxonomy_version__number",
            "taxonomy_version__taxonomy__name",
            "attribution__id",
            "attribution__decisive_step",
            "trace__id",
            "trace__title",
            "trace__external_id",
            "trace__mas_name",
        )
        .prefetch_related(
            Prefetch(
                "labels",
                queryset=ModeLabel.objects.select_related("mode").only(
                    "id", "annotation_id", "decision", "evidence", "rationale", "mode__code", "mode__order"
                ),
            )
        )
        .order_by("-updated_at", "-id")[:limit]
    )
    out = []
    first_steps: dict[int, tuple[int, int]] = {}
    for ann in anns:
        steps: set[int] = set()
        present, rationales = [], []
        for lab in ann.labels.all():
            if lab.decision != ModeLabel.Decision.PRESENT:
                continue
            present.append(lab.mode.code)
            if lab.rationale:
                rationales.append((lab.mode.code, lab.rationale))
            steps |= {ev["step"] for ev in lab.evidence if isinstance(ev, dict) and "step" in ev}
        attribution = getattr(ann, "attribution", None)  # None when the annotation has no attribution
        if attribution is not None and attribution.decisive_step is not None:
            steps.add(attribution.decisive_step)
        ordered = sorted(steps)
        if ordered:
            first_steps[ann.pk] = (ann.trace_id, ordered[0])
        out.append(CodeUse(annotation=ann, steps=ordered, present=present, rationales=rationales, excerpt=""))
    if first_steps:
        wanted = {pair for pair in first_steps.values()}
        texts = {
            (t, i): content
            for t, i, content in Step.objects.filter(
                trace_id__in={t for t, _ in wanted}, index__in={i for _, i in wanted}
            ).values_list("trace_id", "index", "content")
            if (t, i) in wanted
        }
        for use in out:
            pair = first_steps.get(use.annotation.pk)
            if pair and pair in texts:
                use.excerpt = _excerpt(texts[pair])
    return out


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1].rstrip() + "…"


def open_code_seed(*, code: OpenCode, uses: list[CodeUse], n: int = 5) -> str:
    """The examples a promoted mode starts with: up to ``n`` uses, each its trace, cited step and
    excerpt, the annotator's rationales and notes (plain text; the mode's examples field)."""
    parts = []
    for use in uses[:n]:
        ann = use.annotation
        where = f"Trace #{ann.trace_id} {ann.trace.display_name}"
        if ann.trace.mas_name:
            where += f" ({ann.trace.mas_name})"
        if use.steps:
            where += f", step {use.steps[0]}"
        lines = [f"- {where}, coded '{code.name}' by {ann.rater.name}"]
        if use.excerpt:
            lines.append(f"  Excerpt: {use.excerpt}")
        for mode_code, text in use.rationales[:2]:
            lines.append(f"  Rationale ({mode_code}): {_excerpt(text)}")
        if ann.notes:
            lines.append(f"  Notes: {_excerpt(ann.notes)}")
        parts.append("\n".join(lines))
    return "\n".join(parts)


def promote_sources(*, project: Project) -> list[TaxonomyVersion]:
    """Versions a promotion may draft from: the working version, then the published versions newer
    than it (a version the project has not moved to yet, such as a round's refined one), newest last."""

    working = project.taxonomy_version
    if working is None:
        return []
    newer = [
        v
        for v in TaxonomyVersion.objects.select_related("taxonomy", "parent")
        .filter(taxonomy_id=working.taxonomy_id, status=TaxonomyVersion.Status.PUBLISHED)
        .order_by("number")
        if version_is_newer(version=v, than=working)
    ]
    return [working, *newer]


def promote_draft(*, source: TaxonomyVersion | None) -> TaxonomyVersion | None:
    """The draft a promotion from ``source`` goes into, if one was already started from it."""
    if source is None:
        return None
    return (
        TaxonomyVersion.objects.select_related("taxonomy")
        .filter(parent=source, status=TaxonomyVersion.Status.DRAFT)
        .order_by("-number")
        .first()
    )


def promote_targets(*, source: TaxonomyVersion | None, draft: TaxonomyVersion | None) -> list[FailureMode]:
    """Modes an open code may extend: those of the draft it will go into (or of ``source``, which
    a new draft will copy)."""

    version = draft or source
    return version_modes(version=version) if version else []
