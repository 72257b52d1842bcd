"""The step tree of span-based traces, for the viewer: who is whose parent, and what each LLM
answer cost. Flat traces (every non-span format) have no tree: nothing is queried for them, so the
viewer stays exactly as fast on them as before.
"""

from __future__ import annotations

from traces.models import Step, Trace
from traces.parsers.registry import span_format


def trace_has_tree(trace: Trace) -> bool:
    return span_format(trace.format) is not None


def trace_tree(*, trace: Trace) -> dict | None:
    """Per step, in index order: parent index (-1 at the top), model (index into ``models``, -1),
    input/output tokens and duration in ms (-1 when not given). None for a flat trace."""
    if not trace_has_tree(trace):
        return None
    rows = (
        Step.objects.filter(trace=trace)
        .order_by("index")
        .values_list("parent_index", "model", "input_tokens", "output_tokens", "duration_ms")
    )
    models: dict[str, int] = {}
    p, m, tin, tout, ms = [], [], [], [], []
    for parent, model, t_in, t_out, dur in rows:
        p.append(-1 if parent is None else parent)
        m.append(models.setdefault(model, len(models)) if model else -1)
        tin.append(-1 if t_in is None else t_in)
        tout.append(-1 if t_out is None else t_out)
        ms.append(-1 if dur is None else dur)
    return {"p": p, "models": list(models), "m": m, "tin": tin, "tout": tout, "ms": ms}
