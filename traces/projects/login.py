"""Sign-in with a limit on failed attempts, and the throttle for token-authenticated API calls.

Failed sign-ins are counted per user name and per client address in the cache over a sliding
window of one-minute buckets (``MAST_LOGIN_FAILURES``, default 10 per user name and 50 per address
in 15 minutes). Past either limit the form answers 429 and does not check the password at all, so
guessing stops even for the right password; the limit lifts as old failures leave the window.
Every attempt is counted with the cache's atomic increment before its password is checked, so
concurrent guesses are all counted and cannot pass the limit together. Successful sign-ins are not
counted: a lab where everyone signs in from one address is not locked out by itself.

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


# The window is counted in one-minute buckets, one cache counter each, so that every attempt is an
# atomic increment (Redis INCR): a read-then-write of a list of times lost failures that arrived
# together. A failure leaves the count when its minute leaves the window.
BUCKET_SECONDS = 60
N_BUCKETS = WINDOW_SECONDS // BUCKET_SECONDS


def _bucket_counts(key: str, now: float) -> dict[int, int]:
    """Failures counted under ``key`` per bucket (minute number) of the window ending now."""
    last = int(now // BUCKET_SECONDS)
    names = {f"{key}:{b}": b for b in range(last - N_BUCKETS + 1, last + 1)}
    return {names[name]: int(n) for name, n in cache.get_many(list(names)).items() if n}


def _increment(name: str, delta: int) -> int:
    """Add ``delta`` to the counter ``name`` atomically (created at 0 if missing); its new value."""
    for _ in range(3):
        cache.add(name, 0, WINDOW_SECONDS + BUCKET_SECONDS)
        try:
            return cache.incr(name, delta)
        except ValueError:  # expired between add and incr: create it again
            continue
    raise RuntimeError(f"The sign-in counter {name} could not be incremented in the cache.")


def _wait(counts: dict[int, int], limit: int, now: float) -> float:
    """Seconds until fewer than ``limit`` failures are left in the window (0: already fewer)."""
    total = sum(counts.values())
    for bucket in sorted(counts):
        if total < limit:
            break
        total -= counts[bucket]
        if total < limit:
            return (bucket + N_BUCKETS) * BUCKET_SECONDS - now
    return 0.0


def login_attempt_begin(request: HttpRequest) -> tuple[int, list[str]]:
    """Count this sign-in attempt as a failure before the password is checked: (seconds to wait, 0 if
    it may go ahead; the counters it incremented, for ``login_attempt_succeeded``). Counting first,
    with an atomic increment whose result is this attempt's place in the window, means that
    concurrent guesses cannot together check more passwords than the limit; an attempt refused
    here is taken back out of the count (only password checks count)."""
    now = time.time()
    current = int(now // BUCKET_SECONDS)
    taken: list[str] = []
    wait = 0.0
    for key, limit in _keys(request):
        counts = _bucket_counts(key, now)
        name = f"{key}:{current}"
        place = _increment(name, 1)
        taken.append(name)
        earlier = sum(n for b, n in counts.items() if b != current)
        if earlier + place > limit:
            counts[current] = place - 1  # the failures before this attempt
            wait = max(wait, _wait(counts, limit, now), 1.0)
    if wait:
        for name in taken:
            _increment(name, -1)
        return int(wait) + 1, []
    return 0, taken


def login_attempt_succeeded(taken: list[str]) -> None:
    """The password was right: the attempt ``login_attempt_begin`` counted is not a failure."""
    for name in taken:
        _increment(name, -1)


def login_failures(request: HttpRequest) -> dict[str, int]:
    """The failures counted in the window for the request's address and user name (cache key -> count)."""
    now = time.time()
    return {key: sum(_bucket_counts(key, now).values()) for key, _ in _keys(request)}


class ThrottledLoginView(auth_views.LoginView):
    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        wait, self.counted = login_attempt_begin(request)
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

    def form_valid(self, form):
        login_attempt_succeeded(self.counted)
        return super().form_valid(form)


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
