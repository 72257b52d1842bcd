"""The open-codes page: the codebook with its uses, and (managers) rename, merge, promote.

GET  p/<slug>/codes/[?q=]                 every code: uses, traces, raters, modes beside it, promotion
GET  p/<slug>/codes/<id>/                 one code: its uses (trace, steps, rater, modes, rationale)
POST p/<slug>/codes/<id>/rename/          name=
POST p/<slug>/codes/<id>/merge/           into=<code id>   (this code is folded into the other)
GET/POST p/<slug>/codes/<id>/promote/     a new mode, or extend a mode, in the next version's draft
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotations.codes.selectors import (
    open_code_codebook,
    open_code_get,
    open_code_overview,
    open_code_seed,
    open_code_uses,
    promote_draft,
    promote_sources,
    promote_targets,
)
from annotations.codes.services import open_code_merge, open_code_promote, open_code_rename
from annotations.labels.selectors import open_code_list
from annotations.models import OpenCode
from traces.projects.selectors import project_get_for_user

PER_PAGE = 100  # codes per page of the list


def _errors(exc: ValidationError) -> str:
    return " ".join(exc.messages)


def _code_or_404(*, project, user, pk: int) -> OpenCode:
    code = open_code_get(project=project, user=user, code_id=pk)
    if code is None:
        raise Http404("No such open code.")
    return code


@login_required
@require_GET
def code_list(request: HttpRequest, slug: str) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug)
    q = request.GET.get("q", "").strip()[:80]
    # the codebook is read once (hundreds of rows, not thousands) and paged here: a COUNT of the
    # same aggregate would cost as much as the list itself
    codebook = list(open_code_codebook(project=project, user=request.user, q=q))
    page = Paginator(codebook, PER_PAGE).get_page(request.GET.get("page"))
    rows = open_code_overview(project=project, user=request.user, codes=list(page.object_list))
    return render(
        request,
        "annotations/codes/list.html",
        {
            "project": project,
            "role": role,
            "rows": rows,
            "page": page,
            "q": q,
            "n_hidden": sum(r.n_hidden for r in rows),
            "nav": "projects",
        },
    )


@login_required
@require_GET
def code_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug)
    code = _code_or_404(project=project, user=request.user, pk=pk)
    uses = open_code_uses(project=project, user=request.user, code=code)
    others = []
    if role == "manager":
        others = list(open_code_list(project=project, user=request.user).exclude(pk=code.pk).values_list("pk", "name"))
    n_uses = open_code_list(project=project, user=request.user).filter(pk=code.pk).values_list("n_uses", flat=True)
    return render(
        request,
        "annotations/codes/detail.html",
        {
            "project": project,
            "role": role,
            "code": code,
            "uses": uses,
            "n_uses": n_uses[0] if n_uses else 0,
            "others": others,
            "nav": "projects",
        },
    )


@login_required
@require_POST
def code_rename(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    code = _code_or_404(project=project, user=request.user, pk=pk)
    old = code.name
    try:
        n = open_code_rename(project=project, code=code, name=request.POST.get("name", ""), by=request.user)
    except ValidationError as exc:
        messages.error(request, _errors(exc))
    else:
        code.refresh_from_db()
        messages.success(request, f"Renamed '{old}' to '{code.name}' ({n} annotation{'s' if n != 1 else ''}).")
    return redirect("annotations:code_detail", slug=slug, pk=pk)


@login_required
@require_POST
def code_merge(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, _role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    code = _code_or_404(project=project, user=request.user, pk=pk)
    raw = request.POST.get("into", "")
    into = _code_or_404(project=project, user=request.user, pk=int(raw)) if raw.isdigit() else None
    if into is None:
        messages.error(request, "Pick the code to merge into.")
        return redirect("annotations:code_detail", slug=slug, pk=pk)
    try:
        n = open_code_merge(project=project, codes=[code], into=into, by=request.user)
    except ValidationError as exc:
        messages.error(request, _errors(exc))
        return redirect("annotations:code_detail", slug=slug, pk=pk)
    messages.success(request, f"Merged '{code.name}' into '{into.name}' ({n} annotation{'s' if n != 1 else ''}).")
    return redirect("annotations:code_detail", slug=slug, pk=into.pk)


class PromoteForm(forms.Form):
    how = forms.ChoiceField(
        choices=[("add", "Add a new failure mode"), ("extend", "Extend an existing mode's definition")],
        widget=forms.RadioSelect,
        initial="add",
    )
    mode_code = forms.CharField(label="Code of the new mode", max_length=10, required=False)
    name = forms.CharField(label="Name of the new mode", max_length=200, required=False)
    extend = forms.ChoiceField(label="Mode to extend", required=False)
    definition = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False)
    examples = forms.CharField(
        label="Examples (seeded from the code's uses)", widget=forms.Textarea(attrs={"rows": 9}), required=False
    )

    def clean(self):
        data = super().clean()
        if data.get("how") == "add":
            for f in ("mode_code", "name", "definition"):
                if not (data.get(f) or "").strip():
                    self.add_error(f, "Needed for a new mode.")
        elif not data.get("extend"):
            self.add_error("extend", "Pick the mode to extend.")
        return data


def _free_codes(modes) -> list[str]:
    """The next free code in each category (1.6, 2.7, 3.4 on MAST v1)."""
    by_cat: dict[str, list[int]] = {}
    for m in modes:
        head, _, tail = m.code.partition(".")
        by_cat.setdefault(m.category.code, [])
        if head == m.category.code and tail.isdigit():
            by_cat[m.category.code].append(int(tail))
    return [f"{cat}.{max(nums or [0]) + 1}" for cat, nums in by_cat.items()]


@login_required
@require_http_methods(["GET", "POST"])
def code_promote(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    code = _code_or_404(project=project, user=request.user, pk=pk)
    sources = promote_sources(project=project)
    raw = request.POST.get("source") or request.GET.get("source") or ""
    # by default, the version whose next draft is already started (promotions meet in one draft)
    started = next((v for v in reversed(sources) if promote_draft(source=v)), sources[0] if sources else None)
    source = next((v for v in sources if str(v.pk) == raw), started)
    draft = promote_draft(source=source)
    modes = promote_targets(source=source, draft=draft)
    uses = open_code_uses(project=project, user=request.user, code=code)
    free = _free_codes(modes)
    initial = {
        "mode_code": free[0] if free else "",
        "name": code.name[:1].upper() + code.name[1:],
        "examples": open_code_seed(code=code, uses=uses),
    }
    extend = next((m for m in modes if m.code == request.GET.get("extend")), None)
    if extend is not None:  # "extend this mode" links start from its definition
        initial |= {"how": "extend", "extend": extend.code, "definition": extend.definition}
    form = PromoteForm(request.POST or None, initial=initial)
    form.fields["extend"].choices = [("", "—")] + [(m.code, f"{m.code} {m.name}") for m in modes]
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            mode = open_code_promote(
                project=project,
                code=code,
                by=request.user,
                mode_code=d["mode_code"] if d["how"] == "add" else "",
                name=d["name"],
                definition=d["definition"],
                extend=d["extend"] if d["how"] == "extend" else "",
                examples=d["examples"],
                source=source,
            )
        except ValidationError as exc:
            form.add_error(None, _errors(exc))
        else:
            verb = "added as" if d["how"] == "add" else "extends"
            messages.success(
                request,
                f"'{code.name}' {verb} {mode.code} {mode.name} in the draft {mode.version.label}. "
                "A round on that draft labels it; opening the round publishes the draft.",
            )
            return redirect("annotations:code_detail", slug=slug, pk=pk)
    definitions = {m.code: m.definition for m in modes}
    return render(
        request,
        "annotations/codes/promote.html",
        {
            "project": project,
            "role": role,
            "code": code,
            "form": form,
            "draft": draft,
            "source": source,
            "sources": sources,
            "free": free,
            "modes": modes,
            "definitions": definitions,
            "n_uses": len(uses),
            "nav": "projects",
        },
    )
