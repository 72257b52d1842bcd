from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from traces.projects.login import ThrottledLoginView

api_patterns = [
    path("", include("taxonomy.api_urls")),
    path("", include("traces.api_urls")),
    path("", include("annotations.api_urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include(api_patterns)),
    path("taxonomies/", include("taxonomy.urls")),
    path("", include("annotations.urls")),
    path("", include("traces.urls")),
]
