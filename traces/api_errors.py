"""One place that turns the product's errors into API responses, and documents them in the schema.

Services raise Django's ``ValidationError`` for bad input, ``PermissionDenied``/``Http404`` for
access, or a :class:`ProductError` subclass that carries its own HTTP status (an annotation
conflict is 409, an import refused whole is 400). API views do not catch them; this handler
(``REST_FRAMEWORK["EXCEPTION_HANDLER"]``) answers with one shape::

    {"detail": "<the whole reason, readable>", "errors": {"<field>": ["<message>", ...]}}

``errors`` is there only when the reason is per field. DRF's own exceptions (serializer
validation, authentication, throttling, 404 from ``get_object_or_404``) keep DRF's shapes.
A bad query parameter is a :class:`QueryParamError`, answered 400 naming the parameter.

The same module adds the 400/401/403/404/429 (and, with a body, 415) answers every operation can
give to the OpenAPI schema (``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``), so clients see them.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class ProductError(Exception):
    """A refused request. ``status`` is the HTTP status the API answers with."""

    status = 400

    def __init__(self, message: str, *, errors: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors

    def api_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"detail": self.message}
        if self.errors:
            body["errors"] = self.errors
        return body


class RequestConflict(ProductError):
    """The object is not in a state that allows the request (e.g. resuming a finished run)."""

    status = 409


class QueryParamError(ProductError):
    """A query parameter with a value the endpoint cannot use (never silently ignored)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"Query parameter {param!r}: {message}", errors={param: [message]})
        self.param = param


def validation_body(exc: DjangoValidationError) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": " ".join(exc.messages)}
    if hasattr(exc, "error_dict"):
        body["errors"] = exc.message_dict
    return body


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, ProductError):
        return Response(exc.api_body(), status=exc.status)
    if isinstance(exc, DjangoValidationError):
        return Response(validation_body(exc), status=400)
    return drf_exception_handler(exc, context)


# ---------------------------------------------------------------- schema

# DRF's serializer errors ({"field": ["message"]}) share the 400 answer, so the schema is open.
_ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "detail": {"type": "string"},
        "errors": {"type": "object", "additionalProperties": True},
    },
    "additionalProperties": True,
}
_DOCUMENTED = {
    "400": "Bad input (a body field or query parameter); nothing was stored.",
    "401": "Not signed in (no session, or no valid `Authorization: Token <key>`).",
    "403": "Signed in, but this role may not do this.",
    "404": "No such object, or not a member of its project.",
    "429": "Too many requests with this API token; retry after the `Retry-After` seconds.",
}


def schema_add_error_responses(result: dict, generator, request, public) -> dict:
    """drf-spectacular post-processing hook: every operation documents its error answers."""
    result.setdefault("components", {}).setdefault("schemas", {}).setdefault("Error", _ERROR_SCHEMA)
    ref = {"$ref": "#/components/schemas/Error"}
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            responses = operation.setdefault("responses", {})
            content = {"application/json": {"schema": ref}}
            for code, description in _DOCUMENTED.items():
                responses.setdefault(code, {"description": description, "content": content})
            if "requestBody" in operation:
                description = "The body's content type is not one this operation reads, or it cannot be parsed."
                responses.setdefault("415", {"description": description, "content": content})
    return result
