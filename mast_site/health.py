"""/healthz for load balancers and compose healthchecks.

A middleware placed first, so the probe works from inside the container (Host 127.0.0.1,
plain http) whatever ALLOWED_HOSTS and the HTTPS redirect say. It checks the database.
"""

from django.db import connection
from django.http import HttpResponse


class HealthCheckMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path != "/healthz":
            return self.get_response(request)
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except Exception as exc:  # noqa: BLE001 - any failure means unhealthy
            return HttpResponse(f"database unavailable: {type(exc).__name__}", status=503, content_type="text/plain")
        return HttpResponse("ok", content_type="text/plain")
