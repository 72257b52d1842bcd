"""Pages of the LLM judge (managers): runs, a new run, live progress, quality, prompt versions."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotations.judge.connections import connection_list
from annotations.judge.excluded import cross_fit_note
from annotations.judge.prompting import PLACEHOLDERS
from annotations.judge.prompts import prompt_template_active, prompt_template_save
from annotations.judge.providers.base import adaptations_describe
from annotations.judge.runs import judge_run_cancel, judge_run_create, judge_run_resume, judge_run_resume_blocked
from annotations.judge.selectors import (
    judge_items,
    judge_quality,
    judge_run_get,
    judge_run_list,
    judge_run_progress,
    prompt_versions,
)
from annotations.models import JudgeItem, JudgeRun, Round
from taxonomy.models import TaxonomyVersion
from traces.projects.selectors import project_get_for_user


def _manager_project(request, slug):
    return project_get_for_user(user=request.user, slug=slug, capability="manage")


def _run_or_404(project, run_id):
    try:
        return judge_run_get(project=project, run_id=run_id)
    except JudgeRun.DoesNotExist:
        raise Http404("No such judge run.")


class RunForm(forms.Form):
    provider = forms.ChoiceField(
        choices=[
            ("baseline", "Baseline classifier (no API key; TF-IDF + logistic regression)"),
            ("openai", "LLM with the project's prompt (JSON answers, evidence steps)"),
            ("mast", "MAST official judge: the MAST authors' prompt and parser (agentdash), @@ answers"),
        ],
        widget=forms.RadioSelect,
        initial="openai",
    )
    connection = forms.ChoiceField(
        required=False,
        label="Connection",
        help_text="A server of the project's Connections page (its key and prices), or none to give a URL here.",
    )
    taxonomy_version = forms.ChoiceField(
        required=False, label="Taxonomy version", help_text="Any published version; empty: the project's."
    )
    base_url = forms.CharField(
        required=False,
        label="Base URL",
        help_text="Any OpenAI-compatible server: vLLM, Ollama, LiteLLM, OpenAI…",
    )
    model = forms.CharField(required=False, help_text="e.g. o1, gpt-4o-mini, llama3.1")
    api_key_env = forms.CharField(
        required=False,
        label="API key environment variable",
        help_text="The NAME of a variable listed in MAST_JUDGE_API_KEYS; the key itself is never stored.",
    )
    traces = forms.ChoiceField(label="Traces")
    concurrency = forms.IntegerField(min_value=1, max_value=64, initial=8, help_text="Calls in flight at once.")
    temperature = forms.FloatField(min_value=0, max_value=2, initial=0.0)
    max_tokens = forms.IntegerField(min_value=64, max_value=100_000, initial=2000)
    timeout = forms.FloatField(min_value=1, max_value=3600, initial=120, help_text="Seconds per request.")
    budget_tokens = forms.IntegerField(required=False, min_value=1, label="Budget: max tokens")
    budget_cost = forms.DecimalField(required=False, min_value=0, decimal_places=4, label="Budget: max cost")
    price_in = forms.DecimalField(
        required=False,
        min_value=0,
        decimal_places=4,
        label="Price per 1M input tokens",
        help_text="Empty: the connection's",
    )
    price_out = forms.DecimalField(
        required=False,
        min_value=0,
        decimal_places=4,
        label="Price per 1M output tokens",
        help_text="Empty: the connection's",
    )
    few_shot = forms.BooleanField(required=False, label="Add few-shot examples from the project's adjudicated labels")
    # A checkbox that is on for the exception (an unticked box is not sent, so the default is "off").
    fresh = forms.BooleanField(
        required=False,
        label="Ask the model again for every trace (no cache): a re-run that measures the judge's self-agreement",
    )

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        conns = list(connection_list(project=project))
        self.connections = {str(c.pk): c for c in conns}
        self.fields["connection"].choices = [("", "None: give a base URL below")] + [
            (str(c.pk), f"{c.name} ({c.base_url})") for c in conns
        ]
        if conns and not self.is_bound:
            self.initial["connection"] = str(conns[0].pk)
            self.initial["model"] = (conns[0].models_list or [""])[0]
        versions = list(
            TaxonomyVersion.objects.filter(status=TaxonomyVersion.Status.PUBLISHED)
            .select_related("taxonomy")
            .order_by("taxonomy__name", "-number")
        )
        self.versions = {str(v.pk): v for v in versions}
        self.fields["taxonomy_version"].choices = [("", "The project's version")] + [
            (str(v.pk), v.label) for v in versions
        ]
        if project.taxonomy_version_id and not self.is_bound:
            # default: the project's working version (Project.taxonomy_version)
            self.initial["taxonomy_version"] = str(project.taxonomy_version_id)
        choices = [("all", "All traces"), ("unlabelled", "Unlabelled traces (no human labels, no agreed labels)")]
        for rnd in Round.objects.filter(project=project).order_by("-created_at")[:50]:
            choices.append((f"round:{rnd.pk}", f"Traces of round “{rnd.name}” ({rnd.get_state_display()})"))
        self.fields["traces"].choices = choices


@login_required
def judge_list(request, slug):
    project, role = _manager_project(request, slug)
    runs = judge_run_list(project=project)
    page = Paginator(runs, 25).get_page(request.GET.get("page"))
    prompt = None
    if project.taxonomy_version:
        prompt = prompt_versions(taxonomy_version=project.taxonomy_version).filter(is_active=True).first()
    return render(
        request,
        "annotations/judge/list.html",
        {
            "project": project,
            "role": role,
            "page_obj": page,
            "runs": page.object_list,
            "prompt": prompt,
            "nav": "projects",
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def judge_run_new(request, slug):
    project, role = _manager_project(request, slug)
    form = RunForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = judge_run_create(
                project=project,
                by=request.user,
                provider=data["provider"],
                connection=form.connections.get(data["connection"] or ""),
                taxonomy_version=form.versions.get(data["taxonomy_version"] or ""),
                base_url=data["base_url"] or "",
                model=data["model"] or "",
                api_key_env=data["api_key_env"] or "",
                temperature=data["temperature"],
                max_tokens=data["max_tokens"],
                timeout=data["timeout"],
                traces=data["traces"],
                concurrency=data["concurrency"],
                budget_tokens=data["budget_tokens"],
                budget_cost=data["budget_cost"],
                price_in=data["price_in"],
                price_out=data["price_out"],
                few_shot=data["few_shot"],
                use_cache=not data["fresh"],
            )
        except ValidationError as exc:
            if hasattr(exc, "error_dict"):
                for field, errs in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errs)
            else:
                form.add_error(None, exc)
        else:
            messages.success(request, f"Judge run {run.pk} queued over {run.n_total} traces.")
            return redirect("annotations:judge_run", slug=project.slug, run_id=run.pk)
    return render(
        request, "annotations/judge/new.html", {"project": project, "role": role, "form": form, "nav": "projects"}
    )


def _run_context(request, project, run) -> dict:
    """What the run page's live part shows: progress and the current page of items."""
    state = request.GET.get("state") or ""
    if state and state not in JudgeItem.State.values:
        state = ""
    items = judge_items(run=run, state=state or None)
    page = Paginator(items, 50).get_page(request.GET.get("page"))
    return {
        "project": project,
        "run": run,
        "progress": judge_run_progress(run=run),
        "page_obj": page,
        "items": page.object_list,
        "state": state,
        "item_states": JudgeItem.State.choices,
        "querystring_prefix": f"state={state}&" if state else "",
        "resume_blocked": judge_run_resume_blocked(run=run),
        "cross_fitted": cross_fit_note(run),
    }


