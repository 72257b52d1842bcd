"""HTML pages of the annotation workspace: my queue, the labelling screen, "submit and next"."""

from __future__ import annotations

from itertools import groupby

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse

from annotations.labels.content import MAX_NOTES, MAX_OPEN_CODE, MAX_OPEN_CODES, MAX_RATIONALE
from annotations.labels.page_sql import page_mine, page_open_codes, page_target
from annotations.labels.selectors import (
    ROUND_QUEUE_STATES,
    annotation_empty_snapshot,
    annotation_snapshot_of_rows,
    queue_counts,
    queue_next,
    queue_round_items,
    queue_trace_items,
    round_for_annotator,
    trace_annotations_visible,
)
from annotations.labels.sql import annotation_lock
from annotations.labels.visibility import anchoring_holds_back
from taxonomy.selectors import version_modes
from traces.projects.selectors import project_access_check, project_get_for_user, user_can
from traces.viewer.selectors import trace_viewer_context

STATUSES = [("", "All"), ("todo", "To do"), ("draft", "In progress"), ("submitted", "Done")]


def _queue_page(request, *, project=None, role=None):
    status = request.GET.get("status", "")
    if status not in dict(STATUSES):
        status = ""
    rounds = list(queue_round_items(user=request.user, project=project, status=status))
    traces = Paginator(queue_trace_items(user=request.user, project=project, status=status), 50).get_page(
        request.GET.get("page")
    )
    context = {
        "nav": "queue",
        "project": project,
        "role": role,
        "tab": "queue",
        "status": status,
        "statuses": STATUSES,
        "counts": queue_counts(user=request.user, project=project),
        "round_items": rounds,
        "trace_page": traces,
        "next": queue_next(user=request.user, project=project),
    }
    return render(request, "annotations/labels/queue.html", context)


@login_required
def queue(request):
    return _queue_page(request)


@login_required
def project_queue(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug, capability="annotate")
    return _queue_page(request, project=project, role=role)


def _workspace_url(slug: str, trace_id: int, round_id: int | None) -> str:
    url = reverse("annotations:workspace", kwargs={"slug": slug, "pk": trace_id})
    return f"{url}?round={round_id}" if round_id else url


@login_required
def queue_next_page(request):
    """Redirect to the next item of my queue (after ?after=<trace>&round=<id>, within ?project=)."""
    project = None
    if request.GET.get("project"):
        project, _ = project_get_for_user(user=request.user, slug=request.GET["project"], capability="annotate")
    after = request.GET.get("after", "")
    after_round = request.GET.get("round", "")
    target = queue_next(
        user=request.user,
        project=project,
        after_trace_id=int(after) if after.isdigit() else None,
        after_round_id=int(after_round) if after_round.isdigit() else None,
    )
    if target is None:
        messages.success(request, "Your queue is empty: everything is submitted.")
        return redirect("annotations:queue")
    return redirect(_workspace_url(target.project_slug, target.trace_id, target.round_id))


# published version id -> (what the mode list was rendered from, the HTML). Published versions are
# immutable (taxonomy.selectors keeps their modes for the life of the process likewise), and the
# list is the same for every trace: ~14 modes x a dozen variables and filters, a third of the
# page's template time, rendered once.
_MODES_HTML: dict[int, tuple[tuple, str]] = {}


def _modes_html(*, version, modes: list) -> str:
    key = (version.label, tuple(m.pk for m in modes))
    cached = _MODES_HTML.get(version.pk) if version.is_published else None
    if cached is not None and cached[0] == key:
        return cached[1]
    categories = [(category, list(items)) for category, items in groupby(modes, key=lambda m: m.category)]
    html = render_to_string(
        "annotations/labels/_modes.html",
        {"categories": categories, "version": version, "config": {"limits": {"rationale": MAX_RATIONALE}}},
    )
    if version.is_published:
        _MODES_HTML[version.pk] = (key, html)
    return html


@login_required
def _workspace_round(request, project, trace, elsewhere):
    """The round (None outside one) and version the page labels with; a redirect into my round
    when I open the trace outside it while it waits for me there."""
    if request.GET.get("round"):
        raw = request.GET["round"]
        round = round_for_annotator(user=request.user, project=project, round_id=int(raw)) if raw.isdigit() else None
        if round is None:
            raise Http404("No such round among yours in this project.")
        return round, round.taxonomy_version, None
    if elsewhere is not None:  # my round work on this trace happens inside the round
        return None, None, redirect(_workspace_url(project.slug, trace.pk, elsewhere))
    if project.taxonomy_version is None:
        raise Http404("This project has no taxonomy version to label with.")
    return None, project.taxonomy_version, None


