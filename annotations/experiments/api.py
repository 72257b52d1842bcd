"""Experiments API: two cohorts compared per mode (JSON; CSV or LaTeX with ``download=csv|tex``). Thin."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.analytics.selectors import AGREED
from annotations.experiments.exports import DOWNLOADS
from annotations.experiments.selectors import experiment_as_dict, experiment_compare, experiment_sources
from annotations.experiments.views import experiment_download
from traces.api_errors import QueryParamError
from traces.projects.permissions import ProjectScopedMixin

_COHORT_HELP = (
    "Conditions joined by ';': mas_name:VALUE, llm_name:VALUE, benchmark:VALUE, meta.KEY:VALUE, "
    "imported:YYYY-MM-DD..YYYY-MM-DD (either side may be empty)."
)


class ExperimentCompareApi(ProjectScopedMixin, APIView):
    """Cohort A against cohort B per failure mode and category, and task success: each share with
    its Wilson interval, the difference B - A with Newcombe's interval, the score test's p-value
    and the p-value adjusted across modes, the smallest change (up or down) the sample sizes could detect,
    and the paired analysis over tasks that ran in both cohorts."""

    @extend_schema(
        parameters=[
            OpenApiParameter("a", str, required=True, description=_COHORT_HELP),
            OpenApiParameter("b", str, required=True, description=_COHORT_HELP),
            OpenApiParameter(
                "rater", str, description='"agreed" (default), the id of a rater you may see, or corrected:<judge id>.'
            ),
            OpenApiParameter("correction", str, enum=["holm", "bh"], description="Across modes; default holm."),
            OpenApiParameter(
                "download", str, enum=["csv", "tex"], description="As a CSV file or a LaTeX (booktabs) table."
            ),
        ],
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT),
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
            (200, "application/x-tex"): OpenApiResponse(OpenApiTypes.STR),
        },
    )
    def get(self, request, slug):
        params = request.query_params
        source = params.get("rater") or AGREED
        if source not in {s for s, _ in experiment_sources(user=request.user, project=self.project)}:
            raise QueryParamError(
                "rater", f"no rater {source[:40]!r} you may see; use 'agreed', a rater id or corrected:<judge id>"
            )
        try:
            exp = experiment_compare(
                user=request.user, project=self.project, a=params.get("a", ""), b=params.get("b", ""),
                source=source, correction=params.get("correction") or "holm",
            )  # fmt: skip
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from None
        if params.get("download") in DOWNLOADS:
            return experiment_download(exp, params["download"], self.project.slug)
        return Response(experiment_as_dict(exp))
