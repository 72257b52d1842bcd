"""Rounds API: rounds of a project, state changes, assignments, disagreements, adjudications,
comments, the agreement report and the project's agreed labels. Thin views over the services
and selectors of ``annotations.rounds.services`` / ``annotations.rounds.selectors``.

Blind rule: while a round is open, annotators get their own assignments only and a 403 on the
report and disagreements; labels shown anywhere pass through ``annotations_visible_to``. An
earlier round sharing traces with a draft or open one lists no row of them (consensus,
disagreements, comments) to whoever is blind on them, and its agreement report is withheld.
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.labels.visibility import blind_trace_ids, round_work_visible_to
from annotations.models import Annotation, DisagreementComment, Round, RoundAnnotator, RoundTrace
from annotations.rounds.agreed import AgreedLabel, agreed_labels, agreed_labels_on_version
from annotations.rounds.disagreements import round_adjudications, round_disagreements
from annotations.rounds.sampling import round_sample_preview
from annotations.rounds.selectors import (
    rater_set_parse,
    round_access,
    round_list_for_project,
    round_require_agreement_access,
    round_require_report_access,
    round_require_trace_shown,
)
from annotations.rounds.serializers import (
    AgreedLabelOut,
    AgreementReportOut,
    RoundAdjudicationIn,
    RoundAdjudicationOut,
    RoundAssignmentOut,
    RoundCommentIn,
    RoundCommentOut,
    RoundCreateIn,
    RoundDisagreementOut,
    RoundOut,
    RoundSampleIn,
    RoundSampleOut,
    RoundTransitionIn,
)
from annotations.rounds.services import (
    adjudication_record,
    agreement_report_get,
    agreement_report_json,
    annotator_users,
    disagreement_comment_add,
    round_create,
    round_transition,
)
from annotations.rounds.targets import target_version_resolve
from taxonomy.models import FailureMode, TaxonomyVersion
from traces.api_errors import QueryParamError
from traces.projects.permissions import ProjectScopedMixin
from traces.projects.selectors import project_get_for_user


class RoundScopedMixin:
    """Views under /api/rounds/<id>/...: self.round, self.project, self.role (404 for non-members)."""

    capability = "view"
    round: Round

    def initial(self, request: Request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        rnd = Round.objects.select_related("project", "taxonomy_version__taxonomy").filter(pk=kwargs["pk"]).first()
        if rnd is None:
            raise Http404("No such round.")
        capability = self.capability
        if isinstance(capability, dict):
            capability = capability.get(request.method, capability.get("*", "view"))
        self.project, self.role = project_get_for_user(user=request.user, slug=rnd.project.slug, capability=capability)
        self.round = rnd


class RoundListApi(ProjectScopedMixin, generics.ListAPIView):
    """Rounds of a project (all members); POST creates a draft round (managers)."""

    serializer_class = RoundOut
    capability = {"GET": "view", "POST": "manage"}

    def get_queryset(self):
        return round_list_for_project(project=self.project, user=self.request.user).select_related("project")

    @extend_schema(request=RoundCreateIn, responses={201: RoundOut})
    def post(self, request: Request, slug: str) -> Response:
        data = RoundCreateIn(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        version = TaxonomyVersion.objects.filter(pk=d["taxonomy_version"]).first()
        if version is None:
            return Response({"detail": f"No taxonomy version {d['taxonomy_version']}."}, status=400)
        rnd = round_create(
            project=self.project,
            name=d["name"],
            taxonomy_version=version,
            annotators=annotator_users(project=self.project, usernames=d["annotators"]),
            method=d["method"],
            n=d["n"],
            seed=d["seed"],
            stratify_by=d["stratify_by"],
            trace_ids=d["trace_ids"],
            reveal_in_review=d["reveal_in_review"],
            kind=d["kind"],
            by=request.user,
        )
        rounds = round_list_for_project(project=self.project, user=request.user)
        out = rounds.select_related("project").get(pk=rnd.pk)
        return Response(RoundOut(out).data, status=status.HTTP_201_CREATED)


class RoundSamplePreviewApi(ProjectScopedMixin, APIView):
    """The traces a round with these sampling settings would get (nothing is created)."""

    capability = "manage"

    @extend_schema(request=RoundSampleIn, responses={200: RoundSampleOut})
    def post(self, request: Request, slug: str) -> Response:
        data = RoundSampleIn(data=request.data)
        data.is_valid(raise_exception=True)
        preview = round_sample_preview(project=self.project, **data.validated_data)
        return Response(
            {
                "n": preview.n,
                "sampling": preview.sampling,
                "traces": [
                    {
                        "id": t.pk,
                        "title": t.display_name,
                        "framework": t.mas_name,
                        "benchmark": t.benchmark,
                        "llm": t.llm_name,
                    }
                    for t in preview.traces
                ],
            }
        )


class RoundDetailApi(RoundScopedMixin, generics.RetrieveAPIView):
    serializer_class = RoundOut

    def get_object(self):
        rounds = round_list_for_project(project=self.project, user=self.request.user)
        return rounds.select_related("project").get(pk=self.round.pk)


class RoundTransitionApi(RoundScopedMixin, APIView):
    """Move the round to its next state: draft -> open -> review -> closed (managers)."""

    capability = "manage"

    @extend_schema(request=RoundTransitionIn, responses={200: RoundOut})
    def post(self, request: Request, pk: int) -> Response:
        data = RoundTransitionIn(data=request.data)
        data.is_valid(raise_exception=True)
        round_transition(round=self.round, by=request.user, **data.validated_data)
        rounds = round_list_for_project(project=self.project, user=request.user)
        out = rounds.select_related("project").get(pk=self.round.pk)
        return Response(RoundOut(out).data)


class AssignmentListApi(RoundScopedMixin, generics.ListAPIView):
    """Who labels which trace and how far they are. Managers see everyone's; others see their own
    (plus everyone's once the report is open to them)."""

    serializer_class = RoundAssignmentOut

    def get_queryset(self):
        access = round_access(user=self.request.user, round=self.round)
        users = RoundAnnotator.objects.filter(round=self.round).select_related("user").order_by("user__username")
        if not access.can_see_report:
            users = users.filter(user=self.request.user)
        users = list(users)
        states = dict(
            ((u, t), s)
            for u, t, s in Annotation.objects.filter(
                round=self.round, rater__user__in=[a.user for a in users]
            ).values_list("rater__user_id", "trace_id", "state")
        )
        trace_ids = list(
            RoundTrace.objects.filter(round=self.round).order_by("order", "id").values_list("trace_id", flat=True)
        )
        return [
            {"annotator": a.user.username, "trace_id": t, "state": states.get((a.user_id, t), "todo")}
            for a in users
            for t in trace_ids
        ]


class DisagreementListApi(RoundScopedMixin, generics.ListAPIView):
    """Units where the raters differ, each rater's label side by side (blind rule applied)."""

    serializer_class = RoundDisagreementOut

    @extend_schema(
        parameters=[
            OpenApiParameter("status", str, enum=["all", "open", "decided"], description="Default all."),
            OpenApiParameter("mode", str, description="Only this mode code."),
        ]
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        round_require_report_access(user=self.request.user, round=self.round)
        status_ = self.request.query_params.get("status") or "all"
        if status_ not in ("all", "open", "decided"):
            raise QueryParamError("status", f"must be all, open or decided, not {status_[:40]!r}")
        return round_disagreements(
            round=self.round,
            user=self.request.user,
            mode_code=self.request.query_params.get("mode") or None,
            status=status_,
        )


class AdjudicationListApi(RoundScopedMixin, generics.ListAPIView):
    """The round's consensus rows; POST records the adjudicator's decision for one unit (managers)."""

    serializer_class = RoundAdjudicationOut
    capability = {"GET": "view", "POST": "manage"}

    def get_queryset(self):
        round_require_report_access(user=self.request.user, round=self.round)
        return round_adjudications(round=self.round, user=self.request.user)

    @extend_schema(request=RoundAdjudicationIn, responses={200: RoundAdjudicationOut})
    def post(self, request: Request, pk: int) -> Response:
        data = RoundAdjudicationIn(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        round_require_trace_shown(user=request.user, round=self.round, trace_id=d["trace_id"])
        adj = adjudication_record(
            round=self.round,
            trace=d["trace_id"],
            mode=d["mode"],
            decision=d["decision"],
            note=d["note"],
            by=request.user,
        )
        out = round_adjudications(round=self.round, user=request.user).get(pk=adj.pk)
        return Response(RoundAdjudicationOut(out).data)


class CommentListApi(RoundScopedMixin, generics.ListAPIView):
    """Discussion threads of the round's disagreements; POST adds a comment."""

    serializer_class = RoundCommentOut

    def get_queryset(self):
        round_require_report_access(user=self.request.user, round=self.round)
        comments = DisagreementComment.objects.filter(round=self.round)
        return (
            round_work_visible_to(user=self.request.user, round=self.round, qs=comments)
            .select_related("mode", "author")
            .order_by("created_at", "id")
        )

    @extend_schema(request=RoundCommentIn, responses={201: RoundCommentOut})
    def post(self, request: Request, pk: int) -> Response:
        round_require_report_access(user=request.user, round=self.round)
        data = RoundCommentIn(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        round_require_trace_shown(user=request.user, round=self.round, trace_id=d["trace_id"])
        c = disagreement_comment_add(
            round=self.round, trace=d["trace_id"], mode=d["mode"], body=d["body"], by=request.user
        )
        return Response(RoundCommentOut(c).data, status=status.HTTP_201_CREATED)


class AgreementApi(RoundScopedMixin, APIView):
    """The stored agreement report (recomputed first if the labels changed)."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "raters",
                OpenApiTypes.STR,
                description='"humans" (default) or "humans+<rater ids>" to add non-human raters.',
            )
        ],
        responses={200: AgreementReportOut},
    )
    def get(self, request: Request, pk: int) -> Response:
        round_require_agreement_access(user=request.user, round=self.round)
        extra = rater_set_parse(request.query_params.get("raters", "humans"))
        report = agreement_report_get(round=self.round, extra_rater_ids=extra)
        return Response(agreement_report_json(report=report))


class AgreedLabelListApi(ProjectScopedMixin, generics.ListAPIView):
    """The project's agreed labels: the consensus of its closed rounds.

    By default every label is carried onto the target version (``?target_version=``, default the
    working version) through the recorded mappings (``agreed_labels_on_version``); the response's
    ``mapping`` says how many labels came from which version and how many could not be mapped,
    and ``unknown`` how many (trace, mode) units the mapping could not decide. With
    ``?taxonomy_version=`` it lists only the labels recorded in that version, in its own codes.

    Traces now in a draft or open round (for a manager, only rounds they label in) are left out,
    as on the agreed-labels page: an earlier round's consensus beside a trace that is being
    labelled blind again would anchor its raters. ``withheld`` says how many traces that left out."""

    serializer_class = AgreedLabelOut
    _withheld = 0

    @extend_schema(
        parameters=[
            OpenApiParameter("taxonomy_version", int, description="Only this version's labels, unmapped."),
            OpenApiParameter("target_version", int, description="Map labels onto this version (default: working)."),
        ]
    )
    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        if isinstance(response.data, dict):
            response.data["withheld"] = self._withheld
        if getattr(self, "_mapped", None) is not None:
            response.data["target_version"] = self._mapped.target.pk
            response.data["mapping"] = self._mapped.mapping
            response.data["unknown"] = self._mapped.n_unknown
        return response

    def get_queryset(self):
        blind = set(blind_trace_ids(user=self.request.user, project=self.project).values_list("trace_id", flat=True))
        raw = self.request.query_params.get("taxonomy_version", "")
        if raw:
            try:
                version = target_version_resolve(project=self.project, raw=raw)
            except ValueError as exc:
                raise QueryParamError("taxonomy_version", str(exc)) from None
            labels = agreed_labels(project=self.project, taxonomy_version=version)
            self._withheld = len(blind & {a.trace_id for a in labels})
            return [a for a in labels if a.trace_id not in blind]
        try:
            target = target_version_resolve(project=self.project, raw=self.request.query_params.get("target_version"))
        except ValueError as exc:
            raise QueryParamError("target_version", str(exc)) from None
        self._mapped = mapped = agreed_labels_on_version(project=self.project, target=target)
        self._withheld = len(blind & set(mapped.labels))
        mode_ids = dict(FailureMode.objects.filter(version=target).values_list("code", "id"))
        return [
            AgreedLabel(
                tid, code, mode_ids[code], target.pk, "present" if v else "absent", mapped.basis[tid][code], None, ""
            )
            for tid in sorted(set(mapped.labels) - blind)
            for code, v in mapped.labels[tid].items()
        ]
