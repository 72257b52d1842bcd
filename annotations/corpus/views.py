"""The corpus search page (search, filters, hits by trace, and what a search becomes in the loop)
and a behaviour search's page (ranked hits with their quotes, the groups). Thin.

GET  p/<slug>/search/?q=&mode=&...            the search (members)
POST p/<slug>/search/  op=action|undo|behaviour_estimate|behaviour_start (+ the search's parameters)
GET  p/<slug>/search/behaviour/<id>/           a behaviour search (managers)
POST p/<slug>/search/behaviour/<id>/           op=rename (number, name) | cancel | action (kind, group)
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotations.corpus import behaviour as bsvc
from annotations.corpus import services
from annotations.corpus.api import search_action_apply
from annotations.corpus.selectors import (
    ACTION_CAP,
    KINDS,
    OUTCOMES,
    CorpusQuery,
    QueryError,
    behaviour_hits_visible,
    behaviour_visible,
    corpus_filter_choices,
    corpus_label_sources,
    corpus_search,
    corpus_trace_ids,
)
from annotations.models import BehaviourGroup, BehaviourSearch, ProviderConnection, Round
from taxonomy.models import FailureMode
from traces.projects.selectors import project_get_for_user, user_can


def _message(exc: Exception) -> str:
    if isinstance(exc, ValidationError) and hasattr(exc, "error_dict"):
        return "; ".join(f"{k}: {' '.join(v)}" if k != "__all__" else " ".join(v) for k, v in exc.message_dict.items())
    return " ".join(getattr(exc, "messages", [str(exc)]))


def _query_of(post: QueryDict) -> QueryDict:
    """The search's own parameters, carried by the page's forms as hidden fields."""
    keep = QueryDict(mutable=True)
    for key in ("q", "mode", "agent", "kind", "framework", "llm", "outcome", "round", "from", "to", "label"):
        for value in post.getlist(key):
            keep.appendlist(key, value)
    return keep


def _draft_modes(project, user):
    version = project.taxonomy_version
    if version is None:
        return []
    modes = FailureMode.objects.filter(version__taxonomy_id=version.taxonomy_id, version__status="draft")
    return [m for m in modes.select_related("version").order_by("version__number", "order", "code")
            if user_can(user=user, project=project, capability="manage")]  # fmt: skip


def _post(request, project, data: QueryDict) -> str:
    op = data.get("op")
    if op == "action":
        action = search_action_apply(request=request, project=project, data=data)
        return f"Done: {action.get_kind_display().lower()}, {len(action.trace_ids)} trace(s). You can undo it below."
    if op == "undo":
        action = services.search_actions_for_user(user=request.user, project=project).filter(pk=data.get("id")).first()
        if action is None:
            raise ValidationError("No such action of yours.")
        action = services.search_action_undo(action=action, by=request.user)
        return f"Undone: {action.undone_note}."
    if op in ("behaviour_estimate", "behaviour_start"):
        query = CorpusQuery.from_query(data)
        ids = corpus_trace_ids(user=request.user, project=project, query=query)
        connection = ProviderConnection.objects.filter(project=project, pk=data.get("connection") or 0).first()
        if connection is None:
            raise ValidationError("Pick a judge connection.")
        if op == "behaviour_estimate":
            est = bsvc.behaviour_estimate(project=project, trace_ids=ids, connection=connection)
            return (f"Estimate for {est.n_traces} trace(s): at most {est.tokens:,} tokens ({est.tokens_in:,} in, "
                    f"{est.tokens_out:,} out), cost {est.cost:.4f} at the connection's prices.")  # fmt: skip
        try:
            max_cost = Decimal(str(data.get("max_cost"))) if data.get("max_cost") else None
            max_tokens = int(data.get("max_tokens") or 0)
        except (InvalidOperation, ValueError):
            raise ValidationError("The budget is a number of tokens and, optionally, a cost.") from None
        search = bsvc.behaviour_search_start(
            project=project, by=request.user, description=data.get("description", ""), trace_ids=ids,
            query=query.as_dict(), connection=connection, model=data.get("model", ""), max_tokens=max_tokens,
            max_cost=max_cost,
        )  # fmt: skip
        return f"Behaviour search started on {len(search.trace_ids)} trace(s): it runs in the background."
    raise ValidationError(f"Unknown action {op!r}.")


def _pages(result, query: CorpusQuery) -> list[tuple[int, str]]:
    near = sorted({1, result.n_pages, *range(max(1, result.page - 2), min(result.n_pages, result.page + 2) + 1)})
    return [(n, query.querystring(page=n)) for n in near] if result.n_pages > 1 else []


@login_required
@require_http_methods(["GET", "POST"])
def search_page(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug)
    if request.method == "POST":
        keep = _query_of(request.POST)
        try:
            messages.success(request, _post(request, project, request.POST))
        except (ValidationError, QueryError, PermissionDenied) as exc:
            messages.error(request, _message(exc))
        return redirect(
            reverse("annotations:corpus_search", args=[project.slug]) + ("?" + keep.urlencode() if keep else "")
        )
    result, error, query = None, "", None
    try:
        query = CorpusQuery.from_query(request.GET)
        if query.q.strip():
            page = int(request.GET.get("page") or 1) if str(request.GET.get("page") or "1").isdigit() else 1
            result = corpus_search(user=request.user, project=project, query=query, page=page)
    except QueryError as exc:
        error = str(exc)
    query = query or CorpusQuery()
    manager = role == "manager"
    facets = []
    if result is not None:
        labels = {"framework": "Framework", "llm": "LLM", "outcome": "Outcome", "agent": "Agent", "kind": "Step kind"}
        for name, rows in result.facets.items():
            links = [(v, n, t, query.querystring(**{name: v})) for v, n, t in rows[:12]]
            facets.append((labels[name], links, max(0, len(rows) - 12)))
    sources = corpus_label_sources(user=request.user, project=project)
    version = project.taxonomy_version
    return render(request, "annotations/corpus/search.html", {
        "project": project, "role": role, "nav": "projects", "tab": "search", "result": result, "error": error,
        "query": query, "qs": query.querystring(), "choices": corpus_filter_choices(project=project),
        "kinds": KINDS, "outcomes": OUTCOMES, "sources": sources,
        "label_chips": [(str(f), f"{f.code} {'present' if f.present else 'absent'} in "
                         f"{dict(sources).get(f.source, f.source)}") for f in query.labels],
        "modes": list(version.modes.order_by("order", "code").values_list("code", "name")) if version else [],
        "can_annotate": user_can(user=request.user, project=project, capability="annotate"), "manager": manager,
        "draft_rounds": Round.objects.filter(project=project, state=Round.State.DRAFT).order_by("-pk")
        if manager
        else [],
        "draft_modes": _draft_modes(project, request.user) if manager else [],
        "connections": ProviderConnection.objects.filter(project=project).order_by("name") if manager else [],
        "actions": services.search_actions_for_user(user=request.user, project=project)[:10],
        "behaviours": project.behaviour_searches.all()[:10] if manager else [],
        "hidden": [(k, v) for k, vs in query.params().items() for v in (vs if isinstance(vs, list) else [vs])],
        "facets": facets, "action_cap": ACTION_CAP, "pages": _pages(result, query) if result else [],
    })  # fmt: skip


@login_required
@require_http_methods(["GET", "POST"])
def behaviour_page(request, slug, pk):
    project, role = project_get_for_user(user=request.user, slug=slug)
    search = get_object_or_404(BehaviourSearch, project=project, pk=pk)
    if not behaviour_visible(user=request.user, search=search):
        raise Http404("No such behaviour search.")
    if request.method == "POST":
        op = request.POST.get("op")
        try:
            if op == "rename":
                group = get_object_or_404(BehaviourGroup, search=search, number=request.POST.get("number") or 0)
                bsvc.behaviour_group_rename(group=group, name=request.POST.get("name", ""), by=request.user)
                messages.success(request, "Group named.")
            elif op == "cancel":
                bsvc.behaviour_search_cancel(search=search, by=request.user)
                messages.success(request, "Cancelled: the traces read so far are kept.")
            elif op == "action":
                data = request.POST.copy()
                data["behaviour"] = str(search.pk)
                action = search_action_apply(request=request, project=project, data=data)
                messages.success(request, f"Done: {action.get_kind_display().lower()}, {len(action.trace_ids)} "
                                          "trace(s). Undo it on the search page.")  # fmt: skip
            else:
                raise ValidationError(f"Unknown action {op!r}.")
        except (ValidationError, QueryError, PermissionDenied) as exc:
            messages.error(request, _message(exc))
        return redirect("annotations:behaviour_search", slug=project.slug, pk=search.pk)
    hits = list(behaviour_hits_visible(user=request.user, search=search))
    return render(request, "annotations/corpus/behaviour.html", {
        "project": project, "role": role, "nav": "projects", "tab": "search", "search": search,
        "found": [h for h in hits if h.present], "not_found": [h for h in hits if not h.present and not h.error],
        "failed": [h for h in hits if h.error], "groups": list(search.groups.all()),
        "hidden_hits": len(search.trace_ids) - len(hits) if search.state not in bsvc.ACTIVE else 0,
        "draft_rounds": Round.objects.filter(project=project, state=Round.State.DRAFT).order_by("-pk"),
        "draft_modes": _draft_modes(project, request.user), "running": search.state in bsvc.ACTIVE,
        "back_qs": urlencode({k: v for k, v in search.query.items() if v}, doseq=True),
    })  # fmt: skip
