"""HTML pages of calibration rounds: list, create (with an htmx sample preview), detail and
progress, and the agreement report (the disagreement pages, with adjudication, discussion and
"revise this definition", are in ``views.disagreements``). Views parse input, call one service or
selector, render.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from annotations.models import Annotation, Round, RoundTrace
from annotations.rounds import report as presentation
from annotations.rounds.attribution.report import attribution_context
from annotations.rounds.mode_rater import mode_rater_view, stored_prevalence
from annotations.rounds.sampling import STRATA_FIELDS, round_sample_preview
from annotations.rounds.selectors import (
    project_annotator_choices,
    rater_set_parse,
    round_access,
    round_extra_raters,
    round_get,
    round_kappa_trend,
    round_list_for_project,
    round_modes,
    round_open_disagreement_count,
    round_progress,
    round_require_agreement_access,
    round_versions_for_project,
)
from annotations.rounds.services import (
    agreement_report_get,
    round_create,
    round_create_next,
    round_settings_update,
    round_transition,
)
from taxonomy.models import TaxonomyVersion
from traces.models import Project
from traces.projects.selectors import project_get_for_user

User = get_user_model()


def _errors(exc: ValidationError) -> str:
    return " ".join(exc.messages)


# --------------------------------------------------------------------------------------
# List
# --------------------------------------------------------------------------------------


@login_required
def round_list(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug)
    rounds = list(round_list_for_project(project=project, user=request.user))
    for r in rounds:
        r.headline = presentation.number(r.headline_kappa)
        expected = (r.n_traces or 0) * (r.n_annotators or 0)
        r.percent = int(100 * (r.n_submitted or 0) / expected) if expected else 0
    return render(
        request,
        "annotations/rounds/list.html",
        {
            "project": project,
            "role": role,
            "rounds": rounds,
            "trend": presentation.trend_chart(round_kappa_trend(project=project, user=request.user))
            if rounds
            else None,
            "trend_imported": presentation.trend_chart(
                round_kappa_trend(project=project, user=request.user, imported=True)
            )
            if any(r.imported_from for r in rounds)
            else None,
            "nav": "projects",
        },
    )


# --------------------------------------------------------------------------------------
# Create (with an htmx sample preview)
# --------------------------------------------------------------------------------------


class RoundForm(forms.Form):
    name = forms.CharField(max_length=200)
    taxonomy_version = forms.ModelChoiceField(
        queryset=TaxonomyVersion.objects.none(),
        help_text="Frozen for the round: a draft version is published when the round opens.",
    )
    annotators = forms.ModelMultipleChoiceField(
        queryset=User.objects.none(), widget=forms.CheckboxSelectMultiple, help_text="Two or more."
    )
    method = forms.ChoiceField(
        choices=[("random", "Random sample"), ("stratified", "Stratified sample"), ("manual", "Pick traces by id")],
        initial="stratified",
        widget=forms.RadioSelect,
    )
    n = forms.IntegerField(label="Sample size", min_value=1, required=False, initial=10)
    seed = forms.IntegerField(label="Seed", required=False, initial=1, help_text="Same seed, same sample.")
    stratify_by = forms.ChoiceField(
        label="Stratify by",
        choices=[(k, k.capitalize() if k != "llm" else "LLM") for k in STRATA_FIELDS],
        required=False,
    )
    trace_ids = forms.CharField(
        label="Trace ids", required=False, help_text="For a hand-picked round: ids separated by spaces or commas."
    )
    kind = forms.ChoiceField(
        label="Measures",
        choices=[
            (Round.Kind.MODES, "Failure modes (and attribution, where annotators give it)"),
            (Round.Kind.ATTRIBUTION, "Failure attribution only: the mode labels are context"),
        ],
        initial=Round.Kind.MODES,
        required=False,
        help_text="Decides which agreement trend the round joins: failure-mode kappa or attribution agreement.",
    )
    reveal_in_review = forms.BooleanField(
        required=False, initial=True, label="Annotators see each other's labels once the review starts"
    )
    make_working_version = forms.BooleanField(
        required=False,
        initial=True,
        label="Move the project to this version if it is newer than the working version",
        help_text="At once for a published version; when the round opens (and publishes it) for a draft.",
    )

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["taxonomy_version"].queryset = round_versions_for_project(project=project)
        self.fields["taxonomy_version"].label_from_instance = lambda v: f"{v.label} ({v.get_status_display()})"
        self.fields["annotators"].queryset = project_annotator_choices(project=project)

    def clean_trace_ids(self) -> list[int]:
        raw = self.cleaned_data.get("trace_ids") or ""
        out = []
        for part in raw.replace(",", " ").split():
            if not part.isdigit():
                raise forms.ValidationError(f"{part!r} is not a trace id.")
            out.append(int(part))
        return out

    def sampling_kwargs(self) -> dict[str, Any]:
        d = self.cleaned_data
        return {
            "method": d.get("method") or "random",
            "n": d.get("n") or 0,
            "seed": d.get("seed") if d.get("seed") is not None else 0,
            "stratify_by": d.get("stratify_by") or "framework",
            "trace_ids": d.get("trace_ids") or [],
        }


@login_required
@require_http_methods(["GET", "POST"])
def round_new(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    initial: dict[str, Any] = {"taxonomy_version": project.taxonomy_version_id}
    # The form opens on a stratified sample by framework: its default size takes one trace per
    # framework at least and no more than the project holds, so the preview never opens on an error
    # ("needs at least one trace per stratum", "larger than the number of traces").
    counts = project.traces.aggregate(n=Count("id"), frameworks=Count("mas_name", distinct=True))
    initial["n"] = min(max(10, counts["frameworks"]), counts["n"]) or 10
    if (request.GET.get("taxonomy_version") or "").isdigit():  # "start the next round on the revised draft"
        initial["taxonomy_version"] = int(request.GET["taxonomy_version"])
    after = request.GET.get("after")
    if after and after.isdigit():
        prev = Round.objects.filter(project=project, pk=int(after)).first()
        if prev:
            nxt = round_create_next(round=prev)
            initial.update(
                taxonomy_version=nxt["taxonomy_version"],
                kind=nxt["kind"],
                annotators=nxt["annotators"],
                method="manual",
                trace_ids=" ".join(map(str, nxt["trace_ids"])),
                name=f"{prev.name} (follow-up)",
            )
    form = RoundForm(request.POST or None, project=project, initial=initial)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            rnd = round_create(
                project=project,
                name=d["name"],
                taxonomy_version=d["taxonomy_version"],
                annotators=list(d["annotators"]),
                reveal_in_review=d["reveal_in_review"],
                make_working_version=d["make_working_version"],
                kind=d["kind"] or Round.Kind.MODES,
                by=request.user,
                **form.sampling_kwargs(),
            )
        except ValidationError as exc:
            form.add_error(None, _errors(exc))
        else:
            moved = ""
            if rnd.makes_working_version:
                moved = f" Opening it makes {rnd.taxonomy_version.label} the working version."
            elif Project.objects.get(pk=project.pk).taxonomy_version_id != project.taxonomy_version_id:
                moved = f" The working version is now {rnd.taxonomy_version.label}."
            messages.success(request, f"{rnd.title} created as a draft. Open it when you are ready.{moved}")
            return redirect("annotations:round_detail", slug=slug, pk=rnd.pk)
    return render(
        request,
        "annotations/rounds/new.html",
        {"project": project, "role": role, "form": form, "nav": "projects", "n_traces": counts["n"]},
    )


@login_required
@require_http_methods(["GET", "POST"])
def round_preview(request: HttpRequest, slug: str) -> HttpResponse:
    """htmx: the traces the create form would put in the round."""
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    # always bound (an empty GET too), so ``cleaned_data`` exists for ``sampling_kwargs``
    form = RoundForm(request.POST if request.method == "POST" else request.GET, project=project)
    form.is_valid()  # name/annotators may still be empty: only the sampling fields matter here
    ctx: dict[str, Any] = {"project": project}
    if any(f in form.errors for f in ("n", "seed", "trace_ids")):
        ctx["error"] = " ".join(str(e) for f in ("n", "seed", "trace_ids") for e in form.errors.get(f, []))
    else:
        try:
            ctx["preview"] = round_sample_preview(project=project, **form.sampling_kwargs())
        except ValidationError as exc:
            ctx["error"] = _errors(exc)
    return render(request, "annotations/rounds/_preview.html", ctx)


# --------------------------------------------------------------------------------------
# Detail and state changes
# --------------------------------------------------------------------------------------

MY_TRACES_PER_PAGE = 50
STEPS = [("draft", "Draft"), ("open", "Blind labelling"), ("review", "Review & adjudication"), ("closed", "Closed")]


@login_required
def round_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug)
    rnd = round_get(project=project, round_id=pk)
    access = round_access(user=request.user, round=rnd)
    details = access.can_manage and access.can_see_report
    progress = round_progress(round=rnd, details=details, page=request.GET.get("page"))
    page = progress.page
    my_traces, my_page, my_counts = [], None, {}
    if access.is_annotator and rnd.state in (Round.State.OPEN, Round.State.REVIEW):
        # a page of her traces (a round of 20,000 listed them all), and her counts over the round
        my_page = Paginator(
            RoundTrace.objects.filter(round=rnd)
            .select_related("trace")
            .only("order", "trace__id", "trace__title", "trace__external_id", "trace__mas_name")
            .order_by("order", "pk"),
            MY_TRACES_PER_PAGE,
        ).get_page(request.GET.get("mine"))
        ids = [rt.trace_id for rt in my_page]
        own = Annotation.objects.filter(round=rnd, rater__user=request.user)
        mine = dict(own.filter(trace_id__in=ids).values_list("trace_id", "state"))
        my_traces = [(rt.trace, mine.get(rt.trace_id, "")) for rt in my_page]
        my_counts = own.aggregate(
            submitted=Count("pk", filter=Q(state=Annotation.State.SUBMITTED)),
            draft=Count("pk", filter=Q(state=Annotation.State.DRAFT)),
        )
        my_counts["todo"] = my_page.paginator.count - my_counts["submitted"] - my_counts["draft"]
    reached = [s for s, _ in STEPS].index(rnd.state)
    return render(
        request,
        "annotations/rounds/detail.html",
        {
            "project": project,
            "role": role,
            "round": rnd,
            "access": access,
            "progress": progress,
            "page": page,
            "my_traces": my_traces,
            "my_page": my_page,
            "my_counts": my_counts,
            "steps": [(key, label, i < reached, i == reached) for i, (key, label) in enumerate(STEPS)],
            "open_disagreements": (
                round_open_disagreement_count(round=rnd, user=request.user) if rnd.state == Round.State.REVIEW else 0
            ),
            "next_versions": list(
                TaxonomyVersion.objects.filter(parent=rnd.taxonomy_version)
                .select_related("taxonomy")
                .order_by("number")
            ),
            "nav": "projects",
        },
    )


@login_required
@require_POST
def round_action(request: HttpRequest, slug: str, pk: int, action: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    rnd = round_get(project=project, round_id=pk)
    try:
        if action == "reveal":
            round_settings_update(
                round=rnd, reveal_in_review=request.POST.get("reveal_in_review") == "1", by=request.user
            )
            messages.success(request, "Saved.")
        elif action in ("open", "review", "close"):
            to = {"open": "open", "review": "review", "close": "closed"}[action]
            round_transition(
                round=rnd,
                to=to,
                by=request.user,
                with_majority=request.POST.get("with_majority") == "1",
                force=request.POST.get("force") == "1",
            )
            messages.success(request, f"Round {rnd.name} is now {rnd.get_state_display().lower()}.")
        else:
            raise PermissionDenied("Unknown action.")
    except ValidationError as exc:
        messages.error(request, _errors(exc))
    return redirect("annotations:round_detail", slug=slug, pk=pk)


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


@login_required
def round_report_page(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug)
    rnd = round_get(project=project, round_id=pk)
    access = round_require_agreement_access(user=request.user, round=rnd)
    extra_ids: list[int] = []
    raw = request.GET.getlist("rater")
    if raw:
        extra_ids = [int(r) for r in raw if r.isdigit()]
    elif request.GET.get("raters"):
        try:
            extra_ids = rater_set_parse(request.GET["raters"])
        except ValidationError as exc:
            messages.error(request, _errors(exc))
    try:
        report = agreement_report_get(round=rnd, extra_rater_ids=extra_ids)
    except ValidationError as exc:
        messages.error(request, _errors(exc))
        extra_ids = []
        report = agreement_report_get(round=rnd)
    round_modes_by_code = {m.code: m for m in round_modes(version=rnd.taxonomy_version)}
    return render(
        request,
        "annotations/rounds/report.html",
        {
            "project": project,
            "role": role,
            "round": rnd,
            "access": access,
            "report": report,
            "extra_raters": round_extra_raters(round=rnd),
            "selected": set(extra_ids),
            "rater_set": report.rater_set,
            "trend": presentation.trend_chart(round_kappa_trend(project=project, user=request.user)),
            "attribution": attribution_context(report.data.get("attribution")),
            "trend_imported": presentation.trend_chart(
                round_kappa_trend(project=project, user=request.user, imported=True)
            ),
            "nav": "projects",
            "mode_rater": mode_rater_view(
                report.data,
                prevalence=stored_prevalence(report.data),
                names={c: m.name for c, m in round_modes_by_code.items()},
            ),
            **presentation.report_context(
                report.data,
                modes=round_modes_by_code,
                categories={c.code: c.name for c in rnd.taxonomy_version.categories.all()},
            ),
        },
    )
