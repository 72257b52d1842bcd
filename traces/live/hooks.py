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
