"""What happens when a live trace becomes a new trace: a registry, so traces never imports
annotations (whose live judge policy, ``annotations.judge.live``, registers here)."""

from __future__ import annotations

from collections.abc import Callable

_ON_NEW: list[Callable] = []


def live_trace_register(fn: Callable) -> None:
    """``fn(live=LiveTrace, trace=Trace)``, called in the assembly's transaction for each live trace
    stored as a new trace (not when it replaced an unlabelled one, nor when merged into another)."""
    if fn not in _ON_NEW:
        _ON_NEW.append(fn)


def live_trace_new(*, live, trace) -> None:
    for fn in _ON_NEW:
        fn(live=live, trace=trace)


_EXTRA: list[Callable] = []


def live_summary_register(fn: Callable) -> None:
    """``fn(project=Project) -> dict``, merged into the live page's and API's figures (the judge's
    backlog comes from annotations this way)."""
    if fn not in _EXTRA:
        _EXTRA.append(fn)


def live_summary_extra(*, project) -> dict:
    out: dict = {}
    for fn in _EXTRA:
        out.update(fn(project=project))
    return out
