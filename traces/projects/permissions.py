"""Project-scoped access for API views: resolve the project from the URL and check a capability."""

from rest_framework.request import Request

from traces.models import Project
from traces.projects.selectors import project_get_for_user


class ProjectScopedMixin:
    """Views under /api/projects/<slug>/...: self.project and self.role, 404 for non-members."""

    capability: str | dict[str, str] = "view"
    project: Project
    role: str

    def initial(self, request: Request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        capability = self.capability
        if isinstance(capability, dict):
            capability = capability.get(request.method, capability.get("*", "view"))
        self.project, self.role = project_get_for_user(user=request.user, slug=kwargs["slug"], capability=capability)
