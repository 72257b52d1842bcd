"""Corpus search API: the search, what a search became in the loop (and its undo), behaviour
searches (estimate, start, read, cancel, name a group). Thin: parse, call one service or selector."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.corpus import behaviour as bsvc
from annotations.corpus import services
from annotations.corpus.selectors import (
    CorpusQuery,
    CorpusResult,
    QueryError,
    action_source,
    behaviour_hits_visible,
    behaviour_visible,
    corpus_search,
    corpus_trace_ids,
)
from annotations.models import BehaviourGroup, BehaviourSearch, ProviderConnection, Round, SearchAction
from taxonomy.models import FailureMode
from traces.api_errors import ProductError
from traces.projects.permissions import ProjectScopedMixin

SEARCH_PARAMS = [
    OpenApiParameter("q", str, description="What to look for."),
    OpenApiParameter("mode", str, enum=["words", "phrase", "prefix", "regex"], description="Default words."),
    OpenApiParameter("agent", str),
    OpenApiParameter("kind", str, enum=["message", "tool_call", "tool_output", "system", "log"]),
    OpenApiParameter("framework", str),
    OpenApiParameter("llm", str),
    OpenApiParameter("outcome", str, enum=["success", "failure", "unknown"]),
    OpenApiParameter("round", int, description="Only traces of this round."),
    OpenApiParameter("from", str, description="Imported on or after (YYYY-MM-DD)."),
    OpenApiParameter("to", str, description="Imported on or before (YYYY-MM-DD)."),
    OpenApiParameter("label", str, many=True, description="<source>:<mode code>:present|absent (repeatable)."),
    OpenApiParameter("page", int),
]


class SearchParamsIn(serializers.Serializer):
    """A corpus search's parameters in a request body (as the GET's query string; ``date_from`` and
    ``date_to`` for its ``from`` and ``to``, ``labels`` for its ``label``)."""

    q = serializers.CharField(required=False, allow_blank=True)
    mode = serializers.ChoiceField(["words", "phrase", "prefix", "regex"], required=False)
    agent = serializers.CharField(required=False, allow_blank=True)
    kind = serializers.CharField(required=False, allow_blank=True)
    framework = serializers.CharField(required=False, allow_blank=True)
    llm = serializers.CharField(required=False, allow_blank=True)
    outcome = serializers.CharField(required=False, allow_blank=True)
    round = serializers.IntegerField(required=False, allow_null=True)
    date_from = serializers.DateField(required=False, allow_null=True)
    date_to = serializers.DateField(required=False, allow_null=True)
    labels = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="As the GET's label: <source>:<mode>:present|absent."
    )


class SearchActionIn(SearchParamsIn):
    do = serializers.ChoiceField(["code", "sample", "examples"])
    name = serializers.CharField(required=False, help_text="code: the open code's name.")
    to_round = serializers.IntegerField(required=False, help_text="sample: a draft round's id.")
    how = serializers.ChoiceField(["all", "stratified"], required=False)
    n = serializers.IntegerField(required=False, help_text="sample, stratified: how many traces.")
    stratify_by = serializers.ChoiceField(["framework", "benchmark", "llm"], required=False)
    to_mode = serializers.IntegerField(required=False, help_text="examples: a draft mode's id.")
    behaviour = serializers.IntegerField(required=False, help_text="Act on a behaviour search's hits instead.")
    group = serializers.IntegerField(required=False, help_text="With behaviour: only this group's hits.")


class BehaviourSearchIn(SearchParamsIn):
    description = serializers.CharField(required=False, allow_blank=True)
    connection = serializers.IntegerField()
    model = serializers.CharField(required=False, allow_blank=True)
    max_tokens = serializers.IntegerField(required=False, min_value=1)
    max_cost = serializers.DecimalField(max_digits=16, decimal_places=8, required=False, allow_null=True)
    estimate_only = serializers.BooleanField(required=False, default=False)


class GroupNameIn(serializers.Serializer):
    name = serializers.CharField()


def _body(serializer_class, request) -> dict:
    """The request's body, checked by ``serializer_class``, as a dict the search reads."""
    given = serializer_class(data=request.data)
    given.is_valid(raise_exception=True)
    data = {k: v for k, v in given.validated_data.items() if v is not None}
    for key, name in (("date_from", "from"), ("date_to", "to")):
        if key in data:
            data[name] = data.pop(key).isoformat()
    if "labels" in data:
        data["label"] = data.pop("labels")
    return data


