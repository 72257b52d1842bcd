"""Output (and query-input) serializers of the trace list and viewer API. Raw text is never in JSON."""

from rest_framework import serializers

from traces.models import Step, Trace
from traces.viewer.selectors import OUTCOMES, SORTS, STEPS_WINDOW_MAX, agent_hue


class TraceListIn(serializers.Serializer):
    framework = serializers.CharField(required=False, allow_blank=True, max_length=300)
    llm = serializers.CharField(required=False, allow_blank=True, max_length=300)
    benchmark = serializers.CharField(required=False, allow_blank=True, max_length=300)
    outcome = serializers.ChoiceField(choices=OUTCOMES, required=False, allow_blank=True)
    labelled = serializers.ChoiceField(choices=["yes", "no"], required=False, allow_blank=True)
    q = serializers.CharField(required=False, allow_blank=True, max_length=300, help_text="external id, title or task")
    sort = serializers.ChoiceField(choices=list(SORTS), required=False, default="newest")
    page = serializers.IntegerField(required=False, min_value=1)


class TraceListOut(serializers.ModelSerializer):
    framework = serializers.CharField(source="mas_name")
    llm = serializers.CharField(source="llm_name")
    task_head = serializers.CharField(help_text="first 160 characters of the task")
    is_labelled = serializers.BooleanField(help_text="has at least one submitted annotation")

    class Meta:
        model = Trace
        fields = [
            "id",
            "external_id",
            "title",
            "framework",
            "llm",
            "benchmark",
            "format",
            "outcome",
            "size_bytes",
            "n_steps",
            "n_agents",
            "n_lines",
            "task_head",
            "is_labelled",
            "imported_at",
        ]


class TraceDetailOut(serializers.ModelSerializer):
    framework = serializers.CharField(source="mas_name")
    llm = serializers.CharField(source="llm_name")
    stats = serializers.SerializerMethodField()

    class Meta:
        model = Trace
        fields = [
            "id",
            "external_id",
            "title",
            "framework",
            "llm",
            "benchmark",
            "task",
            "format",
            "outcome",
            "size_bytes",
            "content_hash",
            "metadata",
            "agents",
            "stats",
            "imported_at",
        ]

    def get_stats(self, trace: Trace) -> dict[str, int]:
        return {
            "steps": trace.n_steps,
            "agents": trace.n_agents,
            "agent_switches": trace.n_agent_switches,
            "chars": trace.n_chars,
            "lines": trace.n_lines,
            "repeated_steps": trace.n_repeated_steps,
        }


class StepsWindowIn(serializers.Serializer):
    start = serializers.IntegerField(required=False, default=0, min_value=0, help_text="first step index (0-based)")
    limit = serializers.IntegerField(required=False, default=50, min_value=1, max_value=STEPS_WINDOW_MAX)
    max_lines = serializers.IntegerField(
        required=False, min_value=1, help_text="stop once the window holds this many lines (at least one step)"
    )


class StepOut(serializers.ModelSerializer):
    hue = serializers.SerializerMethodField(help_text="the agent's colour hue (0-359), -1 for no agent")

    class Meta:
        model = Step
        fields = [
            "id",
            "index",
            "agent",
            "recipient",
            "kind",
            "line_start",
            "line_end",
            "content",
            "hue",
            *Step.TREE_FIELDS,
        ]
        extra_kwargs = {
            "parent_index": {"help_text": "index of the parent step (span-based formats), null at the top"},
            "recipient": {"help_text": "whom the step addresses, where the format names it; empty otherwise"},
        }

    def get_hue(self, step: Step) -> int:
        hues = self.context.get("hues")
        return hues.get(step.agent, -1) if hues is not None else agent_hue(step.agent)


class StepsWindowOut(serializers.Serializer):
    start = serializers.IntegerField()
    total = serializers.IntegerField(help_text="steps in the trace")
    next_start = serializers.IntegerField(allow_null=True, help_text="start of the following window, null at the end")
    steps = StepOut(many=True)


class SearchIn(serializers.Serializer):
    q = serializers.CharField(max_length=300, trim_whitespace=False)
    around = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text="the reader's step: the answer then carries `window`, the steps around the first hit at or after it",
    )


class SearchHitOut(serializers.Serializer):
    step = serializers.IntegerField(help_text="step index")
    line = serializers.IntegerField(help_text="line number in the raw text, 1-based")
    col = serializers.IntegerField(help_text="character offset of the match in that line")
    snippet = serializers.CharField()


class SearchWindowOut(serializers.Serializer):
    hit = serializers.IntegerField(help_text="index in `hits` of the first hit at or after `around`")
    steps = StepOut(many=True)


class SearchOut(serializers.Serializer):
    q = serializers.CharField()
    count = serializers.IntegerField()
    truncated = serializers.BooleanField(help_text="true when the hit cap was reached")
    hits = SearchHitOut(many=True)
    window = SearchWindowOut(
        required=False, help_text="with `around` and at least one hit: the steps that show the first hit after it"
    )


class StepTreeOut(serializers.Serializer):
    """Per step i: parent p[i] (-1 at the top), model models[m[i]] (-1: none), tokens tin[i]/tout[i] and
    duration ms[i] (-1: not given)."""

    p = serializers.ListField(child=serializers.IntegerField())
    models = serializers.ListField(child=serializers.CharField())
    m = serializers.ListField(child=serializers.IntegerField())
    tin = serializers.ListField(child=serializers.IntegerField())
    tout = serializers.ListField(child=serializers.IntegerField())
    ms = serializers.ListField(child=serializers.IntegerField())


class OutlineOut(serializers.Serializer):
    """Every step in parallel lists: step i has agent agents[a[i]], kind kinds[k[i]], lines ls[i]..le[i]."""

    agents = serializers.ListField(child=serializers.CharField(allow_blank=True))
    kinds = serializers.ListField(child=serializers.CharField())
    hues = serializers.ListField(child=serializers.IntegerField(), help_text="per agent")
    a = serializers.ListField(child=serializers.IntegerField())
    k = serializers.ListField(child=serializers.IntegerField())
    ls = serializers.ListField(child=serializers.IntegerField())
    le = serializers.ListField(child=serializers.IntegerField())
    tree = StepTreeOut(required=False, help_text="span-based traces only: the step tree")
