"""Sign-in with a limit on failed attempts, and the throttle for token-authenticated API calls.

Failed sign-ins are counted per user name and per client address in the cache over a sliding
window (``MAST_LOGIN_FAILURES``, default 10 per user name and 50 per address in 15 minutes). Past
either limit the form answers 429 and does not check the password at all, so guessing stops even
for the right password; the limit lifts as old failures leave the window. Successful sign-ins
are not counted: a lab where everyone signs in from one address is not locked out by itself.

The client address is ``REMOTE_ADDR``, or the address ``MAST_NUM_PROXIES`` hops back in
``X-Forwarded-For`` behind that many trusted proxies (the same rule as DRF's ``NUM_PROXIES``).
Counters live in the default cache: set ``CACHE_URL`` (e.g. Redis) when several web processes run,
or each process keeps its own count.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from rest_framework.authtoken.models import Token
from rest_framework.throttling import UserRateThrottle

WINDOW_SECONDS = 15 * 60


def client_address(request: HttpRequest) -> str:
    proxies = int(getattr(settings, "MAST_NUM_PROXIES", 0))
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if proxies and forwarded:
        hops = [h.strip() for h in forwarded.split(",") if h.strip()]
        if hops:
            return hops[-min(proxies, len(hops))]
    return request.META.get("REMOTE_ADDR", "")


def _limits() -> tuple[int, int]:
    per_user, per_address = getattr(settings, "MAST_LOGIN_FAILURES", (10, 50))
    return int(per_user), int(per_address)


def _keys(request: HttpRequest) -> list[tuple[str, int]]:
    per_user, per_address = _limits()
    username = (request.POST.get("username") or "").strip().lower()[:150]
    keys = [(f"login-fail:addr:{client_address(request)}", per_address)]
    if username:
        keys.append((f"login-fail:user:{username}", per_user))
    return keys


def _recent(key: str, now: float) -> list[float]:
    return [t for t in cache.get(key, []) if t > now - WINDOW_SECONDS]


def login_blocked_for(request: HttpRequest) -> int:
    """Seconds until the next attempt is allowed (0 = allowed now)."""
    now = time.time()
    wait = 0.0
    for key, limit in _keys(request):
        recent = _recent(key, now)
        if len(recent) >= limit:
            wait = max(wait, recent[-limit] + WINDOW_SECONDS - now)
    return int(wait) + (1 if wait else 0)


def login_failure_record(request: HttpRequest) -> None:
    now = time.time()
    for key, limit in _keys(request):
        cache.set(key, (_recent(key, now) + [now])[-limit:], WINDOW_SECONDS)


class ThrottledLoginView(auth_views.LoginView):
    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        wait = login_blocked_for(request)
        if wait:
            minutes = max(1, round(wait / 60))
            response = render(
                request,
                "registration/login.html",
                {
                    "form": self.get_form_class()(request),
                    "throttled": f"Too many failed sign-ins. Try again in about {minutes} minute"
                    + ("s." if minutes != 1 else "."),
                },
                status=429,
            )
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        login_failure_record(self.request)
        return super().form_invalid(form)


class TokenRateThrottle(UserRateThrottle):
    """Limits scripts that authenticate with an API token (``MAST_API_TOKEN_RATE``, e.g. "1200/minute").

    Browser sessions are not throttled here: the labelling screen autosaves through the API and a
    person cannot outpace the limit that matters, which is a leaked token used in a loop."""

    scope = "token"

    def get_rate(self) -> str | None:
        return getattr(settings, "MAST_API_TOKEN_RATE", "1200/minute") or None

    def allow_request(self, request, view) -> bool:
        if not isinstance(getattr(request, "auth", None), Token):
            return True
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)