def _errors(exc: DjangoValidationError) -> ProductError:
    """A service's refusal as the API's error body: ``detail`` a sentence, ``errors`` per field."""
    return ProductError(" ".join(exc.messages), errors=exc.message_dict if hasattr(exc, "error_dict") else None)


def result_as_dict(result: CorpusResult, *, slug: str) -> dict:
    def trace_url(tid: int, step: int | None = None) -> str:
        url = reverse("trace_detail", args=[slug, tid])
        return url + (f"#step-{step}" if step is not None else "")

    return {
        "query": result.query.as_dict(),
        "n_steps": result.n_steps,
        "n_traces": result.n_traces,
        "capped": result.capped,
        "waiting": result.waiting,
        "page": result.page,
        "n_pages": result.n_pages,
        "facets": {
            name: [{"value": v, "steps": s, "traces": t} for v, s, t in rows] for name, rows in result.facets.items()
        },  # fmt: skip
        "traces": [
            {
                "id": g.trace_id,
                "title": g.title,
                "framework": g.framework,
                "llm": g.llm,
                "outcome": g.outcome,
                "n_steps": g.n_steps,
                "url": trace_url(g.trace_id),
                "hits": [
                    {
                        "step": h.index,
                        "agent": h.agent,
                        "kind": h.kind,
                        "before": h.before,
                        "line": [{"text": t, "hit": m} for t, m in h.line],
                        "after": h.after,
                        "url": trace_url(g.trace_id, h.index),
                    }
                    for h in g.hits
                ],
            }  # fmt: skip
            for g in result.traces
        ],
    }


class CorpusSearchApi(ProjectScopedMixin, APIView):
    """Every step of the project that matches, grouped by trace (newest first, 20 traces a page),
    with counts per trace and per filter value; at most 10,000 steps are read (``capped``)."""

    @extend_schema(parameters=SEARCH_PARAMS, responses={200: OpenApiResponse(OpenApiTypes.OBJECT)})
    def get(self, request, slug):
        try:
            query = CorpusQuery.from_query(request.query_params)
            page = int(request.query_params.get("page") or 1)
            result = corpus_search(user=request.user, project=self.project, query=query, page=page)
        except QueryError as exc:
            raise ProductError(str(exc)) from None
        except ValueError:
            raise ProductError("page: a number.") from None
        return Response(result_as_dict(result, slug=slug))


def action_as_dict(a: SearchAction) -> dict:
    return {
        "id": a.id, "kind": a.kind, "query": a.query, "n_traces": len(a.trace_ids), "trace_ids": a.trace_ids,
        "code": a.code.name if a.code else None, "round": a.round_id, "mode": a.mode.code if a.mode else None,
        "detail": {k: v for k, v in a.detail.items() if k not in ("before", "after")},
        "created_at": a.created_at, "undone_at": a.undone_at, "undone_note": a.undone_note,
    }  # fmt: skip


