"""Formatting of the comparison's statistics, shared with its CSV and LaTeX (same rounding)."""

from django import template

from annotations.judge.comparison import _fmt

register = template.Library()


@register.filter
def stat_value(stat) -> str:
    """The point value as the downloads round it, or "–" when undefined."""
    return _fmt(stat)[0] or "–"


@register.filter
def stat_ci(stat) -> str:
    """ "[low, high]" as the downloads round it, or "" when there is no interval."""
    _, low, high = _fmt(stat)
    return f"[{low}, {high}]" if low else ""


@register.filter
def share_pct(share) -> str:
    return "–" if share is None or share.value is None else f"{100 * share.value:.1f}%"


@register.filter
def share_ci(share) -> str:
    if share is None or share.low is None:
        return ""
    return f"[{100 * share.low:.1f}, {100 * share.high:.1f}]"


@register.filter
def pct(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


@register.filter
def get(mapping, key):
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.filter
def pp_change(stat) -> str:
    """A change of share in percentage points, signed: "+25 pp", or "–" when undefined."""
    return "–" if stat is None or stat.value is None else f"{100 * stat.value:+.0f} pp"


@register.filter
def pp_ci(stat) -> str:
    if stat is None or stat.low is None or stat.high is None:
        return ""
    return f"[{100 * stat.low:+.0f}, {100 * stat.high:+.0f}]"
