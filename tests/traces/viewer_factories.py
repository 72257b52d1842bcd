"""Traces for the viewer and trace-list tests, built with the real parsers (no importer needed).

`trace_from_text` parses text with traces.parsers.parse_trace and stores the Trace and its Steps
with the statistics the importer computes; `chatdev_log` generates a realistic ChatDev log of
any size (a 20,000-line, ~1 MB trace for the "huge trace" tests and bench).
"""

from __future__ import annotations

import functools
import hashlib
import itertools

from django.db import connection

from traces.models import Project, Step, Trace
from traces.parsers import parse_trace

AGENTS = ["Chief Executive Officer", "Chief Product Officer", "Chief Technology Officer", "Programmer", "Code Reviewer"]


def trace_from_text(project: Project, text: str, *, format: str = "auto", filename: str = "", **fields) -> Trace:
    parsed = parse_trace(text, format=format, filename=filename)
    steps = parsed.steps
    agents = [s.agent for s in steps if s.agent]
    switches = sum(1 for a, b in itertools.pairwise(agents) if a != b)
    seen: set[str] = set()
    repeated = 0
    for s in steps:
        key = " ".join(s.content.split()[1:])[:2000]
        repeated += key in seen
        seen.add(key)
    raw = parsed.raw_text
    values = {
        "mas_name": parsed.mas_name,
        "llm_name": parsed.llm_name,
        "benchmark": parsed.benchmark,
        "task": parsed.task,
        "external_id": parsed.external_id,
        "title": filename,
        "outcome": parsed.outcome,
        "metadata": parsed.metadata,
    }
    values.update(fields)
    trace = Trace.objects.create(
        project=project,
        format=parsed.format,
        raw_text=raw,
        size_bytes=len(raw.encode("utf-8")),
        content_hash=hashlib.sha256((str(fields) + raw).encode("utf-8")).hexdigest(),
        n_steps=len(steps),
        n_agents=len(set(agents)),
        n_agent_switches=switches,
        n_chars=len(raw),
        n_lines=raw.count("\n") + 1,
        n_repeated_steps=repeated,
        agents=sorted(set(agents)),
        **values,
    )
    # COPY: a 20 MB trace's 22,000 steps took bulk_create ~10 s of a test's time; COPY takes ~1 s
    columns = "trace_id, index, agent, kind, content, line_start, line_end, details, model"
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {Step._meta.db_table} ({columns}) FROM STDIN") as copy,
    ):
        for s in steps:
            copy.write_row((trace.pk, s.index, s.agent, s.kind, s.content, s.line_start, s.line_end, "{}", ""))
    return trace


def chatdev_log(*, lines: int = 200, long_step_every: int = 0, marker: str = "") -> str:
    """A ChatDev-style log of about `lines` lines; every `long_step_every`-th message is 60+ lines.

    Each message step carries its number ("turn N") so tests can search for a given step.
    """
    out = [
        "[2026-30-11 09:00:00 INFO] **[Preprocessing]**",
        "",
        "**ChatDev Starts** (20261130090000)",
        "",
        "**task_prompt**: Build a command-line tool that renames photos by their EXIF date.",
        "",
    ]
    n = 0
    while len(out) < lines:
        agent = AGENTS[n % len(AGENTS)]
        other = AGENTS[(n + 1) % len(AGENTS)]
        stamp = f"2026-30-11 09:{(n // 60) % 60:02d}:{n % 60:02d}"
        out.append(f"[{stamp} INFO] {agent}: **{agent}<->{other} on : Coding, turn {n}**")
        out.append("")
        body = 60 if long_step_every and n % long_step_every == long_step_every - 1 else 4 + n % 7
        for k in range(body):
            note = marker if k == 0 and marker else "exif date ok"
            out.append(f"    {k:>2} turn {n}: rename_photos.py --dry-run; {note}")
        out.append("")
        out.append("[2026-30-11 09:00:00 INFO] flask app.py did not start for online log")
        n += 1
    return "\n".join(out) + "\n"


_seq = itertools.count(1)


def bare_trace(project: Project, **fields) -> Trace:
    """A Trace row with stats but no steps: enough for the trace list."""
    n = next(_seq)
    raw = fields.pop("raw_text", f"trace {n}\n")
    values = {
        "mas_name": "ChatDev",
        "llm_name": "gpt-4o",
        "benchmark": "ProgramDev",
        "external_id": f"ext-{n}",
        "title": f"Trace {n}",
        "task": f"Task number {n}",
        "format": "chatdev",
        "size_bytes": len(raw),
        "n_steps": 10,
        "n_agents": 3,
        "n_lines": raw.count("\n") + 1,
    }
    values.update(fields)
    return Trace.objects.create(
        project=project, raw_text=raw, content_hash=hashlib.sha256(f"{n}-{raw}".encode()).hexdigest(), **values
    )


def submitted_annotation(trace: Trace, *, state: str = "submitted", rater_name: str = "labeller", kind: str = "human"):
    """An annotation on the trace (the 'labelled' filter looks for submitted human ones)."""
    from django.contrib.auth import get_user_model

    from annotations.models import Annotation, Rater

    user = get_user_model().objects.get_or_create(username=rater_name)[0] if kind == "human" else None
    rater, _ = Rater.objects.get_or_create(name=rater_name, defaults={"kind": kind, "user": user})
    return Annotation.objects.create(
        trace=trace, rater=rater, taxonomy_version=trace.project.taxonomy_version, state=state
    )


def trace_of_mb(project: Project, mb: int, *, filename: str = "big.log") -> Trace:
    """A ChatDev-style trace of about ``mb`` MB (a 1 MB generated log, repeated), through the real parser."""
    return trace_from_text(project, _text_of_mb(mb), filename=filename)


@functools.cache
def _text_of_mb(mb: int) -> str:
    """Generated once per test session (the 20 MB tests of the trace and labelling pages share it)."""
    one = chatdev_log(lines=20000, long_step_every=9)
    return one * max(1, round(mb * 1024**2 / len(one.encode())))
