"""Import pages: upload form + recent jobs, and a job page with a live progress bar (htmx)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_http_methods, require_POST

from traces.importing.jobs import import_job_create, import_job_progress, import_job_retry, import_upload_kept_until
from traces.importing.results import TraceImportError
from traces.importing.service import FORMAT_LABELS, IMPORT_FORMATS
from traces.jobs import JobNotRetryable, max_attempts
from traces.models import ImportJob
from traces.projects.selectors import project_get_for_user

RECENT_JOBS = 10
RESULT_TRACES = 50


def _job_or_404(project, pk: int) -> ImportJob:
    job = ImportJob.objects.select_related("created_by").filter(project=project, pk=pk).first()
    if job is None:
        raise Http404("No such import.")
    return job


@login_required
@require_http_methods(["GET", "POST"])
def import_page(request, slug):
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    error = ""
    fmt = request.POST.get("format", "auto")
    import_rest = request.POST.get("import_rest") == "on"
    if request.method == "POST":
        try:
            job = import_job_create(
                project=project,
                by=request.user,
                files=request.FILES.getlist("files"),
                format=fmt,
                import_rest=import_rest,
            )
        except TraceImportError as e:
            error = str(e)
        else:
            url = reverse("import_job_detail", kwargs={"slug": slug, "pk": job.pk})
            if request.headers.get("HX-Request"):
                response = HttpResponse(status=204)
                response["HX-Redirect"] = url
                return response
            return redirect(url)
    jobs = ImportJob.objects.filter(project=project).select_related("created_by")[:RECENT_JOBS]
    return render(
        request,
        "traces/importing/page.html",
        {
            "project": project,
            "role": role,
            "nav": "projects",
            "jobs": jobs,
            "formats": [(name, FORMAT_LABELS.get(name, name)) for name in IMPORT_FORMATS],
            "format": fmt if fmt in IMPORT_FORMATS else "auto",
            "import_rest": import_rest,
            "error": error,
        },
        # htmx swaps only 2xx answers; a plain form post gets the honest 400
        status=400 if error and not request.headers.get("HX-Request") else 200,
    )


def _job_context(project, job: ImportJob) -> dict:
    figures = import_job_progress(job=job)
    traces = []
    if job.status == ImportJob.Status.DONE:
        rows = job.traces.order_by("id").values("id", "title", "external_id", "mas_name", "n_steps")
        traces = list(rows[:RESULT_TRACES])
        try:
            for t in traces:
                t["url"] = reverse("trace_detail", kwargs={"slug": project.slug, "pk": t["id"]})
        except NoReverseMatch:  # the viewer is not installed in this build
            pass
    refused = sum(1 for line in job.report or [] if line.get("status") == "refused")
    return {
        "project": project,
        "job": job,
        "figures": figures,
        "not_stored_files": any(line.get("status") == "not stored" for line in job.report or []),
        "refused_files": refused or (1 if job.status == ImportJob.Status.FAILED and job.failure == "refused" else 0),
        "traces": traces,
        "kept_until": import_upload_kept_until(job=job),
        "max_attempts": max_attempts(),
    }


@login_required
def import_job_detail(request, slug, pk):
    project, role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    job = _job_or_404(project, pk)
    return render(request, "traces/importing/job.html", {"role": role, "nav": "projects", **_job_context(project, job)})


@login_required
def import_job_progress_partial(request, slug, pk):
    """The progress card; it polls itself every 500 ms until the job has finished."""
    project, _role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    job = _job_or_404(project, pk)
    return render(request, "traces/importing/_job_progress.html", _job_context(project, job))


@login_required
@require_POST
def import_job_retry_page(request, slug, pk):
    """The job page's Retry button: queue the failed job again and show it."""
    project, _role = project_get_for_user(user=request.user, slug=slug, capability="manage")
    job = _job_or_404(project, pk)
    try:
        import_job_retry(job=job)
    except JobNotRetryable as e:
        messages.error(request, e.message)
    else:
        messages.success(request, f"Import #{job.pk} is queued again.")
    return redirect("import_job_detail", slug=slug, pk=job.pk)
