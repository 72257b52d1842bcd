"""Demo traces: one short trace per supported framework, each with a failure you can spot,
plus a small MAST-Data file whose records carry labels of the "MAST-Data judge" rater.

The files in traces/demo_data/ were written for this project (not copied from any dataset):
- ChatDev: the Programmer resubmits the same unchanged code after each review (step repetition).
- MetaGPT: the reviewer approves tests that expect the wrong median for even-length lists.
- AG2: the assistant ignores the executed result (27) and answers 32.
- HyperAgent: the Planner finishes without asking the Executor to run the tests.
- AppWorld: the Supervisor completes the task on the Spotify agent's word, without verifying.
- Magentic-One: the Orchestrator ignores the WebSurfer's result (Nagano) and searches Sapporo.
- OpenManus: Manus repeats the same web search until it hits the step limit.
"""

from __future__ import annotations

from pathlib import Path

from traces.importing.service import traces_import

DEMO_DATA = Path(__file__).resolve().parents[1] / "demo_data"


def seed(ctx) -> None:
    """Import the demo traces into ctx.project; re-running skips them as duplicates."""
    result = traces_import(project=ctx.project, paths_or_files=[DEMO_DATA], by=ctx.users.get("manager"))
    ctx.say(
        f"Traces: {result.imported} imported, {result.duplicates} already there "
        "(seven frameworks + MAST-Data records with the MAST-Data judge's labels)"
    )
