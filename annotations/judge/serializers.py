"""Serializers of the judge API: nested Input / Output classes per operation."""

from rest_framework import serializers

from annotations.judge.selectors import judge_run_progress
from annotations.models import JudgeItem, JudgeRun, PromptTemplate, ProviderConnection
from taxonomy.models import TaxonomyVersion


class JudgeRunOut(serializers.ModelSerializer):
    rater = serializers.CharField(source="rater.name", default=None, read_only=True, allow_null=True)
    prompt_version = serializers.IntegerField(source="prompt.number", default=None, read_only=True, allow_null=True)
    created_by = serializers.CharField(source="created_by.username", default=None, read_only=True, allow_null=True)
    percent = serializers.IntegerField(read_only=True)
    state = serializers.CharField(read_only=True, help_text="queued, running, paused (cancelled), done or failed")
    remaining = serializers.IntegerField(source="n_remaining", read_only=True)

    class Meta:
        model = JudgeRun
        fields = [
            "id",
            "provider",
            "base_url",
            "model",
            "api_key_env",
            "temperature",
            "max_tokens",
            "timeout",
            "prompt_version",
            "few_shot",
            "use_cache",
            "selection",
            "concurrency",
            "budget_tokens",
            "budget_cost",
            "price_in",
            "price_out",
            "json_mode",
            "rater",
            "rater_id",
            "state",
            "error",
            "n_total",
            "n_done",
            "n_failed",
            "n_cached",
            "n_truncated",
            "remaining",
            "percent",
            "tokens_in",
            "tokens_out",
            "tokens_reasoning",
            "cost",
            "estimate",
            "dropped_params",
            "connection",
            "taxonomy_version",
            "baseline_info",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]


class JudgeRunIn(serializers.Serializer):
    provider = serializers.ChoiceField(choices=JudgeRun.Provider.choices)
    connection = serializers.PrimaryKeyRelatedField(
        queryset=ProviderConnection.objects.all(),
        required=False,
        allow_null=True,
        default=None,
        help_text="A connection of the project (base URL, key and prices); base_url and api_key_env stay empty.",
    )
    taxonomy_version = serializers.PrimaryKeyRelatedField(
        queryset=TaxonomyVersion.objects.filter(status=TaxonomyVersion.Status.PUBLISHED),
        required=False,
        allow_null=True,
        default=None,
        help_text="Any published taxonomy version (default: the project's).",
    )
    base_url = serializers.CharField(required=False, allow_blank=True, default="")
    model = serializers.CharField(required=False, allow_blank=True, default="")
    api_key_env = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Name of the environment variable holding the key (never the key).",
    )
    temperature = serializers.FloatField(required=False, default=0.0)
    max_tokens = serializers.IntegerField(required=False, default=2000, min_value=1)
    timeout = serializers.FloatField(required=False, default=120.0)
    traces = serializers.JSONField(
        required=False,
        default="all",
        help_text='"all", "unlabelled", "round:<id>" or a filter object {mas_name, llm_name, benchmark, outcome, ids}.',
    )
    concurrency = serializers.IntegerField(required=False, default=4, min_value=1)
    budget_tokens = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1)
    budget_cost = serializers.DecimalField(
        required=False, allow_null=True, default=None, max_digits=12, decimal_places=4
    )
    price_in = serializers.DecimalField(
        required=False,
        allow_null=True,
        default=None,
        max_digits=10,
        decimal_places=4,
        help_text="Default: the connection's, else 0",
    )
    price_out = serializers.DecimalField(
        required=False,
        allow_null=True,
        default=None,
        max_digits=10,
        decimal_places=4,
        help_text="Default: the connection's, else 0",
    )
    few_shot = serializers.BooleanField(required=False, default=False)
    use_cache = serializers.BooleanField(
        required=False,
        default=True,
        help_text="False: ask the model again for every trace (a re-run measuring the judge's self-agreement).",
    )
    baseline_source = serializers.CharField(
        required=False, default="auto", help_text="Baseline only: auto, agreed or rater:<id>."
    )


class JudgeProgressOut(serializers.Serializer):
    state = serializers.CharField()
    state_label = serializers.CharField()
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    cached = serializers.IntegerField()
    truncated = serializers.IntegerField()
    remaining = serializers.IntegerField()
    percent = serializers.IntegerField()
    rate_per_min = serializers.FloatField(allow_null=True)
    eta_seconds = serializers.IntegerField(allow_null=True)
    elapsed_seconds = serializers.IntegerField(allow_null=True)
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    tokens_reasoning = serializers.IntegerField()
    cost = serializers.CharField()
    error = serializers.CharField()
    active = serializers.BooleanField()