@login_required
def judge_run_page(request, slug, run_id):
    project, role = _manager_project(request, slug)
    run = _run_or_404(project, run_id)
    context = _run_context(request, project, run)
    context["adaptations"] = adaptations_describe(run.dropped_params or [])
    return render(request, "annotations/judge/run.html", {**context, "role": role, "nav": "projects"})


@login_required
def judge_run_progress_fragment(request, slug, run_id):
    """The live part of the run page, polled every second while the run is active: the progress card,
    and the items table swapped out of band (``hx-swap-oob``), so the table moves with the summary
    and the last poll leaves both in their final state (no reload)."""
    project, role = _manager_project(request, slug)
    run = _run_or_404(project, run_id)
    context = _run_context(request, project, run)
    progress = render_to_string("annotations/judge/_progress.html", context, request=request)
    items = render_to_string("annotations/judge/_items.html", {**context, "oob": True}, request=request)
    return HttpResponse(progress + items)


@login_required
@require_POST
def judge_run_action(request, slug, run_id, action):
    project, role = _manager_project(request, slug)
    run = _run_or_404(project, run_id)
    try:
        if action == "cancel":
            judge_run_cancel(run=run, by=request.user)
            messages.success(request, "Run cancelled: calls in flight finish, nothing new is sent. Resume any time.")
        elif action == "resume":
            judge_run_resume(run=run, by=request.user)
            messages.success(request, "Run resumed.")
        else:
            raise Http404("No such action.")
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    return redirect("annotations:judge_run", slug=project.slug, run_id=run.pk)


