"""Query strings with a NUL character are refused with 400 before any view sees them.

PostgreSQL text cannot hold U+0000, so a filter value with one (``?llm_name=%00``) made the
database raise and the request answer 500. No view has a use for it: the request is refused
here, in JSON under /api/ and with the site's 400 page elsewhere, naming the parameter.
"""

from __future__ import annotations

from django.core.exceptions import SuspiciousOperation
from django.http import JsonResponse


class RefuseNulInQueryMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        query = request.META.get("QUERY_STRING", "")
        if "%00" in query or "\x00" in query:
            params = request.GET.lists()
            bad = next((k for k, values in params if "\x00" in k or any("\x00" in v for v in values)), None)
            if bad is not None:
                name = bad.replace("\x00", "")
                message = f"Query parameter {name!r} holds a NUL character (%00), which is never valid."
                if request.path.startswith("/api/"):
                    return JsonResponse({"detail": message}, status=400)
                raise SuspiciousOperation(message)
        return self.get_response(request)