def search_action_apply(*, request, project, data) -> SearchAction:
    """One loop action from the page's form or the API's body (shared by both)."""
    kind = str(data.get("do") or "")
    ids, lines, query = action_source(user=request.user, project=project, data=data)
    if kind == SearchAction.Kind.CODE:
        return services.search_code_apply(project=project, by=request.user, trace_ids=ids,
                                          name=str(data.get("name") or ""), query=query)  # fmt: skip
    if kind == SearchAction.Kind.SAMPLE:
        rnd = Round.objects.filter(project=project, pk=_int(data.get("to_round"), "to_round")).first()
        if rnd is None:
            raise QueryError("to_round: no such round in this project.")
        return services.search_sample_apply(
            project=project, by=request.user, trace_ids=ids, round=rnd, how=str(data.get("how") or "all"),
            n=_int(data.get("n") or 0, "n"), stratify_by=str(data.get("stratify_by") or "framework"), query=query,
        )  # fmt: skip
    if kind == SearchAction.Kind.EXAMPLES:
        mode = FailureMode.objects.filter(pk=_int(data.get("to_mode"), "to_mode")).select_related("version").first()
        if mode is None:
            raise QueryError("to_mode: no such failure mode.")
        return services.search_examples_apply(project=project, by=request.user, mode=mode, hits=lines, query=query)
    raise QueryError("do: code, sample or examples.")


def _int(value, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise QueryError(f"{name}: a number.") from None


class SearchActionsApi(ProjectScopedMixin, APIView):
    """What searches became (GET: yours; a manager also sees samples and examples), or a new one
    (POST ``do`` = code (``name``) | sample (``to_round``, ``how`` all|stratified, ``n``, ``stratify_by``)
    | examples (``to_mode``: a draft mode's id), with the search's parameters or ``behaviour`` (+``group``))."""

    capability = {"GET": "view", "POST": "annotate"}

    @extend_schema(operation_id="projects_search_actions_list", responses={200: OpenApiResponse(OpenApiTypes.OBJECT)})
    def get(self, request, slug):
        actions = services.search_actions_for_user(user=request.user, project=self.project)[:200]
        return Response({"actions": [action_as_dict(a) for a in actions]})

    @extend_schema(request=SearchActionIn, responses={201: OpenApiResponse(OpenApiTypes.OBJECT)})
    def post(self, request, slug):
        try:
            action = search_action_apply(request=request, project=self.project, data=_body(SearchActionIn, request))
        except QueryError as exc:
            raise ProductError(str(exc)) from None
        except DjangoValidationError as exc:
            raise _errors(exc) from None
        return Response(action_as_dict(action), status=status.HTTP_201_CREATED)


class SearchActionUndoApi(ProjectScopedMixin, APIView):
    capability = "annotate"

    @extend_schema(request=None, responses={200: OpenApiResponse(OpenApiTypes.OBJECT)})
    def post(self, request, slug, pk):
        action = services.search_actions_for_user(user=request.user, project=self.project).filter(pk=pk).first()
        if action is None:
            raise NotFound("No such action of yours.")
        try:
            action = services.search_action_undo(action=action, by=request.user)
        except DjangoValidationError as exc:
            raise _errors(exc) from None
        return Response(action_as_dict(action))


def behaviour_as_dict(s: BehaviourSearch, *, user, with_hits: bool = False) -> dict:
    out = {
        "id": s.id, "description": s.description, "state": s.state, "query": s.query, "n_traces": len(s.trace_ids),
        "n_done": s.n_done, "model": s.model, "connection": s.connection_id, "max_tokens": s.max_tokens,
        "max_cost": s.max_cost, "estimate_tokens": s.estimate_tokens, "estimate_cost": s.estimate_cost,
        "tokens": s.tokens_in + s.tokens_out, "cost": s.cost, "error": s.error, "created_at": s.created_at,
        "finished_at": s.finished_at,
    }  # fmt: skip
    if with_hits:
        hits = behaviour_hits_visible(user=user, search=s)
        out["groups"] = [{"number": g.number, "name": g.name, "terms": g.terms} for g in s.groups.all()]
        out["hits"] = [{"trace": h.trace_id, "present": h.present, "score": h.score, "quotes": h.quotes,
                        "explanation": h.explanation, "error": h.error,
                        "group": h.group.number if h.group else None} for h in hits]  # fmt: skip
    return out


def _behaviour_or_404(request, project, pk) -> BehaviourSearch:
    search = get_object_or_404(BehaviourSearch, project=project, pk=pk)
    if not behaviour_visible(user=request.user, search=search):
        raise NotFound("No such behaviour search.")
    return search


class BehaviourSearchesApi(ProjectScopedMixin, APIView):
    """Behaviour searches (managers). POST ``description``, ``connection``, ``model``, ``max_tokens``,
    optional ``max_cost``, and the corpus search's parameters selecting the traces; with
    ``estimate_only`` true it answers the estimate and starts nothing. Over the budget: 400, nothing started."""

    capability = "manage"

    @extend_schema(
        operation_id="projects_behaviour_searches_list", responses={200: OpenApiResponse(OpenApiTypes.OBJECT)}
    )
    def get(self, request, slug):
        return Response({"searches": [behaviour_as_dict(s, user=request.user)
                                      for s in self.project.behaviour_searches.all()[:100]]})  # fmt: skip

    @extend_schema(
        request=BehaviourSearchIn,
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="estimate_only: the estimate, nothing started"),
            201: OpenApiResponse(OpenApiTypes.OBJECT, description="the search, queued"),
        },
    )
    def post(self, request, slug):
        data = _body(BehaviourSearchIn, request)
        try:
            query = CorpusQuery.from_query(data)
            ids = corpus_trace_ids(user=request.user, project=self.project, query=query)
            conn = ProviderConnection.objects.filter(
                project=self.project, pk=_int(data.get("connection"), "connection")
            )
            connection = conn.first()
            if connection is None:
                raise QueryError("connection: no such connection in this project.")
            if data.get("estimate_only"):
                est = bsvc.behaviour_estimate(project=self.project, trace_ids=ids, connection=connection)
                return Response({"n_traces": est.n_traces, "tokens_in": est.tokens_in, "tokens_out": est.tokens_out,
                                 "tokens": est.tokens, "cost": est.cost})  # fmt: skip
            max_cost = data.get("max_cost")
            search = bsvc.behaviour_search_start(
                project=self.project, by=request.user, description=str(data.get("description") or ""),
                trace_ids=ids, query=query.as_dict(), connection=connection, model=str(data.get("model") or ""),
                max_tokens=_int(data.get("max_tokens"), "max_tokens"),
                max_cost=Decimal(str(max_cost)) if max_cost not in (None, "") else None,
            )  # fmt: skip
        except QueryError as exc:
            raise ProductError(str(exc)) from None
        except InvalidOperation:
            raise ProductError("max_cost: a number.") from None
        except DjangoValidationError as exc:
            raise _errors(exc) from None
        return Response(behaviour_as_dict(search, user=request.user), status=status.HTTP_201_CREATED)


