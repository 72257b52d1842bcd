"""Where a project's work stands, for its home page (registered with ``traces.projects.overview``).

The working version, every round with its state, version and headline kappa, labelling progress
of the rounds in progress, the latest judge runs, the latest release, and the next thing to do.
The next step follows the loop (README "The calibration loop"), first match wins:

1. no traces -> import some; no round yet -> create the first round;
2. a round in review -> adjudicate it (or close it); an open round -> labelling (start review when
   everyone has submitted); a draft round -> open it;
3. a published version drafted from the working version (a revision) -> make it the working version;
   a draft revised from a round -> start the next round on it;
4. no judge run on the working version -> run the judge; agreed labels newer than the latest
   release -> build a release; otherwise the loop can go round again: sample the next round.

Read only; six small queries whatever the number of rounds (the rounds list is one query).
"""

from __future__ import annotations

from django.urls import reverse

from annotations.models import JudgeRun, Release, Round
from annotations.rounds.selectors import round_list_for_project
from taxonomy.models import TaxonomyVersion
from traces.models import Project


def project_status(*, project: Project, user, role: str) -> dict:
    slug = project.slug
    working = project.taxonomy_version
    rounds = list(round_list_for_project(project=project, user=user))
    runs = list(
        JudgeRun.objects.filter(project=project).select_related("taxonomy_version__taxonomy").order_by("-id")[:3]
    )
    release = Release.objects.filter(project=project).order_by("-number").first()
    newer = (
        TaxonomyVersion.objects.filter(parent=working).select_related("taxonomy").order_by("-number").first()
        if working
        else None
    )
    has_traces = project.traces.exists()
    progress = [
        {
            "round": r,
            "submitted": r.n_submitted or 0,
            "expected": (r.n_traces or 0) * (r.n_annotators or 0),
        }
        for r in rounds
        if r.state in (Round.State.OPEN, Round.State.REVIEW)
    ]
    for p in progress:
        p["percent"] = int(100 * p["submitted"] / p["expected"]) if p["expected"] else 0
    closed = [r for r in rounds if r.state == Round.State.CLOSED]
    last_closed = max(closed, key=lambda r: (r.closed_at is not None, r.closed_at, r.pk), default=None)
    step = _next_step(
        slug=slug,
        working=working,
        rounds=rounds,
        runs=runs,
        release=release,
        newer=newer,
        has_traces=has_traces,
        last_closed=last_closed,
    )
    return {
        "working": working,
        "rounds": rounds,
        "progress": progress,
        "runs": runs,
        "release": release,
        "next": step,
        "is_manager": role == "manager",
    }


def _next_step(*, slug, working, rounds, runs, release, newer, has_traces, last_closed) -> dict:
    def step(text: str, url_name: str, label: str, **kw) -> dict:
        return {"text": text, "url": reverse(url_name, kwargs={"slug": slug, **kw}), "label": label}

    if not has_traces:
        return step("Import the traces you want to study.", "import_page", "Import traces")
    if not rounds:
        return step(
            "Label a first sample blind with two or more annotators.", "annotations:round_list", "Create a round"
        )
    for state, text, label in (
        (Round.State.REVIEW, "{name} is in review: decide its disagreements, then close it.", "Adjudicate"),
        (Round.State.OPEN, "{name} is open: annotators are labelling blind.", "See progress"),
        (Round.State.DRAFT, "{name} is a draft: open it so annotators can start.", "Open the round"),
    ):
        live = [r for r in rounds if r.state == state]
        if live:
            r = live[-1]
            return step(text.format(name=r.title), "annotations:round_detail", label, pk=r.pk)
    if newer is not None and newer.is_published:
        return {
            "text": f"{newer.label} revises the working version {working.label}: make it the working version.",
            "url": reverse("project_settings", kwargs={"slug": slug}) + f"?taxonomy_version={newer.pk}",
            "label": f"Use {newer.label}",
        }
    if newer is not None:
        return {
            "text": f"Definitions were revised in draft {newer.label}: start the next round on it "
            "(opening the round publishes it).",
            "url": reverse("annotations:round_new", kwargs={"slug": slug}) + f"?taxonomy_version={newer.pk}",
            "label": "Start the next round",
        }
    if working is not None and not any(r.taxonomy_version_id == working.pk for r in runs):
        return step(
            f"No LLM judge run on {working.label} yet: measure the judge against the humans.",
            "annotations:judge_list",
            "Run the judge",
        )
    if last_closed is not None and (
        release is None or (last_closed.closed_at and release.created_at < last_closed.closed_at)
    ):
        return step(
            f"{last_closed.title}'s labels are not in a release yet.",
            "annotations:release_list",
            "Build a release",
        )
    return step(
        "Everything is up to date: sample the next round to check agreement on new traces.",
        "annotations:round_list",
        "Next round",
    )
