"""Demo step of analytics: nothing to seed (the tables read the demo's agreed labels and raters);
it says where the paper table is, so `make demo` lists it with the other features."""

from __future__ import annotations


def seed(ctx) -> None:
    slug = ctx.project.slug
    ctx.say(
        f"Analytics: /p/{slug}/analytics/ and the paper table, failure modes per framework with 95% CIs "
        f"(CSV, LaTeX, SVG, PNG), at /p/{slug}/analytics/frameworks/; "
        f"JSON: /api/projects/{slug}/analytics/framework-modes/"
    )