def _my_annotation(*, user, trace, version, round):
    """My annotation here (None before my first save) and its snapshot for the page's script."""
    mine = annotation_lock(
        trace_id=trace.pk,
        user_id=user.pk,
        version_id=version.pk,
        round_id=round.pk if round else None,
        for_update=False,
        with_rows=True,
    )
    if mine is None:
        return None, annotation_empty_snapshot()
    annotation = mine.annotation
    annotation.trace, annotation.taxonomy_version = trace, version
    if round is not None:
        annotation.round = round
    return annotation, annotation_snapshot_of_rows(annotation=annotation, attribution=mine.attribution, rows=mine.rows)


def _workspace_config(request, *, slug, project, role, trace, round, version, annotation, snapshot, modes, others):
    """What the page's script needs: where to save, submit and reopen, my snapshot, the limits."""
    query = f"?round={round.pk}" if round else ""
    api = reverse("api-my-annotation", kwargs={"slug": slug, "pk": trace.pk})
    next_url = reverse("annotations:queue_next") + f"?after={trace.pk}" + (f"&round={round.pk}" if round else "")
    submitted_here = snapshot["state"] == "submitted"
    return {
        "annotationId": annotation.pk if annotation else None,
        "storageKey": f"mast-ws:{request.user.pk}:{trace.pk}:{round.pk if round else 0}:{version.pk}",
        "apiUrl": api + query,
        "submitUrl": reverse("api-my-annotation-submit", kwargs={"slug": slug, "pk": trace.pk}) + query,
        "openCodesUrl": reverse("api-open-codes", kwargs={"slug": slug}),
        "nextUrl": next_url,
        "snapshot": snapshot,
        "modes": [m.code for m in modes],
        "others": others,
        "openCodes": page_open_codes(project=project, user=request.user, role=role),
        "limits": {
            "rationale": MAX_RATIONALE,
            "notes": MAX_NOTES,
            "openCode": MAX_OPEN_CODE,
            "openCodes": MAX_OPEN_CODES,
        },
        # Read only: a draft or closed round, or labels I submitted (until I reopen them).
        "locked": bool(round and round.state in ("draft", "closed")) or submitted_here,
        "submitted": submitted_here,
        "reopenUrl": reverse("api-my-annotation-reopen", kwargs={"slug": slug, "pk": trace.pk}) + query,
    }


def workspace(request, slug, pk):
    # The project, its version, my role and the trace in one statement; my round elsewhere and
    # whether I submitted in one more; my annotation, its labels and open codes in two
    # (annotations.labels.page_sql and .sql: plain SQL, the same checks as the ORM selectors).
    pk = pk if pk < 2**63 else None  # beyond bigint: no such trace, not a database error
    project, role, trace = page_target(slug=slug, user_id=request.user.pk, trace_id=pk)
    role = project_access_check(user=request.user, project=project, role=role, capability="view")
    if not user_can(user=request.user, project=project, capability="annotate"):
        raise PermissionDenied("Viewers can read traces but not label them.")
    if trace is None:
        raise Http404("No such trace in this project.")
    elsewhere, submitted = page_mine(trace_id=trace.pk, user_id=request.user.pk, round_states=ROUND_QUEUE_STATES)
    round, version, into_round = _workspace_round(request, project, trace, elsewhere)
    if into_round is not None:
        return into_round
    annotation, snapshot = _my_annotation(user=request.user, trace=trace, version=version, round=round)
    held_back = anchoring_holds_back(
        user=request.user, project=project, trace_id=trace.pk, role=role, submitted=submitted
    )
    modes = version_modes(version=version)
    others = [
        {
            "rater": a.rater.name,
            "kind": a.rater.kind,
            "suggestion": a.round_id is None and a.rater.kind != "human",
            "labels": {lab.mode.code: {"decision": lab.decision, "rationale": lab.rationale} for lab in a.labels.all()},
        }
        for a in trace_annotations_visible(user=request.user, project=project, trace=trace, held_back=held_back)
        if a.taxonomy_version_id == version.pk
    ]
    config = _workspace_config(
        request,
        slug=slug,
        project=project,
        role=role,
        trace=trace,
        round=round,
        version=version,
        annotation=annotation,
        snapshot=snapshot,
        modes=modes,
        others=others,
    )
    submitted_here = snapshot["state"] == "submitted"
    context = {
        "project": project,
        "role": role,
        "nav": "queue",
        "round": round,
        "version": version,
        "modes_html": _modes_html(version=version, modes=modes),
        "config": config,
        "snapshot": snapshot,
        "has_suggestions": any(o["suggestion"] for o in others),
        "round_locked": bool(round and round.state in ("draft", "closed")),
        # A submitted annotation is reopened by its author while the round (if any) is open.
        "reopenable": submitted_here and not (round and round.state != "open"),
        # Says that peers' labels exist only where the blind rule would show them anyway.
        "held_back": held_back and not (round and round.state in ("draft", "open")),
        **trace_viewer_context(trace=trace),
    }
    return render(request, "annotations/labels/workspace.html", context)
