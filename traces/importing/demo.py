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


FRAMEWORKS = Path(__file__).resolve().parents[1] / "demo_frameworks"
FRAMEWORK_FILES = [
    "claude_session.jsonl",
    "autogen_taskresult.json",
    "smolagents_memory.json",
    "langgraph_supervisor.json",
    "docent_agent_runs.json",
    "adamast.jsonl",
    "mast_same_trajectory.jsonl",
]


def seed_frameworks(ctx) -> None:
    """A second project, "Demo: agent frameworks (2026)", filled through two import jobs whose pages
    show the per-file report: one of every newer framework format (Claude Code session, AutoGen
    TaskResult, smolagents memory, LangGraph supervisor, Docent runs, AdaMAST JSONL) beside a
    ChatDev run's .log/.prompt/meta.txt and two MAST-Data records of one trajectory (one merged,
    its labels kept); one upload refused because of a file of ``[null, 3, "x"]``; and a Claude
    session whose process died mid-write, imported with "import the rest" (its cut-off last line
    listed as skipped in the report)."""
    # Imported when called: the demo module is loaded by annotations.demo, which must stay light.
    from traces.importing.jobs import import_job_create, import_job_run
    from traces.projects.services import membership_set, project_get_or_create

    manager = ctx.users["manager"]
    project, _ = project_get_or_create(slug="frameworks", name="Demo: agent frameworks (2026)", by=manager)
    for username, role in (("alice", "annotator"), ("victor", "viewer")):
        if username in ctx.users:
            membership_set(project=project, user=ctx.users[username], role=role)
    if project.import_jobs.exists():
        ctx.say("Frameworks project: already imported (see its Import tab)")
        return
    chatdev = DEMO_DATA / "chatdev" / "Weather_CLI_DemoOrg_20261130090000"
    batches = [
        ([*(FRAMEWORKS / n for n in FRAMEWORK_FILES), *sorted(chatdev.iterdir())], False),
        ([FRAMEWORKS / "claude_session.jsonl", FRAMEWORKS / "not_objects.json"], False),
        ([FRAMEWORKS / "claude_session_cut_off.jsonl"], True),
    ]
    for paths, import_rest in batches:
        files = [open(p, "rb") for p in paths]  # noqa: SIM115 - closed below
        try:
            job = import_job_create(project=project, by=manager, files=files, import_rest=import_rest)
        finally:
            for f in files:
                f.close()
        job = import_job_run(job_id=job.pk)
        ctx.say(f"Frameworks project: import #{job.pk} {job.status}, {job.n_imported} traces, {job.n_merged} merged")
