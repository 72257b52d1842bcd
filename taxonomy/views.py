"""Taxonomy browser and editor pages. All writes go through taxonomy.services."""

import json

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, Max
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from taxonomy import services
from taxonomy.access import user_can_draft, version_adoption_offers, version_user_can_change
from taxonomy.cross_mapping import cross_mapping_automap, cross_mapping_choices, cross_mapping_set
from taxonomy.models import CrossMapping, Taxonomy, TaxonomyVersion
from taxonomy.selectors import taxonomy_list, version_diff, version_get, version_modes


def _version_or_404(slug, number):
    version = version_get(taxonomy_slug=slug, number=number)
    if version is None:
        raise Http404("No such taxonomy version.")
    return version


def _require_drafter(user):
    if not user_can_draft(user=user):
        raise PermissionDenied("Only project managers and site admins draft taxonomies.")


def _require_changer(user, version):
    if version.is_published:
        return  # the view says "published; draft a new version" instead
    if not version_user_can_change(user=user, version=version):
        raise PermissionDenied(
            f"{version.label} is a draft of another project: only its owner, the managers of the projects "
            "that use it and site admins change it. Draft your own version from it instead."
        )


def _errors(exc: ValidationError) -> str:
    return "; ".join(exc.messages)


@login_required
def taxonomy_list_page(request):
    return render(
        request,
        "taxonomy/list.html",
        {"taxonomies": taxonomy_list(), "can_edit": user_can_draft(user=request.user), "nav": "taxonomy"},
    )


@login_required
def version_page(request, slug, number):
    version = _version_or_404(slug, number)
    siblings = version.taxonomy.versions.order_by("number")
    return render(
        request,
        "taxonomy/version.html",
        {
            "version": version,
            "siblings": siblings,
            "can_edit": version_user_can_change(user=request.user, version=version),
            "can_draft": user_can_draft(user=request.user),
            "offers": version_adoption_offers(version=version, user=request.user),
            "nav": "taxonomy",
        },
    )


@login_required
def version_export_json(request, slug, number):
    version = _version_or_404(slug, number)
    response = JsonResponse(services.version_export(version=version), json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="{slug}-v{number}.json"'
    return response


@login_required
@require_POST
def version_draft_page(request, slug, number):
    _require_drafter(request.user)
    source = _version_or_404(slug, number)
    draft = services.version_draft_from(source=source, by=request.user, notes=request.POST.get("notes", ""))
    messages.success(request, f"Draft {draft.label} created from {source.label}. Edit it, then publish.")
    return redirect("taxonomy:version", slug=slug, number=draft.number)


@login_required
@require_POST
def version_publish_page(request, slug, number):
    _require_drafter(request.user)
    version = _version_or_404(slug, number)
    _require_changer(request.user, version)
    try:
        services.version_publish(version=version, by=request.user)
    except ValidationError as exc:
        messages.error(request, _errors(exc))
    else:
        messages.success(request, f"{version.label} is published and now frozen.")
        if version_adoption_offers(version=version, user=request.user):
            messages.info(request, "Make it the working version of your projects below, or keep the one they use.")
    return redirect("taxonomy:version", slug=slug, number=number)


class ModeForm(forms.Form):
    name = forms.CharField(max_length=200)
    definition = forms.CharField(widget=forms.Textarea)
    examples = forms.CharField(widget=forms.Textarea, required=False)
    counter_examples = forms.CharField(widget=forms.Textarea, required=False)
    what_to_try = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        label="What to try",
        help_text="Shown on the experiment page when this mode moves; empty: the category's note.",
    )
    note = forms.CharField(required=False, help_text="Why the change (kept in the mapping).")


class CategoryForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    what_to_try = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        label="What to try",
        help_text="What a team could change when this category's failures go up; shown beside a mode that moved.",
    )


