"""The numbers on a project's overview page."""

from django.db.models import Count, Sum

from traces.models import Project


def project_overview(*, project: Project) -> dict:
    traces = project.traces.all()
    totals = traces.aggregate(n=Count("id"), size=Sum("size_bytes"), steps=Sum("n_steps"))
    by_framework = traces.values("mas_name").annotate(n=Count("id"), steps=Sum("n_steps")).order_by("-n", "mas_name")
    return {
        "totals": totals,
        "by_framework": list(by_framework),
        "recent_imports": list(project.import_jobs.select_related("created_by")[:5]),
    }
