"""Spans of one trace -> agent steps that keep the tree (agent -> LLM call -> tool call).

Decisions (what a research team reading the trace wants):

* Spans are walked depth first, children in start-time order (file order on ties). A span whose
  parent is not in the trace is a root (``metadata["orphan_spans"]`` counts them).
* An **agent span** (OpenInference ``AGENT``, ``gen_ai.operation.name = invoke_agent``, an
  Agents SDK ``agent`` span, ...) becomes one ``system`` step "<agent> invoked" with the input it was
  given; every step below it belongs to that agent and hangs under that step, so the viewer can
  fold one agent invocation. Its final output becomes a step only when no step below says it.
* An **LLM span** becomes one step per message. LLM calls resend the whole conversation, so an
  input message whose text was already shown earlier in the trace (as any step) is not shown again
  (``metadata["repeated_inputs_hidden"]`` counts them): the transcript reads like the conversation,
  not like N copies of it. The answer carries the model, the token counts and the timing.
* A **tool span** becomes a ``tool_call`` step (unless the LLM's answer already made that call: then
  the output hangs under that answer) and a ``tool_output`` step under the call.
* Handoffs and guardrails are ``system`` steps; a span's error is added to its last step (or becomes a
  ``system`` step), since errors are what failure analysis looks for.
* Chain/wrapper spans show nothing themselves (their children do), except a childless one with
  content. The root's input is the trace's task; the root's output becomes a last step when no
  step already says it.
* Who speaks: the message's own ``name``, else the agent whose invocation holds the span, else an
  agent the span names, else the role (``user``, ``assistant``, ``tool``).

A trace with no content, or one where no step has an agent although the format names agents, is
refused with a ParseError that names the file, the record, the format and what was looked for.
"""

from __future__ import annotations

from collections import Counter

from traces.parsers.base import ParsedStep, ParsedTrace, ParseError
from traces.parsers.render import Message, render
from traces.parsers.spans.model import AGENT, CHAIN, EVENT, GUARDRAIL, HANDOFF, LLM, TOOL, Msg, Span, iso

_ROLE_KIND = {"system": "system", "developer": "system", "tool": "tool_output", "function": "tool_output"}


