"""Demo span traces: one file per span format, each a multi-agent run with its tree, models,
tokens and timing, so the demo shows the step tree (fold an invocation, the outline by agent).

Written for this project (the same runs as tests/fixtures/import/): a team finds Lyon's
population in 2023 and its growth since 2013. Failures to spot:
- CrewAI over OTLP (older gen_ai.prompt.N attributes and gen_ai.choice events): the page fetch
  times out and the Researcher *assumes* the 2013 figure (491,000); the Analyst computes with it.
- OpenAI Agents SDK: the Analyst's second python call fails (no pandas) and it answers anyway,
  reporting the 2021 figure as 2023's.
- TRAIL (smolagents, OpenInference): the INSEE page answers 403 and the search agent answers from a
  snippet; the manager reports a 2021 figure for 2023.
- Phoenix (OpenInference JSONL, two traces), LangSmith (LangGraph nodes), Langfuse (observations).
"""

from __future__ import annotations

from pathlib import Path

from traces.importing.service import traces_import

DEMO_SPANS = Path(__file__).resolve().parents[1] / "demo_spans"


def seed(ctx) -> None:
    """Import the span demo files into ctx.project; re-running skips them as duplicates."""
    result = traces_import(project=ctx.project, paths_or_files=[DEMO_SPANS], by=ctx.users.get("manager"))
    ctx.say(
        f"Span traces: {result.imported} imported, {result.duplicates} already there "
        "(OTLP, OpenAI Agents SDK, TRAIL, Phoenix, LangSmith, Langfuse; open one for the step tree)"
    )
