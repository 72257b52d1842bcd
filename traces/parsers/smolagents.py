"""smolagents memory steps: ``agent.memory.get_full_steps()`` (a list of step dicts), one agent's or
several agents' (``{"agents": {"manager": [...], "search_agent": [...]}}`` or a list of
``{"name", "steps"}``), optionally wrapped as ``{"agent_name" | "name", "model_id", "steps"}``.

Step dicts carry no type field; the keys say which step it is: ``system_prompt``
(SystemPromptStep), ``task`` (TaskStep), ``plan`` (PlanningStep), ``step_number`` /
``model_output`` / ``observations`` (ActionStep), ``output`` / ``final_answer`` (FinalAnswerStep).
An ActionStep becomes up to four steps: the model output (a message, with ``token_usage`` or
``input_token_count``/``output_token_count`` and ``timing`` or ``start_time``/``duration``), one tool
call per ``tool_calls`` entry, the ``observations`` (tool output) and its ``error``.

Agents: the wrapper's name; a bare list is one agent called "agent" (smolagents' memory does not
name it). A manager's memory names its managed agents where their reports come back ("Here is the
final answer from your managed agent 'search_agent': ..."): the report is that agent's step,
addressed to the manager, and the call that handed it the work (by name, or in a code agent's code)
has it as recipient. With several agents whose steps carry timing, steps are ordered by start time, so the
manager's call to a managed agent is followed by that agent's steps.
"""

from __future__ import annotations

import re

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.render import Message, text_of
from traces.parsers.shapes import as_dict, as_list, build_trace, call_text, json_text, rows_of, text, usage_details

LABEL = "smolagents memory steps"
# What smolagents' managed-agent wrapper returns to its manager (prompt template managed_agent.report)
_REPORT = re.compile(r"^Here is the final answer from your managed agent '([^'\n]+)':", re.M)


def sniff(head: str) -> bool:
    return (
        '"step_number"' in head
        and any(k in head for k in ('"model_output', '"observations"', '"action_output"'))
        or ('"model_input_messages"' in head)
    )


def _timing(step: dict) -> tuple[object, object]:
    timing = as_dict(step.get("timing"))
    start = timing.get("start_time", step.get("start_time"))
    duration = timing.get("duration", step.get("duration"))
    if duration is None and isinstance(timing.get("end_time"), int | float) and isinstance(start, int | float):
        duration = timing["end_time"] - start
    return start, duration * 1000 if isinstance(duration, int | float) else None


def _details(step: dict) -> dict:
    start, duration_ms = _timing(step)
    usage = step.get("token_usage")
    if usage is None and ("input_token_count" in step or "output_token_count" in step):
        usage = {"input_tokens": step.get("input_token_count"), "output_tokens": step.get("output_token_count")}
    return usage_details(usage, timestamp=start, duration_ms=duration_ms)


def _managed_agents(agents: list[tuple[str, list]]) -> set[str]:
    """The managed agents whose reports a manager's observations hold."""
    names: set[str] = set()
    for _agent, steps in agents:
        for step in steps:
            if isinstance(step, dict) and isinstance(step.get("observations"), str):
                names.update(_REPORT.findall(step["observations"]))
    return names


def _called(managed: set[str], name: str, arguments: object) -> str:
    """The managed agent a tool call hands work to: called by name (a tool-calling manager), or
    called in the code a code agent runs (``search_agent(task=...)``); "" for an ordinary tool."""
    if name in managed:
        return name
    code = text_of(arguments)
    return next((m for m in sorted(managed) if re.search(rf"\b{re.escape(m)}\s*\(", code)), "")