class BehaviourSearchApi(ProjectScopedMixin, APIView):
    """One behaviour search with its groups and hits (best first; traces you label blind left out)."""

    capability = "manage"

    @extend_schema(responses={200: OpenApiResponse(OpenApiTypes.OBJECT)})
    def get(self, request, slug, pk):
        search = _behaviour_or_404(request, self.project, pk)
        return Response(behaviour_as_dict(search, user=request.user, with_hits=True))


class BehaviourCancelApi(ProjectScopedMixin, APIView):
    capability = "manage"

    @extend_schema(request=None, responses={200: OpenApiResponse(OpenApiTypes.OBJECT)})
    def post(self, request, slug, pk):
        search = bsvc.behaviour_search_cancel(search=_behaviour_or_404(request, self.project, pk), by=request.user)
        return Response(behaviour_as_dict(search, user=request.user))


class BehaviourGroupApi(ProjectScopedMixin, APIView):
    """Name a group of a behaviour search (``name``)."""

    capability = "manage"

    @extend_schema(request=GroupNameIn, responses={200: OpenApiResponse(OpenApiTypes.OBJECT)})
    def patch(self, request, slug, pk, number):
        search = _behaviour_or_404(request, self.project, pk)
        group = get_object_or_404(BehaviourGroup, search=search, number=number)
        try:
            group = bsvc.behaviour_group_rename(group=group, name=str(request.data.get("name") or ""), by=request.user)
        except DjangoValidationError as exc:
            raise _errors(exc) from None
        return Response({"number": group.number, "name": group.name, "terms": group.terms})