def _draft_item_edit(request, slug, number, *, item_of, form_class, save, done: str, context: str):
    """The edit page of one item of a draft version (a mode, a category): ``item_of(version)`` finds
    it, the form starts from its fields, ``save(item, **cleaned)`` is the service; a published
    version is refused with a message."""
    _require_drafter(request.user)
    version = _version_or_404(slug, number)
    _require_changer(request.user, version)
    item = item_of(version)
    if version.is_published:
        messages.error(request, f"{version.label} is published; draft a new version to change it.")
        return redirect("taxonomy:version", slug=slug, number=number)
    initial = {f: getattr(item, f) for f in form_class.base_fields if f != "note"}
    form = form_class(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            save(item, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"{done} {item.code} updated.".strip())
            return redirect("taxonomy:version", slug=slug, number=number)
    ctx = {"version": version, context: item, "form": form, "nav": "taxonomy"}
    return render(request, "taxonomy/mode_edit.html", ctx)


@login_required
@require_http_methods(["GET", "POST"])
def mode_edit_page(request, slug, number, code):
    return _draft_item_edit(
        request, slug, number, item_of=lambda v: get_object_or_404(v.modes, code=code), form_class=ModeForm,
        save=lambda mode, **data: services.mode_edit(mode=mode, **data), done="", context="mode",
    )  # fmt: skip


@login_required
@require_http_methods(["GET", "POST"])
def category_edit_page(request, slug, number, code):
    return _draft_item_edit(
        request, slug, number, item_of=lambda v: get_object_or_404(v.categories, code=code), form_class=CategoryForm,
        save=lambda cat, **data: services.category_edit(category=cat, **data), done="Category", context="category",
    )  # fmt: skip


@login_required
@require_POST
def version_change_page(request, slug, number):
    """Structural changes on a draft: add, remove, rename, split, merge."""
    _require_drafter(request.user)
    version = _version_or_404(slug, number)
    _require_changer(request.user, version)
    op, post = request.POST.get("op"), request.POST
    note = post.get("note", "")
    try:
        if op == "add":
            services.mode_add(
                version=version,
                code=post.get("code", ""),
                name=post.get("name", ""),
                definition=post.get("definition", ""),
                note=note,
            )
        elif op == "remove":
            services.mode_remove(mode=get_object_or_404(version.modes, code=post.get("code")), note=note)
        elif op == "rename":
            services.mode_rename(
                mode=get_object_or_404(version.modes, code=post.get("code")),
                new_code=post.get("new_code") or None,
                new_name=post.get("new_name") or None,
                note=note,
            )
        elif op == "split":
            into = [
                {
                    "code": post.get(f"code_{i}", ""),
                    "name": post.get(f"name_{i}", ""),
                    "definition": post.get(f"definition_{i}", ""),
                }
                for i in (1, 2)
                if post.get(f"code_{i}")
            ]
            services.mode_split(mode=get_object_or_404(version.modes, code=post.get("code")), into=into, note=note)
        elif op == "merge":
            codes = [c.strip() for c in post.get("codes", "").split(",") if c.strip()]
            modes = [get_object_or_404(version.modes, code=c) for c in codes]
            services.mode_merge(
                modes=modes,
                code=post.get("new_code", ""),
                name=post.get("name", ""),
                definition=post.get("definition", ""),
                note=note,
            )
        else:
            raise ValidationError(f"Unknown change {op!r}.")
    except ValidationError as exc:
        messages.error(request, _errors(exc))
    else:
        messages.success(request, "Change applied; the mapping was updated.")
    return redirect("taxonomy:version", slug=slug, number=number)


@login_required
def version_diff_page(request, slug):
    taxonomy = get_object_or_404(Taxonomy, slug=slug)
    versions = list(taxonomy.versions.order_by("number"))
    if not versions:
        raise Http404("No versions.")
    try:
        b = int(request.GET.get("b", versions[-1].number))
        a = int(request.GET.get("a", (versions[-1].parent.number if versions[-1].parent else versions[0].number)))
    except ValueError:
        raise Http404("Bad version number.") from None
    old, new = _version_or_404(slug, a), _version_or_404(slug, b)
    rows = version_diff(old=old, new=new)
    return render(
        request,
        "taxonomy/diff.html",
        {
            "taxonomy": taxonomy,
            "versions": versions,
            "old": old,
            "new": new,
            "rows": rows,
            "nav": "taxonomy",
            "n_changed": sum(r.status != "same" for r in rows),
        },
    )


class ImportForm(forms.Form):
    file = forms.FileField(help_text="A taxonomy JSON file, as exported from this site.")
    publish = forms.BooleanField(required=False, help_text="Publish (freeze) it at once.")


@login_required
@require_http_methods(["GET", "POST"])
def version_import_page(request):
    _require_drafter(request.user)
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        f = form.cleaned_data["file"]
        try:
            try:
                data = json.loads(f.read().decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValidationError(f"{f.name}: not valid UTF-8 JSON ({exc}).") from exc
            version = services.version_import(data=data, publish=form.cleaned_data["publish"], by=request.user)
        except ValidationError as exc:
            form.add_error("file", _errors(exc))
        else:
            messages.success(request, f"Imported {version.label}.")
            return redirect("taxonomy:version", slug=version.taxonomy.slug, number=version.number)
    return render(request, "taxonomy/import.html", {"form": form, "nav": "taxonomy"})


# ------------------------------------------------------------------ mappings between any two versions


def _version_by_id(raw) -> TaxonomyVersion | None:
    text = str(raw or "").strip()
    return TaxonomyVersion.objects.select_related("taxonomy").filter(pk=int(text)).first() if text.isdigit() else None


@login_required
@require_http_methods(["GET", "POST"])
def mapping_page(request):
    """Pick two versions and say, for every mode of the first, which mode of the second it becomes
    (or that it is dropped). Stored as ``CrossMapping`` rows (``taxonomy.cross_mapping``); readers
    of labels follow them (``taxonomy.mapping``). Project managers and site staff edit."""
    versions = list(TaxonomyVersion.objects.select_related("taxonomy").order_by("taxonomy__name", "number"))
    source = _version_by_id(request.POST.get("source") or request.GET.get("source"))
    target = _version_by_id(request.POST.get("target") or request.GET.get("target"))
    can_edit = user_can_draft(user=request.user)
    rows, error = [], ""
    if source and target and source.pk == target.pk:
        error = "Pick two different versions."
        source = None
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied("Only project managers and site admins edit mappings.")
        if not (source and target):
            raise Http404("Pick the two versions.")
        try:
            if "automap" in request.POST:
                n = cross_mapping_automap(source=source, target=target, by=request.user, keep_edited=False)
                messages.success(request, f"Matched {source.label} onto {target.label} by name and code ({n} rows).")
            else:
                choices = {}
                for m in version_modes(version=source):
                    value = request.POST.get(f"map-{m.code}")
                    if value is None:
                        raise ValidationError(f"The form did not say what becomes of {m.code}.")
                    # the select names one target; "also becomes" boxes add the other parts of a split
                    parts = ([value] if value else []) + request.POST.getlist(f"split-{m.code}")
                    choices[m.code] = list(dict.fromkeys(p for p in parts if p))
                n = cross_mapping_set(
                    source=source, target=target, choices=choices, by=request.user, note=request.POST.get("note", "")
                )
                messages.success(request, f"Mapping from {source.label} to {target.label} saved ({n} rows).")
        except ValidationError as exc:
            messages.error(request, _errors(exc))
        return redirect(f"{request.path}?source={source.pk}&target={target.pk}")
    pairs = (
        CrossMapping.objects.order_by()
        .values("source_id", "target_id", "auto")
        .annotate(n=Count("id"), at=Max("updated_at"))
        .order_by("-at")
    )
    by_id = {v.pk: v for v in versions}
    pair_list = [
        {"source": by_id.get(p["source_id"]), "target": by_id.get(p["target_id"]), "auto": p["auto"], "n": p["n"]}
        for p in pairs
    ]
    stored = False
    if source and target:
        choices = cross_mapping_choices(source=source, target=target)
        stored = CrossMapping.objects.filter(source=source, target=target).exists()
        target_modes = version_modes(version=target)
        names = {m.code: m.name for m in target_modes}
        for m in version_modes(version=source):
            chosen = choices.get(m.code, [])
            rows.append({"mode": m, "chosen": chosen, "chosen_names": [names.get(c, "") for c in chosen]})
    else:
        target_modes = []
    return render(
        request,
        "taxonomy/mappings.html",
        {
            "versions": versions,
            "source": source,
            "target": target,
            "rows": rows,
            "target_modes": target_modes,
            "pairs": pair_list,
            "stored": stored,
            "drafted": bool(source and target and target.parent_id == source.pk),
            "can_edit": can_edit,
            "error": error,
            "nav": "taxonomy",
        },
    )
