"""Release pages: list + create (managers), build progress (htmx polling), downloads."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotations.models import Release, Round
from annotations.releases import writers
from annotations.releases.selectors import (
    release_blind_for,
    release_filter_choices,
    release_get,
    release_list,
    release_may_download,
    release_members_may_download,
)
from annotations.releases.services import release_create, release_policy_set, release_retry, release_zip_file
from annotations.rounds.targets import target_version_choices
from taxonomy.models import TaxonomyVersion
from traces import storage
from traces.jobs import JobNotRetryable
from traces.projects.selectors import project_get_for_user


class ReleaseForm(forms.Form):
    title = forms.CharField(max_length=200, required=False)
    notes = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False, label="Notes for the card")
    selection = forms.ChoiceField(choices=Release.Selection.choices, initial="agreed", widget=forms.RadioSelect)
    round = forms.ModelChoiceField(queryset=Round.objects.none(), required=False, label="Round (closed)")
    mas_name = forms.MultipleChoiceField(required=False, label="Frameworks")
    llm_name = forms.MultipleChoiceField(required=False, label="LLMs")
    benchmark = forms.MultipleChoiceField(required=False, label="Benchmarks")
    taxonomy_version = forms.ModelChoiceField(queryset=TaxonomyVersion.objects.none(), label="Taxonomy version")
    majority = forms.BooleanField(
        required=False, label="Where there is no adjudication, use a majority vote (flagged as such)"
    )
    raters = forms.BooleanField(required=False, initial=True, label="Each rater's own labels (people pseudonymised)")
    judge = forms.BooleanField(required=False, initial=True, label="Judge labels (LLM judges and the offline baseline)")
    evidence = forms.BooleanField(required=False, initial=True, label="Evidence steps and rationales")
    trace_text = forms.BooleanField(required=False, initial=True, label="Trace text (otherwise references only)")
    formats = forms.MultipleChoiceField(
        choices=writers.FORMAT_CHOICES,
        initial=list(writers.FORMATS),
        widget=forms.CheckboxSelectMultiple,
    )

    def __init__(self, *args, project, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["round"].queryset = Round.objects.filter(project=project, state=Round.State.CLOSED)
        version = project.taxonomy_version
        # the versions connected to the working version by recorded mappings (labels reach them)
        self.fields["taxonomy_version"].queryset = target_version_choices(project=project)
        self.fields["taxonomy_version"].label_from_instance = lambda v: (
            f"{v.label} (working)" if v.pk == project.taxonomy_version_id else v.label
        )
        self.fields["taxonomy_version"].initial = version
        for key, values in release_filter_choices(project=project).items():
            self.fields[key].choices = [(v, v or "(unknown)") for v in values]


def _ctx(request, project, role, **extra):
    return {"project": project, "role": role, "nav": "projects", "tab": "releases", **extra}


@login_required
@require_http_methods(["GET", "POST"])
def release_list_page(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug)
    form = None
    if role == "manager":
        form = ReleaseForm(request.POST or None, project=project)
        if request.method == "POST" and form.is_valid():
            d = form.cleaned_data
            try:
                release = release_create(
                    project=project,
                    by=request.user,
                    selection=d["selection"],
                    round=d["round"],
                    filters={k: d[k] for k in ("mas_name", "llm_name", "benchmark") if d[k]},
                    options={k: d[k] for k in ("majority", "raters", "judge", "evidence", "trace_text", "formats")},
                    taxonomy_version=d["taxonomy_version"],
                    title=d["title"],
                    notes=d["notes"],
                )
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                if release.is_done:
                    messages.info(request, f"Nothing changed since release v{release.number}: no new release built.")
                else:
                    messages.success(request, f"Release v{release.number} is being built.")
                return redirect("annotations:release_list", slug=project.slug)
    elif request.method == "POST":
        raise PermissionDenied("Only managers create releases.")
    releases = list(release_list(project=project))
    return render(
        request,
        "annotations/releases/list.html",
        _ctx(
            request,
            project,
            role,
            form=form,
            releases=releases,
            may_download=release_may_download(project=project, role=role),
            policy=release_members_may_download(project=project),
        ),
    )


@login_required
@require_GET
def release_progress(request, slug, number):
    project, role = project_get_for_user(user=request.user, slug=slug)
    release = release_get(project=project, number=number)
    if release is None:
        raise Http404("No such release.")
    return render(
        request,
        "annotations/releases/_card.html",
        _ctx(request, project, role, r=release, may_download=release_may_download(project=project, role=role)),
    )


def _download_release(request, slug, number) -> Release:
    project, role = project_get_for_user(user=request.user, slug=slug)
    if not release_may_download(project=project, role=role):
        raise PermissionDenied("Only managers download releases in this project (a manager can allow members).")
    release = release_get(project=project, number=number)
    if release is None or not release.is_done:
        raise Http404("No such published release.")
    if why := release_blind_for(user=request.user, release=release):
        raise PermissionDenied(why)
    return release


@login_required
@require_GET
def release_download(request, slug, number):
    release = _download_release(request, slug, number)
    try:
        path, name = release_zip_file(release=release)
    except ValidationError as exc:
        raise Http404(str(exc))
    return storage.download_response(path, filename=name, content_type="application/zip")


@login_required
@require_GET
def release_file(request, slug, number, name):
    release = _download_release(request, slug, number)
    row = next((f for f in release.files.all() if f.name == name), None)
    if row is None:
        raise Http404("No such file in this release.")
    return storage.download_response(row.path, filename=row.name)


@login_required
@require_POST
def release_policy(request, slug):
    project, _role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    release_policy_set(project=project, by=request.user, members_may_download=request.POST.get("allow") == "1")
    messages.success(request, "Download permission saved.")
    return redirect("annotations:release_list", slug=project.slug)


@login_required
@require_POST
def release_retry_page(request, slug, number):
    """A failed release card's Retry button: build the same release (same number) again."""
    project, _role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    release = release_get(project=project, number=number)
    if release is None:
        raise Http404("No such release.")
    try:
        release_retry(release=release, by=request.user)
    except JobNotRetryable as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Release v{release.number} is being built again.")
    return redirect("annotations:release_list", slug=project.slug)