@login_required
def judge_item_page(request, slug, run_id, item_id):
    project, role = _manager_project(request, slug)
    run = _run_or_404(project, run_id)
    item = JudgeItem.objects.select_related("trace").filter(run=run, pk=item_id).first()
    if item is None:
        raise Http404("No such item.")
    return render(
        request,
        "annotations/judge/item.html",
        {"project": project, "role": role, "run": run, "item": item, "nav": "projects"},
    )


@login_required
def judge_quality_page(request, slug, run_id):
    project, role = _manager_project(request, slug)
    run = _run_or_404(project, run_id)
    quality = judge_quality(run=run, user=request.user)
    rounds = []
    if run.rater_id:
        rounds = list(
            Round.objects.filter(
                project=project, taxonomy_version=run.taxonomy_version, round_traces__trace_id__in=run.trace_ids
            )
            .distinct()
            .order_by("-created_at")[:10]
        )
    try:
        round_report_url = bool(rounds) and bool(reverse("annotations:round_report", args=[project.slug, rounds[0].pk]))
    except NoReverseMatch:  # the rounds pages are not installed in this build
        round_report_url = False
    return render(
        request,
        "annotations/judge/quality.html",
        {
            "project": project,
            "role": role,
            "run": run,
            "q": quality,
            "attribution": quality["attribution"],
            "rounds": rounds,
            "round_report_url": round_report_url,
            "nav": "projects",
        },
    )


class PromptForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "false", "class": "mono"}))
    notes = forms.CharField(required=False, max_length=300, label="What changed (optional)")


@login_required
@require_http_methods(["GET", "POST"])
def judge_prompt_page(request, slug):
    project, role = _manager_project(request, slug)
    version = project.taxonomy_version
    if version is None:
        raise Http404("The project has no taxonomy version.")
    active = prompt_template_active(taxonomy_version=version, by=request.user)
    versions = prompt_versions(taxonomy_version=version)
    shown = active
    if request.GET.get("v"):
        shown = versions.filter(number=request.GET["v"]).first() or active
    form = PromptForm(request.POST or None, initial={"text": shown.text})
    if request.method == "POST" and form.is_valid():
        try:
            saved = prompt_template_save(
                taxonomy_version=version,
                text=form.cleaned_data["text"],
                by=request.user,
                notes=form.cleaned_data["notes"],
            )
        except ValidationError as exc:
            for errs in exc.message_dict.values():
                form.add_error("text", errs)
        else:
            if saved.pk == active.pk:
                messages.info(request, "No change: the prompt is the same as the active version.")
            else:
                messages.success(request, f"Saved as prompt v{saved.number}; new runs use it.")
            return redirect("annotations:judge_prompt", slug=project.slug)
    return render(
        request,
        "annotations/judge/prompt.html",
        {
            "project": project,
            "role": role,
            "form": form,
            "versions": versions,
            "active": active,
            "shown": shown,
            "placeholders": PLACEHOLDERS,
            "nav": "projects",
        },
    )
