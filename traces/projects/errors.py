"""The site's error pages: 400, 403 (and CSRF failures), 404 and 500 in the site's layout.

Each says what happened, gives the reason where it is safe to say it, and offers a way back (the
page one came from when it is on this site, and the projects list). Safe reasons are the messages
our own code raises for people ("Your role in Demo (viewer) does not allow this.", "No such
project."); Django's internals (the URL resolver's tried patterns, bare class names) are never
shown. A 404 never tells a non-member that a project exists: it reads the same as a typo.

The 500 page renders without the request's context processors: when the database is down, asking
who is signed in would fail again inside the error handler.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template import loader
from django.urls import Resolver404
from django.utils.http import url_has_allowed_host_and_scheme

CSRF_REASON = (
    "The form's security token was missing or out of date (the page was open a long time, or you "
    "signed in again in another tab). Go back, reload the page and send the form again."
)


def _reason(exception: BaseException | None) -> str:
    if exception is None or isinstance(exception, Resolver404):
        return ""
    message = exception.args[0] if exception.args else ""
    return message if isinstance(message, str) else ""


def _back_url(request: HttpRequest) -> str:
    referer = request.META.get("HTTP_REFERER", "")
    if referer and url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return referer
    return ""


def _render(request: HttpRequest, status: int, title: str, explanation: str, reason: str = "") -> HttpResponse:
    context = {
        "error_code": status,
        "error_title": title,
        "explanation": explanation,
        "reason": reason,
        "back_url": _back_url(request),
        "request_path": request.path,
    }
    body = loader.get_template("errors/page.html").render(context, request)
    return HttpResponse(body, status=status)


def bad_request(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    return _render(request, 400, "Bad request", "The site could not understand this request.", _reason(exception))


def permission_denied(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    return _render(
        request,
        403,
        "You may not do this",
        "You are signed in, but your role in this project does not allow this page or action. "
        "A manager of the project can change your role on its Members tab.",
        _reason(exception),
    )


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    return _render(request, 403, "The form could not be sent", "Nothing was changed.", CSRF_REASON)


def page_not_found(request: HttpRequest, exception: BaseException | None = None) -> HttpResponse:
    return _render(
        request,
        404,
        "Page not found",
        "There is no such page, or it belongs to a project you are not a member of.",
        _reason(exception),
    )


def server_error(request: HttpRequest) -> HttpResponse:
    body = loader.get_template("errors/page.html").render(
        {
            "error_code": 500,
            "error_title": "Something went wrong on our side",
            "explanation": "The error was logged. Nothing you sent was half-stored: try again in a "
            "moment, and tell the site's admins if it keeps happening.",
            "request_path": request.path,
            "server_error": True,
        }
    )
    return HttpResponse(body, status=500)
