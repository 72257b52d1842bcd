"""Project and account pages. Trace list, viewer and import pages live in viewer_views.py."""

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST
from rest_framework.authtoken.models import Token

from taxonomy.models import TaxonomyVersion
from traces.models import Membership
from traces.projects.overview import project_overview, project_status_panels
from traces.projects.selectors import project_get_for_user, project_list_for_user, project_members
from traces.projects.services import (
    membership_remove,
    membership_set,
    project_create,
    project_settings_update,
    project_working_version_set,
)

User = get_user_model()


@login_required
def home(request):
    projects = project_list_for_user(user=request.user)
    return render(request, "traces/projects/home.html", {"projects": projects, "nav": "projects"})


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=200)
    slug = forms.SlugField(
        max_length=80, required=False, help_text="Short name for URLs and commands; from the name if empty."
    )
    description = forms.CharField(widget=forms.Textarea, required=False)


@login_required
@require_http_methods(["GET", "POST"])
def project_new(request):
    if not (request.user.is_staff or request.user.has_perm("traces.add_project")):
        raise PermissionDenied("Only site admins create projects.")
    form = ProjectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            project = project_create(by=request.user, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Project {project.name} created.")
            return redirect("project_detail", slug=project.slug)
    return render(request, "traces/projects/new.html", {"form": form, "nav": "projects"})


@login_required
def project_detail(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug)
    return render(
        request,
        "traces/projects/detail.html",
        {
            "project": project,
            "role": role,
            "nav": "projects",
            "tab": "overview",
            "panels": project_status_panels(project=project, user=request.user, role=role),
            **project_overview(project=project),
        },
    )


class ProjectSettingsForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    taxonomy_version = forms.ModelChoiceField(
        queryset=TaxonomyVersion.objects.none(),
        label="Working taxonomy version",
        help_text="What annotators label with outside rounds, and what the dashboard, agreed labels, judge runs, "
        "releases and exports show by default. Labels of other versions are mapped onto it.",
    )
    reveal_suggestions = forms.BooleanField(
        required=False,
        label="Reveal suggestions",
        help_text="Outside rounds, show annotators the labels of non-human raters (LLM judges, imported labels) as "
        "suggestions. Never applies to traces of a draft or open round.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["taxonomy_version"].queryset = (
            TaxonomyVersion.objects.filter(status=TaxonomyVersion.Status.PUBLISHED)
            .select_related("taxonomy")
            .order_by("taxonomy__name", "number")
        )
        self.fields["taxonomy_version"].label_from_instance = lambda v: v.label


@login_required
@require_http_methods(["GET", "POST"])
def project_settings_page(request, slug):
    """Managers change the project's name, description, working version and suggestions."""
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    initial = {
        "name": project.name,
        "description": project.description,
        "taxonomy_version": project.taxonomy_version,
        "reveal_suggestions": project.reveal_suggestions,
    }
    if request.method == "GET" and request.GET.get("taxonomy_version"):
        initial["taxonomy_version"] = request.GET["taxonomy_version"]  # "make it the working version" links
    form = ProjectSettingsForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        before = project.taxonomy_version
        try:
            project_settings_update(project=project, by=request.user, **form.cleaned_data)
        except ValidationError as exc:
            for field, errors in getattr(exc, "message_dict", {None: exc.messages}).items():
                for error in errors:
                    form.add_error(field if field in form.fields else None, error)
        else:
            if before != project.taxonomy_version:
                messages.success(
                    request, f"Settings saved. The working version is now {project.taxonomy_version.label}."
                )
            else:
                messages.success(request, "Settings saved.")
            return redirect("project_settings", slug=project.slug)
    return render(
        request,
        "traces/projects/settings.html",
        {"project": project, "role": role, "form": form, "nav": "projects", "tab": "settings"},
    )


class MemberForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Membership.Role.choices)


@login_required
@require_http_methods(["GET", "POST"])
def project_members_page(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug)
    form = MemberForm(request.POST or None)
    if request.method == "POST":
        project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
        try:
            if "remove" in request.POST:
                user = User.objects.get(username=request.POST["remove"])
                membership_remove(project=project, user=user)
                messages.success(request, f"{user.username} removed.")
                return redirect("project_members", slug=slug)
            if form.is_valid():
                user = User.objects.filter(username=form.cleaned_data["username"]).first()
                if user is None:
                    form.add_error("username", "No user with this username.")
                else:
                    membership_set(project=project, user=user, role=form.cleaned_data["role"])
                    messages.success(request, f"{user.username} is now {form.cleaned_data['role']}.")
                    return redirect("project_members", slug=slug)
        except (ValidationError, User.DoesNotExist) as exc:
            messages.error(request, "; ".join(getattr(exc, "messages", [str(exc)])))
    return render(
        request,
        "traces/projects/members.html",
        {
            "project": project,
            "role": role,
            "members": project_members(project=project),
            "form": form,
            "nav": "projects",
            "tab": "members",
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def profile(request):
    token = Token.objects.filter(user=request.user).first()
    if request.method == "POST":
        if token:
            token.delete()
        token = Token.objects.create(user=request.user)
        messages.success(request, "A new API token was created; the old one no longer works.")
        return redirect("profile")
    memberships = request.user.memberships.select_related("project").order_by("project__name")
    return render(request, "traces/projects/profile.html", {"token": token, "memberships": memberships})


@login_required
@require_POST
def project_working_version_page(request, slug):
    """The one-click offer (a published revision's page): make ``version`` the working version."""
    project, _role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    raw = request.POST.get("version", "")
    version = TaxonomyVersion.objects.filter(pk=int(raw)).first() if raw.isdigit() else None
    if version is None:
        messages.error(request, f"No taxonomy version with id {raw[:20]!r}.")
        return redirect("project_settings", slug=slug)
    try:
        project_working_version_set(project=project, version=version, by=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{project.name} now works on {version.label}.")
    nxt = request.POST.get("next", "")
    if nxt and url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()}):
        return redirect(nxt)
    return redirect("project_detail", slug=slug)