class _Builder:
    def __init__(self, spans: list[Span]) -> None:
        self.spans = spans
        self.msgs: list[Message] = []
        self.extra: list[dict] = []  # per step: parent, model, tokens, timing
        self.seen: set[str] = set()  # texts already shown (inputs repeating one are hidden)
        self.calls_by_id: dict[str, int] = {}
        self.calls_by_sig: dict[tuple[str, str], int] = {}
        self.hidden = 0
        self.span_id = ""  # the span being walked: each step records the span it came from

    def emit(self, agent: str, kind: str, content: str, label: str, parent: int | None, **extra: object) -> int:
        self.msgs.append(Message(agent, kind, content, label))
        self.extra.append({"parent": parent, "span": self.span_id, **extra})
        return len(self.msgs) - 1

    def walk(self, span: Span, children: dict[str, list[Span]], agent: str, anchor: int | None) -> None:
        first = len(self.msgs)
        self.span_id = span.id
        kind = span.kind
        if kind == AGENT:
            agent = span.agent or span.name or agent
            text = span.input_text
            if text:
                self.seen.add(text.strip())
            anchor = self.emit(
                agent, "system", f"{agent} invoked" + (f"\n\n{text}" if text else ""), "agent", anchor, **_timing(span)
            )
        elif kind == LLM:
            self.llm(span, agent or span.agent, anchor)
        elif kind == TOOL:
            self.tool(span, agent or span.agent, anchor)
        elif kind == HANDOFF:
            src = span.agent or agent
            self.emit(
                src, "system", f"handoff: {src or '?'} -> {span.target or '?'}", "handoff", anchor, **_timing(span)
            )
            self.msgs[-1].recipient = span.target or ""
        elif kind == GUARDRAIL:
            text = span.output_text or span.input_text
            self.emit(
                agent or span.agent,
                "system",
                f"guardrail {span.name}" + (f": {text}" if text else ""),
                "guardrail",
                anchor,
                **_timing(span),
            )
        elif kind == EVENT and (text := span.output_text or span.input_text):
            self.emit(
                agent or span.agent,
                "system",
                f"{span.name}: {text}" if span.name else text,
                "event",
                anchor,
                **_timing(span),
            )
        kids = children.get(span.id, ())
        for child in kids:
            self.walk(child, children, agent, anchor)
        self.span_id = span.id
        if kind in (AGENT, CHAIN) and span.output_text and not self._said(span.output_text, first):
            if kind == AGENT or not kids or span.parent == "":
                who = agent or span.agent or "assistant"
                self.emit(who, "message", span.output_text, "output", anchor, **_timing(span))
        elif kind == CHAIN and not kids and span.input_text and len(self.msgs) == first:
            self.emit(agent or span.agent, "message", span.input_text, span.name or "input", anchor)
        if span.error:
            if len(self.msgs) > first:
                self.msgs[-1].content += f"\n\nerror: {span.error}"
            else:
                self.emit(agent or span.agent, "system", f"error in {span.name or kind}: {span.error}", "error", anchor)

    def _said(self, text: str, since: int) -> bool:
        t = text.strip()
        return any(m.content.strip() == t for m in self.msgs[since:])

    def llm(self, span: Span, agent: str, anchor: int | None) -> None:
        model = span.model
        for m in span.inputs:
            key = _key(m)
            if key in self.seen:
                self.hidden += 1
                continue
            self.seen.add(key)
            self.message(m, agent, anchor)  # the model did not write its inputs: no model on them
        first_out = True
        for m in span.outputs:
            self.seen.add(_key(m))
            extra: dict = {"model": model}
            if first_out:
                extra.update(_timing(span), input_tokens=span.input_tokens, output_tokens=span.output_tokens)
                first_out = False
            self.message(m, agent, anchor, default_role="assistant", **extra)
        if first_out and (span.input_tokens or span.output_tokens) and self.extra:
            # a call whose answer was not recorded: its tokens still count, on the call's last input
            last = self.extra[-1]
            last.setdefault("input_tokens", span.input_tokens)
            last.setdefault("output_tokens", span.output_tokens)

    def message(self, m: Msg, agent: str, anchor: int | None, default_role: str = "", **extra: object) -> None:
        role = m.role or default_role
        kind = _ROLE_KIND.get(role, "message")
        if m.tool_calls:
            kind = "tool_call"
        if role in ("assistant", "model", "ai"):
            who = m.name or agent or role
        elif role in ("system", "developer", "tool", "function"):
            who = agent or m.name or role
        else:
            who = m.name or role or agent
        content = m.content
        if m.tool_calls:
            calls = "\n".join(f"call {c.name}({c.arguments})" for c in m.tool_calls)
            content = f"{content}\n{calls}" if content else calls
        if not content.strip():
            return
        parent = self.calls_by_id.get(m.tool_call_id, anchor) if kind == "tool_output" else anchor
        i = self.emit(who, kind, content, "tool result" if kind == "tool_output" else role, parent, **extra)
        for c in m.tool_calls:
            if c.id:
                self.calls_by_id[c.id] = i
            self.calls_by_sig.setdefault((c.name, _norm_args(c.arguments)), i)

    def tool(self, span: Span, agent: str, anchor: int | None) -> None:
        name = span.tool_name or span.name
        call = self.calls_by_id.get(span.tool_call_id) if span.tool_call_id else None
        if call is None:
            call = self.calls_by_sig.pop((name, _norm_args(span.tool_args)), None)
        if call is None:
            call = self.emit(
                agent, "tool_call", f"call {name}({span.tool_args})", f"tool call {name}", anchor, **_timing(span)
            )
        output = span.output_text
        if span.error and not output:  # a failed tool: its error is its output
            output, span.error = f"error: {span.error}", ""
            self.seen.add(output[7:].strip())
        if output:
            self.seen.add(output.strip())  # the next LLM call resends it as a tool (or user) message
            self.emit(agent, "tool_output", output, f"tool result {name}", call, **_timing(span))


def _key(m: Msg) -> str:
    return m.content.strip() + "".join(f"\ncall {c.name}({_norm_args(c.arguments)})" for c in m.tool_calls)


def _norm_args(args: str) -> str:
    return "".join(args.split())


def _timing(span: Span) -> dict:
    out: dict = {}
    if span.start is not None:
        out["started_at"] = iso(span.start)
        if span.end is not None and span.end >= span.start:
            out["duration_ms"] = int(round((span.end - span.start) * 1000))
    return out


def _span_tree(spans: list[Span]) -> tuple[list[Span], dict[str, list[Span]], int]:
    """The roots and each span's children, in time order (start, then the order read), and how many
    spans name a parent that is not in the trace (kept as roots)."""
    ids = {s.id for s in spans}
    children: dict[str, list[Span]] = {}
    roots: list[Span] = []
    orphans = 0
    for s in spans:
        if s.parent and s.parent in ids and s.parent != s.id:
            children.setdefault(s.parent, []).append(s)
        else:
            orphans += bool(s.parent)
            roots.append(s)

    def when(s: Span) -> tuple[float, int]:
        return (s.start if s.start is not None else float("inf"), s.order)

    for kids in children.values():
        kids.sort(key=when)
    roots.sort(key=when)
    return roots, children, orphans


