"""Docent ``AgentRun`` JSON: ``{"id", "name", "transcripts": [...] | {"<name>": ...}, "metadata"}``.

A transcript is ``{"id", "name", "messages": [...], "metadata"}``; a message is Docent's
``ChatMessage``: ``role`` system / user / assistant / tool, ``content`` (text, or parts of type
``text`` / ``reasoning``), an assistant's ``model`` and ``tool_calls`` (``{id, function, arguments}``),
a tool message's ``tool_call_id``, ``function`` and ``error``. A file holds one run, a list of
runs, or JSONL of runs: each run is one trace.

Agents: Docent's multi-agent runs keep one transcript per agent, so with several transcripts an
assistant message belongs to its transcript's name (or key); with one, to the assistant message's
``name`` or "assistant". Tool messages belong to the agent that called the tool.
"""

from __future__ import annotations

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.render import Message
from traces.parsers.shapes import as_dict, as_list, build_trace, call_text, json_text, rows_of, text, usage_details

LABEL = "Docent AgentRun"


def sniff(head: str) -> bool:
    return '"transcripts"' in head


def _content(value: object) -> str:
    if isinstance(value, str):
        return value
    parts = []
    for part in as_list(value):
        p = as_dict(part)
        kind = p.get("type")
        if kind == "text":
            parts.append(text(p.get("text")))
        elif kind == "reasoning":
            parts.append(f"[reasoning] {text(p.get('reasoning'))}")
        elif kind == "image":
            parts.append("[image]")
        else:
            parts.append(json_text(part))
    return "\n".join(parts)


def _transcripts(run: dict, filename: str, record: int | None) -> list[tuple[str, dict]]:
    value = run.get("transcripts")
    if isinstance(value, dict):
        return [(text(as_dict(t).get("name")) or str(key), as_dict(t)) for key, t in value.items()]
    if isinstance(value, list):
        return [(text(as_dict(t).get("name")) or f"transcript {i + 1}", as_dict(t)) for i, t in enumerate(value)]
    raise ParseError(f"read as {LABEL}: 'transcripts' must be a list or an object", filename=filename, record=record)


def _run(run: dict, filename: str, record: int | None) -> ParsedTrace:
    transcripts = _transcripts(run, filename, record)
    several = len(transcripts) > 1
    msgs: list[Message] = []
    for tname, transcript in transcripts:
        callers: dict[str, str] = {}
        for n, item in enumerate(as_list(transcript.get("messages"))):
            if not isinstance(item, dict):
                raise ParseError(
                    f"read as {LABEL}: message {n + 1} of transcript {tname!r} is not an object",
                    filename=filename,
                    record=record,
                )
            role = text(item.get("role"))
            body = _content(item.get("content"))
            stamp = as_dict(item.get("metadata")).get("timestamp")
            if role == "assistant":
                agent = tname if several else (text(item.get("name")) or "assistant")
                details = usage_details(
                    as_dict(item.get("metadata")).get("usage"), model=item.get("model"), timestamp=stamp
                )
                if body.strip() or not item.get("tool_calls"):
                    msgs.append(Message(agent, "message", body, "", details))
                    details = {}
                for call in as_list(item.get("tool_calls")):
                    c = as_dict(call)
                    fn = c.get("function")
                    name = text(fn) or text(as_dict(fn).get("name"))
                    callers[text(c.get("id"))] = agent
                    msgs.append(Message(agent, "tool_call", call_text(name, c.get("arguments")), "", details))
                    details = {}
            elif role == "tool":
                agent = callers.get(text(item.get("tool_call_id")), tname if several else "assistant")
                name = text(item.get("function"))
                label = f"tool result: {name}" if name else "tool result"
                error = item.get("error")
                if error:
                    label += " (error)"
                    body = "\n".join(x for x in (body, json_text(error)) if x)
                msgs.append(Message(agent, "tool_output", body, label, usage_details(None, timestamp=stamp)))
            elif role == "system":
                msgs.append(Message("", "system", body, "system"))
            elif role == "user":
                msgs.append(Message("user", "message", body, "", usage_details(None, timestamp=stamp)))
            else:
                raise ParseError(
                    f"read as {LABEL}: message {n + 1} of transcript {tname!r} has unknown role {role or '(none)'!r}",
                    filename=filename,
                    record=record,
                )
    meta = as_dict(run.get("metadata"))
    task = text(meta.get("task")) or next((m.content for m in msgs if m.agent == "user" and m.content.strip()), "")
    trace = build_trace(
        "docent",
        LABEL,
        msgs,
        filename=filename,
        record=record,
        mas_name=text(meta.get("mas_name") or meta.get("agent")) or "Docent",
        llm_name=text(meta.get("model")),
        benchmark=text(meta.get("benchmark") or meta.get("benchmark_name")),
        task=task,
        external_id=text(run.get("id")) or text(run.get("name")),
        metadata={"docent_metadata": meta, "docent_name": text(run.get("name"))},
    )
    scores = as_dict(meta.get("scores"))
    for key in ("correct", "success", "resolved"):
        if isinstance(scores.get(key), bool):
            trace.outcome = "success" if scores[key] else "failure"
            break
    return trace


def parse_docent(obj: object, filename: str = "") -> list[ParsedTrace]:
    runs = rows_of(obj, filename=filename, what=LABEL)
    many = isinstance(obj, list)
    return [_run(run, filename, n if many else None) for n, run in enumerate(runs)]