def _step_messages(agent: str, step: dict, managed: frozenset[str] | set[str] = frozenset()) -> list[Message]:
    if "system_prompt" in step:
        return [Message(agent, "system", text_of(step["system_prompt"]), "system prompt")]
    if "task" in step and "step_number" not in step:
        return [Message("user", "message", text_of(step["task"]), "task")]
    if "plan" in step:
        return [Message(agent, "message", text_of(step["plan"]), "plan", _details(step))]
    if ("output" in step or "final_answer" in step) and "step_number" not in step:
        return [Message(agent, "message", json_text(step.get("output", step.get("final_answer"))), "final answer")]
    out = []
    model_output = step.get("model_output")
    if model_output is None:
        model_output = as_dict(step.get("model_output_message")).get("content")
    label = f"step {step['step_number']}" if isinstance(step.get("step_number"), int) else ""
    out.append(Message(agent, "message", text_of(model_output), label, _details(step)))
    for call in as_list(step.get("tool_calls")):
        c = as_dict(call)
        fn = as_dict(c.get("function")) or c
        name, arguments = text(fn.get("name")), fn.get("arguments")
        to = _called(set(managed), name, arguments) if managed else ""
        out.append(Message(agent, "tool_call", call_text(name, arguments), "", recipient=to))
    if step.get("observations") not in (None, ""):
        observations = text_of(step["observations"])
        report = _REPORT.search(observations)
        if report:  # a managed agent's answer: its own words, handed to its manager
            out.append(Message(report[1], "message", observations, "report to manager", recipient=agent))
        else:
            out.append(Message(agent, "tool_output", observations, "observations"))
    error = step.get("error")
    if error:
        e = as_dict(error)
        body = f"{text(e.get('type')) or 'Error'}: {text(e.get('message'))}" if e else text_of(error)
        out.append(Message(agent, "tool_output", body, "error"))
    if step.get("is_final_answer") and step.get("action_output") is not None:
        out.append(Message(agent, "message", json_text(step["action_output"]), "final answer"))
    return out


def _agents(obj: object, filename: str) -> tuple[list[tuple[str, list]], dict]:
    meta: dict = {}
    if isinstance(obj, list) and obj and all(isinstance(x, dict) and isinstance(x.get("steps"), list) for x in obj):
        return [
            (text(x.get("name") or x.get("agent_name")) or f"agent {i + 1}", x["steps"]) for i, x in enumerate(obj)
        ], meta
    if isinstance(obj, list):
        return [("agent", obj)], meta
    if not isinstance(obj, dict):
        raise ParseError(f"read as {LABEL}: expected a list of steps or an object with 'steps'", filename=filename)
    for key in ("model_id", "model"):
        if text(obj.get(key)):
            meta["model_id"] = obj[key]
    agents = obj.get("agents")
    if isinstance(agents, dict):
        return [(str(name), as_list(steps)) for name, steps in agents.items()], meta
    if isinstance(agents, list):
        return _agents(agents, filename)[0], meta
    steps = obj.get("steps", obj.get("memory"))
    if not isinstance(steps, list):
        raise ParseError(f"read as {LABEL}: no 'steps' list", filename=filename)
    return [(text(obj.get("agent_name") or obj.get("name")) or "agent", steps)], meta


def parse_smolagents(obj: object, filename: str = "") -> ParsedTrace:
    agents, meta = _agents(obj, filename)
    managed = _managed_agents(agents)
    timed: list[tuple[float, int, list[Message]]] = []
    order = 0
    for agent, steps in agents:
        starts: list[float | None] = []
        for step in steps:
            if not isinstance(step, dict):
                raise ParseError(f"read as {LABEL}: step {order + 1} of {agent} is not an object", filename=filename)
            start = _timing(step)[0]
            starts.append(float(start) if isinstance(start, int | float) else None)
        # an untimed step (a task, the system prompt) takes the time of the agent's next timed step
        following: float = float("inf")
        for i in range(len(steps) - 1, -1, -1):
            start = starts[i]
            if start is None:
                starts[i] = following
            else:
                following = start
        for step, start in zip(steps, starts, strict=True):
            timed.append((start if start is not None else float("inf"), order, _step_messages(agent, step, managed)))
            order += 1
    if len(agents) > 1 and any(t[0] != float("inf") for t in timed):
        timed.sort(key=lambda t: (t[0], t[1]))
    msgs = [m for _, _, ms in timed for m in ms]
    task = next((m.content for m in msgs if m.role == "task"), "")
    trace = build_trace("smolagents", LABEL, msgs, filename=filename, mas_name="smolagents", task=task, metadata=meta)
    if not trace.llm_name and meta.get("model_id"):
        trace.llm_name = str(meta["model_id"])
    return trace


# ------------------------------------------------------------------ benchmark output (one record per task)