class JudgeRunDetailOut(JudgeRunOut):
    progress = serializers.SerializerMethodField()

    class Meta(JudgeRunOut.Meta):
        fields = [*JudgeRunOut.Meta.fields, "progress"]

    def get_progress(self, run) -> JudgeProgressOut:

        return JudgeProgressOut(judge_run_progress(run=run).as_dict()).data


class JudgeItemOut(serializers.ModelSerializer):
    trace_title = serializers.CharField(source="trace.display_name", read_only=True)
    state = serializers.CharField(read_only=True, help_text="pending, running, done or failed")

    class Meta:
        model = JudgeItem
        fields = [
            "id",
            "trace_id",
            "trace_title",
            "state",
            "attempts",
            "raw_answer",
            "parsed",
            "tokens_in",
            "tokens_out",
            "tokens_reasoning",
            "latency_ms",
            "cost",
            "cached",
            "error",
            "truncated",
            "truncation",
            "annotation_id",
            "finished_at",
        ]


class StatOut(serializers.Serializer):
    value = serializers.FloatField(allow_null=True)
    undefined = serializers.CharField(allow_null=True)


class ScoresOut(serializers.Serializer):
    n = serializers.IntegerField()
    tp = serializers.IntegerField()
    fp = serializers.IntegerField()
    fn = serializers.IntegerField()
    tn = serializers.IntegerField()
    accuracy = StatOut()
    precision = StatOut()
    recall = StatOut()
    f1 = StatOut()
    kappa = StatOut()


class ModeScoresOut(ScoresOut):
    code = serializers.CharField()
    name = serializers.CharField()


class DisagreementModeOut(serializers.Serializer):
    code = serializers.CharField()
    human = serializers.CharField()
    judge = serializers.CharField()
    rationale = serializers.CharField(allow_blank=True)
    confidence = serializers.FloatField(allow_null=True)


class DisagreementOut(serializers.Serializer):
    trace_id = serializers.IntegerField()
    title = serializers.CharField()
    n = serializers.IntegerField()
    modes = DisagreementModeOut(many=True)


class AttributionRatioOut(serializers.Serializer):
    value = serializers.FloatField(allow_null=True, help_text="hit / n; null when n is 0")
    hit = serializers.IntegerField(help_text="Traces the judge named correctly")
    n = serializers.IntegerField(help_text="Answered traces whose reference gives this level")
    undefined = serializers.CharField(allow_null=True, help_text="Why value is null, else null")


class AttributionQualityOut(serializers.Serializer):
    agent = AttributionRatioOut(help_text="Agent-level accuracy (Who&When): the responsible agent named correctly")
    step = AttributionRatioOut(help_text="Step-level accuracy (Who&When): the decisive step named exactly")
    references = serializers.DictField(
        child=serializers.IntegerField(),
        help_text='Traces compared per reference: "agreed" (closed rounds) or an imported rater\'s name',
    )
    n_without_attribution = serializers.IntegerField(
        help_text="Traces the judge answered without an attribution (counted wrong)"
    )


class JudgeQualityOut(serializers.Serializer):
    run = serializers.IntegerField()
    rater = serializers.CharField(allow_null=True)
    rater_kind = serializers.CharField(allow_null=True)
    rater_id = serializers.IntegerField(allow_null=True)
    in_sample = serializers.BooleanField(
        help_text="True for a baseline from before cross-fitting with training traces not recorded (in-sample)."
    )
    n_excluded_traces = serializers.IntegerField(
        help_text="Traces of the run left out of the scores because the judge saw their labels (few-shot examples)."
    )
    excluded_reason = serializers.CharField(allow_blank=True)
    cross_fitted = serializers.CharField(
        allow_blank=True, help_text="For a baseline: its scores on training traces are cross-fitted (k-fold)."
    )
    n_agreed_traces = serializers.IntegerField()
    taxonomy_version = serializers.CharField(help_text="The version the run labelled: every number is on it.")
    reference_via_mapping = serializers.IntegerField(
        help_text="Agreed labels carried onto that version from other versions through the recorded mappings."
    )
    reference_unknown = serializers.IntegerField(help_text="Agreed units the mapping cannot decide (left out).")
    n_compared_traces = serializers.IntegerField(required=False)
    modes = ModeScoresOut(many=True)
    overall = ScoresOut(allow_null=True)
    disagreements = DisagreementOut(many=True)
    attribution = AttributionQualityOut(
        allow_null=True,
        help_text="Failure attribution against the reference attributions, as on the quality page; "
        "null when no trace of the run has a reference attribution.",
    )


class PromptOut(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None, read_only=True, allow_null=True)
    taxonomy_version = serializers.CharField(source="taxonomy_version.label", read_only=True)

    class Meta:
        model = PromptTemplate
        fields = ["id", "number", "taxonomy_version", "text", "notes", "is_active", "created_by", "created_at"]


class PromptIn(serializers.Serializer):
    text = serializers.CharField()
    notes = serializers.CharField(required=False, allow_blank=True, default="")
