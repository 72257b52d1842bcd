"""Workspace API: my queue, read/save/submit my annotation, its history, open codes, and the other
raters' annotations the blind rule lets me see. Thin views: shape checks here, rules in services.

Status codes: 400 bad input (``{"detail", "errors": [{"field", "message"}]}``), 403 not allowed
(viewer, someone else's annotation, closed round), 404 not a member / no such trace or round,
409 stale revision (``{"detail", "current": <stored annotation>}``) or a change to a submitted
annotation, which is read-only until reopened (``{"detail"}``).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction
from django.http import Http404
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, generics, status
from rest_framework.authtoken.models import Token
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.labels.selectors import (
    annotation_empty_snapshot,
    annotation_find,
    annotation_history,
    annotation_snapshot,
    open_code_list,
    queue_round_items,
    queue_trace_items,
    round_for_annotator,
    trace_annotations_visible,
)
from annotations.labels.serializers import (
    AnnotationIn,
    AnnotationOut,
    ConflictOut,
    ErrorOut,
    EventOut,
    OpenCodeOut,
    QueueItemOut,
    SubmitIn,
    VisibleAnnotationOut,
    annotation_in_plain,
)
from annotations.labels.services import (
    AnnotationConflict,
    AnnotationInvalid,
    annotation_reopen,
    annotation_submit,
    annotation_upsert,
)
from annotations.labels.sql import save_target, save_target_for_token
from annotations.models import AnnotationEvent
from traces.api_errors import QueryParamError
from traces.projects.permissions import ProjectScopedMixin
from traces.projects.selectors import project_access_check, project_get_for_user
from traces.projects.token_auth import PlainSqlTokenAuthentication
from traces.sqlrows import model_from_row
from traces.viewer.selectors import trace_get

ROUND_PARAM = OpenApiParameter(
    "round", int, description="Label inside this calibration round (you must be one of its annotators)."
)
REFUSALS = {
    400: OpenApiResponse(ErrorOut, description="Bad input; nothing stored."),
    403: OpenApiResponse(ErrorOut, description="Not allowed (viewer, closed round, someone else's)."),
    404: OpenApiResponse(description="Not a member of the project, or no such trace/round."),
}


def _out(*, snapshot: dict, annotation, trace, round, version) -> dict:
    return {
        "id": annotation.pk if annotation else None,
        "trace": trace.pk,
        "round": round.pk if round else None,
        "taxonomy_version": version.pk,
        "submitted_at": annotation.submitted_at if annotation else None,
        **snapshot,
    }


class _MyAnnotationMixin(ProjectScopedMixin):
    capability = "annotate"
    target_trace = None  # the trace, when it was read with the project

    def target(self, request, pk):
        """(trace, taxonomy version, round) from the URL and ?round=."""
        trace = self.target_trace or trace_get(project=self.project, pk=pk)
        round = None
        raw = request.query_params.get("round", "")
        if raw:
            if not raw.isdigit():
                raise QueryParamError("round", f"must be a round id, not {raw[:40]!r}")
            round = round_for_annotator(user=request.user, project=self.project, round_id=int(raw))
            if round is None:
                raise Http404("No such round among yours in this project.")
            version = round.taxonomy_version
        else:
            version = self.project.taxonomy_version
            if version is None:
                raise Http404("This project has no taxonomy version to label with.")
        return trace, version, round

    def conflict_out(self, exc, trace, version, round):
        annotation = annotation_find(trace=trace, user=self.request.user, taxonomy_version=version, round=round)
        current = _out(snapshot=exc.current, annotation=annotation, trace=trace, round=round, version=version)
        return Response({"detail": exc.message, "current": current}, status=status.HTTP_409_CONFLICT)


def _trace_id(kwargs) -> int | None:
    pk = int(kwargs["pk"])
    return pk if pk < 2**63 else None  # beyond bigint: no such trace (as the ORM answers), not a database error


class _SaveTokenAuthentication(PlainSqlTokenAuthentication):
    """``Authorization: Token <key>`` on an autosave: the token, its user and the save's target (the
    project, my role, the trace) in ONE statement (``sql.save_target_for_token``), the target left on
    the request for ``MyAnnotationApi.initial``. The same rules and 401 messages as the class it
    extends, which answers every other request."""

    def authenticate(self, request):
        self.request = request
        return super().authenticate(request)

    def authenticate_credentials(self, key):
        request = self.request
        if request.method != "PUT":
            return super().authenticate_credentials(key)
        kwargs = request.parser_context["kwargs"]
        found = save_target_for_token(key=key, slug=kwargs["slug"], trace_id=_trace_id(kwargs))
        if found is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        token_row, user_row, target = found
        token, user = model_from_row(Token, token_row), model_from_row(get_user_model(), user_row)
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        token.user = user
        request.mast_save_target = target
        return user, token


class MyAnnotationApi(_MyAnnotationMixin, APIView):
    """Read or save MY annotation of a trace (outside rounds, or in ?round=)."""

    def get_authenticators(self):
        """The project's authenticators, with token authentication reading the save's target too. The
        schema (drf-spectacular's fake view) documents the project's own classes: the same scheme."""
        authenticators = super().get_authenticators()
        if getattr(self, "swagger_fake_view", False):
            return authenticators
        return [_SaveTokenAuthentication() if type(a) is PlainSqlTokenAuthentication else a for a in authenticators]

    def initial(self, request, *args, **kwargs):
        if request.method != "PUT":
            return super().initial(request, *args, **kwargs)
        # An autosave: the project, my role and the trace in one statement (the same checks); with a
        # token, that statement was the authentication's.
        APIView.initial(self, request, *args, **kwargs)
        target = getattr(request, "mast_save_target", None)
        if target is None:
            target = save_target(slug=kwargs["slug"], user_id=request.user.pk, trace_id=_trace_id(kwargs))
        project, role, trace = target
        self.role = project_access_check(user=request.user, project=project, role=role, capability=self.capability)
        if trace is None:
            raise Http404("No such trace in this project.")
        self.project, self.target_trace = project, trace

    @extend_schema(parameters=[ROUND_PARAM], responses={200: AnnotationOut, **REFUSALS})
    def get(self, request, slug, pk):
        trace, version, round = self.target(request, pk)
        annotation = annotation_find(trace=trace, user=request.user, taxonomy_version=version, round=round)
        snapshot = annotation_snapshot(annotation=annotation) if annotation else annotation_empty_snapshot()
        return Response(_out(snapshot=snapshot, annotation=annotation, trace=trace, round=round, version=version))

    @extend_schema(
        parameters=[ROUND_PARAM],
        request=AnnotationIn,
        responses={
            200: AnnotationOut,
            **REFUSALS,
            409: OpenApiResponse(ConflictOut, description="Stale revision: the stored state, nothing changed."),
        },
        description="Replace my annotation's whole state. Send the revision you read; the same state sent "
        "twice changes nothing (200, same revision). Creates the annotation on the first save.",
    )
    def put(self, request, slug, pk):
        trace, version, round = self.target(request, pk)
        v = annotation_in_plain(request.data)
        if v is None:
            data = AnnotationIn(data=request.data)
            if not data.is_valid():
                return Response(
                    {"detail": "The request body is not a valid annotation.", "errors": _flat(data.errors)}, 400
                )
            v = data.validated_data
        try:
            annotation = annotation_upsert(
                trace=trace,
                user=request.user,
                taxonomy_version=version,
                round=round,
                base_revision=v["revision"],
                labels=v["labels"],
                task_success=v["task_success"],
                notes=v["notes"],
                open_codes=v["open_codes"],
                attribution=v.get("attribution"),
            )
        except AnnotationConflict as exc:
            return self.conflict_out(exc, trace, version, round)
        snapshot = annotation_snapshot(annotation=annotation)
        return Response(_out(snapshot=snapshot, annotation=annotation, trace=trace, round=round, version=version))


def _flat(errors, prefix: str = "") -> list[dict]:
    """DRF's nested error dict as [{field, message}] with paths like labels[2].code."""
    out: list[dict] = []
    if isinstance(errors, dict):
        for key, value in errors.items():
            out += _flat(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(errors, list):
        for i, value in enumerate(errors):
            if isinstance(value, dict | list) and value:
                out += _flat(value, f"{prefix}[{i}]")
            elif value:
                out.append({"field": prefix, "message": str(value)})
    return out


class SubmitApi(_MyAnnotationMixin, APIView):
    @extend_schema(
        parameters=[ROUND_PARAM],
        request=SubmitIn,
        responses={
            200: AnnotationOut,
            **REFUSALS,
            409: OpenApiResponse(ConflictOut, description="Stale revision: the stored state, nothing changed."),
        },
        description="Submit my annotation (every mode needs present/absent). Submitting again changes nothing.",
    )
    def post(self, request, slug, pk):
        trace, version, round = self.target(request, pk)
        data = SubmitIn(data=request.data)
        if not data.is_valid():
            return Response({"detail": "Send the revision you submit.", "errors": _flat(data.errors)}, 400)
        annotation = annotation_find(trace=trace, user=request.user, taxonomy_version=version, round=round)
        try:
            if annotation is None:
                raise AnnotationInvalid("Nothing to submit: this annotation has not been saved yet.")
            with transaction.atomic():
                annotation = annotation_submit(
                    annotation=annotation, by=request.user, base_revision=data.validated_data["revision"]
                )
        except AnnotationConflict as exc:
            return self.conflict_out(exc, trace, version, round)
        snapshot = annotation_snapshot(annotation=annotation)
        return Response(_out(snapshot=snapshot, annotation=annotation, trace=trace, round=round, version=version))


class ReopenApi(_MyAnnotationMixin, APIView):
    @extend_schema(
        parameters=[ROUND_PARAM],
        request=SubmitIn,
        responses={
            200: AnnotationOut,
            **REFUSALS,
            409: OpenApiResponse(ConflictOut, description="Stale revision: the stored state, nothing changed."),
        },
        description="Reopen my submitted annotation so that it can be changed: it is a draft again (recorded in "
        "its history, counted as not submitted until submitted again). Reopening a draft changes nothing. "
        "Refused (403) once the round is in review or closed.",
    )
    def post(self, request, slug, pk):
        trace, version, round = self.target(request, pk)
        data = SubmitIn(data=request.data)
        if not data.is_valid():
            return Response({"detail": "Send the revision you reopen.", "errors": _flat(data.errors)}, 400)
        annotation = annotation_find(trace=trace, user=request.user, taxonomy_version=version, round=round)
        try:
            if annotation is None:
                raise AnnotationInvalid("Nothing to reopen: this annotation has not been saved yet.")
            annotation = annotation_reopen(
                annotation=annotation, by=request.user, base_revision=data.validated_data["revision"]
            )
        except AnnotationConflict as exc:
            return self.conflict_out(exc, trace, version, round)
        snapshot = annotation_snapshot(annotation=annotation)
        return Response(_out(snapshot=snapshot, annotation=annotation, trace=trace, round=round, version=version))


class HistoryApi(_MyAnnotationMixin, generics.ListAPIView):
    """Every accepted change of my annotation, oldest first, with the state before and after."""

    serializer_class = EventOut

    @extend_schema(parameters=[ROUND_PARAM])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        trace, version, round = self.target(self.request, self.kwargs["pk"])
        annotation = annotation_find(trace=trace, user=self.request.user, taxonomy_version=version, round=round)
        if annotation is None:
            return AnnotationEvent.objects.none()
        return annotation_history(annotation=annotation)


class OpenCodeListApi(ProjectScopedMixin, generics.ListAPIView):
    """The project's open codes, most used first (?q= filters by substring)."""

    serializer_class = OpenCodeOut
    capability = "view"

    @extend_schema(parameters=[OpenApiParameter("q", str, description="Substring to look for.")])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        return open_code_list(project=self.project, user=self.request.user, q=self.request.query_params.get("q", ""))


class VisibleAnnotationListApi(ProjectScopedMixin, generics.ListAPIView):
    """Other raters' annotations of the trace, only those the blind rule lets me see.

    While the trace is in a draft or open round, an annotator sees none (not even LLM
    suggestions); suggestions from non-human raters appear outside rounds when the project
    reveals them; a round's labels appear once it is in review, if the round allows it.
    """

    serializer_class = VisibleAnnotationOut
    capability = "view"

    def get_queryset(self):
        trace = trace_get(project=self.project, pk=self.kwargs["pk"])
        return trace_annotations_visible(user=self.request.user, project=self.project, trace=trace)


class _Chain:
    """Two querysets paginated as one sequence (round work first, then the traces outside rounds)."""

    def __init__(self, first, second):
        self.first, self.second = first, second
        self._n_first = None

    def n_first(self) -> int:
        if self._n_first is None:
            self._n_first = self.first.count()
        return self._n_first

    def count(self) -> int:
        return self.n_first() + self.second.count()

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, key):
        if not isinstance(key, slice):
            return self[key : key + 1][0]
        start, stop = key.start or 0, key.stop
        n = self.n_first()
        head = list(self.first[start:stop]) if start < n else []
        tail_start, tail_stop = max(0, start - n), (None if stop is None else max(0, stop - n))
        tail = list(self.second[tail_start:tail_stop]) if tail_stop is None or tail_stop > tail_start else []
        return head + tail


class QueueApi(generics.ListAPIView):
    """My queue: round work first (open or in review rounds I annotate), then the traces of my
    projects I may label outside rounds (drafts, then to do, then submitted)."""

    serializer_class = QueueItemOut

    @extend_schema(
        parameters=[
            OpenApiParameter("project", str, description="Only this project (slug)."),
            OpenApiParameter("status", str, enum=["todo", "draft", "submitted"], description="Only this status."),
        ]
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        params = self.request.query_params
        project = None
        if params.get("project"):
            project, _ = project_get_for_user(user=self.request.user, slug=params["project"])
        status_filter = params.get("status", "")
        if status_filter not in ("", "todo", "draft", "submitted"):
            status_filter = ""
        user = self.request.user
        return _Chain(
            queue_round_items(user=user, project=project, status=status_filter),
            queue_trace_items(user=user, project=project, status=status_filter),
        )
