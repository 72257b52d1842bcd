"""The judge's self-agreement and drift through the API (managers): the numbers the page and its
downloads show (``reliability.reliability_json``)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.judge.reliability import judge_run_pair, judge_self_agreement, reliability_json
from annotations.models import JudgeRun
from traces.projects.permissions import ProjectScopedMixin


class IntervalStatOut(serializers.Serializer):
    """A statistic with its 95% bootstrap interval, or why it is undefined (value null)."""

    value = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    undefined = serializers.CharField(allow_null=True)


class ReliabilityRunOut(serializers.Serializer):
    id = serializers.IntegerField()
    rater = serializers.CharField(allow_null=True)
    model = serializers.CharField()
    prompt_version = serializers.IntegerField(allow_null=True)
    use_cache = serializers.BooleanField(help_text="Whether the run answered traces from the cache")
    created_at = serializers.DateTimeField()


class AgreementRowOut(serializers.Serializer):
    n_traces = serializers.IntegerField(help_text="Traces both runs answered (none from the cache)")
    both_present = serializers.IntegerField()
    only_earlier = serializers.IntegerField()
    only_later = serializers.IntegerField()
    both_absent = serializers.IntegerField()
    kappa = IntervalStatOut(help_text="Cohen's kappa between the runs, 95% bootstrap interval; undefined says why")
    agreement = IntervalStatOut()
    reliable = serializers.BooleanField(help_text="False below 20 traces: the interval is not a reliable 95% one")
    prevalence_earlier = serializers.FloatField(allow_null=True)
    prevalence_later = serializers.FloatField(allow_null=True)
    prevalence_change = IntervalStatOut(help_text="later - earlier share present, 95% bootstrap interval")
    prevalence_moved = serializers.BooleanField(help_text="The change's interval excludes 0")


class ModeRowOut(AgreementRowOut):
    code = serializers.CharField()
    name = serializers.CharField()
    human_kappa = IntervalStatOut(allow_null=True, help_text="The humans' mean pairwise kappa (null: humans.why_not)")


class HumanRoundOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class HumansOut(serializers.Serializer):
    round = HumanRoundOut(allow_null=True, help_text="The latest closed round on the version")
    why_not = serializers.CharField(allow_null=True, help_text="Why there is no human figure")
    overall_kappa = IntervalStatOut(allow_null=True)


class VersionRefOut(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()


class LeftOutOut(serializers.Serializer):
    cached = serializers.IntegerField(help_text="Traces one of the runs answered from the cache")
    hidden = serializers.IntegerField(help_text="Traces hidden from the viewer by the blind rule")
    only_earlier = serializers.IntegerField()
    only_later = serializers.IntegerField()


class ReliabilityOut(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["self", "drift"], help_text="self: the same judge run twice")
    changes = serializers.ListField(child=serializers.CharField(), help_text="What differs (drift)")
    earlier = ReliabilityRunOut()
    later = ReliabilityRunOut()
    taxonomy_version = VersionRefOut()
    n_traces = serializers.IntegerField()
    left_out = LeftOutOut()
    problems = serializers.ListField(child=serializers.CharField(), help_text="Why no number can be given")
    n_boot = serializers.IntegerField()
    min_reliable_traces = serializers.IntegerField()
    humans = HumansOut()
    pooled = AgreementRowOut()
    modes = ModeRowOut(many=True)


class JudgeReliabilityApi(ProjectScopedMixin, APIView):
    """The run against another run of the same prompt and taxonomy version: per mode, Cohen's kappa
    between them (the judge's self-agreement when it is the same judge, its drift on a new model
    version) and the change in prevalence, beside the humans' kappa of the latest closed round.

    ``?against=<run id>``; without it, the run it follows (or the run that follows it)."""

    capability = "manage"

    @extend_schema(
        parameters=[OpenApiParameter("against", OpenApiTypes.INT, description="the other run (default: see above)")],
        responses={200: ReliabilityOut},
    )
    def get(self, request, slug, run_id):
        raw = request.query_params.get("against")
        against = None
        if raw not in (None, ""):
            try:
                against = int(raw)
            except ValueError:
                raise ValidationError({"against": f"{raw!r} is not a run id"}) from None
        try:
            run, other = judge_run_pair(project=self.project, run_id=run_id, against=against)
        except JudgeRun.DoesNotExist as exc:
            raise Http404(str(exc)) from exc
        result = judge_self_agreement(project=self.project, user=request.user, run_a=run, run_b=other)
        return Response(reliability_json(result))
