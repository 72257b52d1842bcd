"""The site's URL map: sign-in, the admin, /api/ (with the schema and docs) and each app's pages."""

from csp.constants import SELF
from csp.decorators import csp_update
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from traces.live.receiver import otlp_traces
from traces.projects.login import ThrottledLoginView

api_patterns = [
    path("", include("taxonomy.api_urls")),
    path("", include("traces.api_urls")),
    path("", include("annotations.api_urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file (?script), not inline: the CSP allows it.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    # Redoc runs its search in a worker made from a blob: URL: this page alone may start one. Its calls
    # home (Google Fonts, a logo on cdn.redoc.ly) stay refused: the docs are served offline.
    path(
        "redoc/",
        csp_update({"worker-src": [SELF, "blob:"]})(SpectacularRedocView.as_view(url_name="schema")),
        name="api-redoc",
    ),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include(api_patterns)),
    # the OTLP/HTTP receiver: OTEL_EXPORTER_OTLP_ENDPOINT=<site>/otlp (traces/live/receiver.py)
    path("otlp/v1/traces", otlp_traces, name="otlp-traces"),
    path("taxonomies/", include("taxonomy.urls")),
    path("", include("annotations.urls")),
    path("", include("traces.urls")),
]

# The site's error pages, in its layout with a way back (traces/projects/errors.py).
handler400 = "traces.projects.errors.bad_request"
handler403 = "traces.projects.errors.permission_denied"
handler404 = "traces.projects.errors.page_not_found"
handler500 = "traces.projects.errors.server_error"