RUN_LABEL = "smolagents benchmark output"
# smolagents' examples/smolagents_benchmark/run.py and open_deep_research/run_gaia.py write one JSON
# line per task; ``intermediate_steps`` is ``agent.write_memory_to_messages()`` as dicts (roles
# user / assistant / system / tool-call / tool-response, content a list of {type, text} parts).
_RUN_KEYS = ('"true_answer"', '"agent_action_type"', '"augmented_question"')
_ROLE_KINDS = {"system": "system", "tool-call": "tool_call", "tool-response": "tool_output", "tool": "tool_output"}
_AGENT_OF_TYPE = {"code": "CodeAgent", "tool-calling": "ToolCallingAgent", "vanilla": "model"}


def sniff_run(head: str) -> bool:
    return '"question"' in head and any(k in head for k in _RUN_KEYS) and '"step_number"' not in head


def _run_messages(steps: object, agent: str, n: int, filename: str) -> list[Message]:
    if isinstance(steps, str):  # the "vanilla" runs: the model's answer is the whole trace
        return [Message(agent, "message", steps, "assistant")] if steps.strip() else []
    if not isinstance(steps, list):
        raise ParseError(
            f"read as {RUN_LABEL}: 'intermediate_steps' is {type(steps).__name__}, expected a list",
            filename=filename,
            record=n,
        )
    out = []
    for i, m in enumerate(steps):
        if isinstance(m, str):  # memory steps written with str()
            out.append(Message(agent, "log", m, "step"))
            continue
        if not isinstance(m, dict):
            raise ParseError(f"read as {RUN_LABEL}: step {i + 1} is not an object", filename=filename, record=n)
        role = text(m.get("role")).lower().removeprefix("messagerole.")
        content = text_of(m.get("content"))
        calls = [_call(c) for c in as_list(m.get("tool_calls"))]
        body = "\n".join([content, *calls]) if content else "\n".join(calls)
        if not role and not body:
            raise ParseError(
                f"read as {RUN_LABEL}: step {i + 1} has no role and no content", filename=filename, record=n
            )
        who = "user" if role == "user" else "tool" if role in ("tool-response", "tool") else agent
        kind = _ROLE_KINDS.get(role, "tool_call" if calls else "message")
        out.append(Message(who, kind, body, role, usage_details(m.get("token_usage"))))
    return out


def _call(call: object) -> str:
    c = as_dict(call)
    fn = as_dict(c.get("function")) or c
    return call_text(text(fn.get("name")), fn.get("arguments"))


def parse_smolagents_run(obj: object, filename: str = "") -> list[ParsedTrace]:
    traces = []
    for n, rec in enumerate(rows_of(obj, filename=filename, what=RUN_LABEL)):
        agent = _AGENT_OF_TYPE.get(text(rec.get("agent_action_type")), "agent")
        msgs = _run_messages(rec.get("intermediate_steps"), agent, n, filename)
        if not msgs:
            error = text(rec.get("agent_error")) or (
                text(rec.get("answer")) if not rec.get("intermediate_steps") else ""
            )
            why = f" (the run failed: {error[:200]})" if error else ""
            raise ParseError(f"read as {RUN_LABEL}: record has no intermediate steps{why}", filename=filename, record=n)
        question = text(rec.get("original_question")) or text(rec.get("question"))
        meta = {
            k: rec[k]
            for k in ("answer", "prediction", "true_answer", "source", "token_counts", "start_time", "end_time")
            if k in rec
        }
        for k in (
            "agent_action_type",
            "parsing_error",
            "iteration_limit_exceeded",
            "agent_error",
            "augmented_question",
        ):
            if rec.get(k) is not None:
                meta[k] = rec[k]
        trace = build_trace(
            "smolagents_run", RUN_LABEL, msgs, filename=filename, record=n, mas_name="smolagents", task=question
        )
        trace.metadata.update(meta)
        trace.metadata["smolagents_record"] = n
        trace.llm_name = text(rec.get("model_id")) or text(rec.get("agent_name")) or trace.llm_name
        trace.benchmark = text(rec.get("source")) or trace.benchmark
        trace.external_id = text(rec.get("task_id")) or trace.external_id
        traces.append(trace)
    return traces