def _trace_meta(
    spans: list[Span], steps: list, b: _Builder, info: dict, trace_id: str, orphans: int
) -> tuple[dict, Counter]:
    """What the trace keeps beyond its steps: span ids by step, the models and tokens, the
    OpenTelemetry resource's service, scope, session, tags and workflow."""
    models = Counter(st.model for st in steps if st.model)
    meta: dict = {"source_format": "json", "spans": len(spans)}
    # the span each step came from (position = step index): located errors given by span id
    # (TRAIL's labels) find their step through it
    meta["span_ids"] = [ex.get("span", "") for ex in b.extra]
    if trace_id:
        meta["trace_id"] = trace_id
    if orphans:
        meta["orphan_spans"] = orphans
    if b.hidden:
        meta["repeated_inputs_hidden"] = b.hidden
    for k in ("service", "scope", "session", "tags", "workflow"):
        if k in info:
            meta[k] = info[k]
    tokens_in = sum(st.input_tokens or 0 for st in steps)
    tokens_out = sum(st.output_tokens or 0 for st in steps)
    if len(models) > 1:  # the trace's LLM is the one that wrote most steps (the first on a tie); all are kept
        meta["models"] = dict(models)
    if tokens_in or tokens_out:
        meta["tokens"] = {"input": tokens_in, "output": tokens_out}
    return meta, models


def spans_to_trace(
    spans: list[Span],
    *,
    format: str,
    filename: str = "",
    record: int | None = None,
    mas_name: str = "",
    looked_for: str = "",
    names_agents: bool = True,
    info: dict | None = None,
) -> ParsedTrace:
    """One trace's spans -> a ParsedTrace with steps that know their parent. Raises ParseError."""
    if not spans:
        raise ParseError(f"{format}: the record holds no spans", filename=filename, record=record)
    trace_id = spans[0].trace
    where = f"{format}: trace {trace_id}" if trace_id else format
    roots, children, orphans = _span_tree(spans)
    b = _Builder(spans)
    for root in roots:
        b.walk(root, children, "", None)
    if not b.msgs:
        raise ParseError(
            f"{where}: no content in its {len(spans)} span(s): none has messages, input/output values or tool calls"
            + (f" (looked for {looked_for})" if looked_for else ""),
            filename=filename,
            record=record,
        )
    if names_agents and not any(m.agent for m in b.msgs):
        raise ParseError(
            f"{where}: every step's agent is unknown (no agent span, agent name or message role)",
            filename=filename,
            record=record,
        )
    raw, steps = render(b.msgs)
    _attach(steps, b.extra)
    root = roots[0]
    info = dict(info or {})
    for s in spans:
        for k, v in s.info.items():
            info.setdefault(k, v)
    meta, models = _trace_meta(spans, steps, b, info, trace_id, orphans)
    task = str(info.get("task") or root.input_text or _first_user_message(roots, children))
    return ParsedTrace(
        format=format,
        raw_text=raw,
        steps=steps,
        mas_name=str(info.get("framework") or mas_name),
        llm_name=models.most_common(1)[0][0] if models else str(info.get("model") or ""),
        benchmark=str(info.get("benchmark") or ""),
        task=task[:20000],
        external_id=str(info.get("trace_id") or trace_id or ""),
        outcome=str(info.get("outcome") or ""),
        metadata={**meta, "title": str(info.get("title") or root.name or "")},
    )


def _first_user_message(roots: list[Span], children: dict[str, list[Span]]) -> str:
    """The task when the root does not say it: the first user message of the trace, depth first."""
    stack = list(reversed(roots))
    while stack:
        span = stack.pop()
        for m in span.inputs:
            if m.role == "user" and m.content.strip():
                return m.content
        stack.extend(reversed(children.get(span.id, ())))
    return ""


def _attach(steps: list[ParsedStep], extra: list[dict]) -> None:
    for st, ex in zip(steps, extra, strict=True):
        st.parent = ex.get("parent")
        st.model = str(ex.get("model") or "")[:100]
        st.input_tokens = ex.get("input_tokens")
        st.output_tokens = ex.get("output_tokens")
        st.started_at = str(ex.get("started_at") or "")
        st.duration_ms = ex.get("duration_ms")
