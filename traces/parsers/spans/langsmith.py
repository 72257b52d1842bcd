"""LangSmith runs exports: a run tree (``child_runs`` nested), a flat list of runs linked by
``parent_run_id``, ``{"runs": [...]}``, or one run per line (JSONL).

A run: ``{"id", "trace_id", "parent_run_id", "name", "run_type": "chain" | "llm" | "tool" |
"retriever" | "prompt" | "parser", "inputs", "outputs", "start_time", "end_time", "error",
"extra": {"metadata": {"langgraph_node", "ls_model_name"}, "invocation_params": {"model"}},
"prompt_tokens", "completion_tokens", "child_runs"}``. LLM inputs are ``{"messages": [[...]]}``
(LangChain messages, serialised as ``{"lc": 1, "type": "constructor", "id": [..., "HumanMessage"],
"kwargs": {...}}`` or as ``{"type": "human", "content"}`` / ``{"role", "content"}``) or
``{"prompts": [...]}``; outputs ``{"generations": [[{"text", "message"}]], "llm_output":
{"token_usage"}}``. A chain run that is a LangGraph node (``metadata.langgraph_node``) is an agent
invocation named after the node; other chains are wrappers.
"""

from __future__ import annotations

from collections.abc import Iterator

from traces.parsers.base import ParseError
from traces.parsers.spans.conventions import chat_message
from traces.parsers.spans.model import AGENT, CHAIN, LLM, TOOL, Msg, Span, as_int, as_text, decode_json, epoch

LOOKED_FOR = "runs with inputs/outputs (llm messages or generations, tool input/output)"
_LC_ROLES = {
    "HumanMessage": "user",
    "AIMessage": "assistant",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "tool",
    "ChatMessage": "",
    "AIMessageChunk": "assistant",
}
_TYPE_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}
_SKIP_NODES = frozenset({"__start__", "__end__", "tools", "LangGraph"})


def is_langsmith(obj: object) -> bool:
    return isinstance(obj, dict) and "run_type" in obj and ("inputs" in obj or "outputs" in obj)


def langsmith_spans(run: dict, *, filename: str, record: int, order: int = 0) -> Iterator[Span]:
    stack = [(run, "")]
    while stack:
        raw, parent = stack.pop()
        if not isinstance(raw, dict) or not raw.get("id"):
            raise ParseError("LangSmith: a run is not an object with an id", filename=filename, record=record)
        order += 1
        span = _run(raw, parent, order, record)
        yield span
        kids = raw.get("child_runs") or ()
        stack.extend((c, span.id) for c in reversed(kids))


def _run(raw: dict, parent: str, order: int, record: int) -> Span:
    extra = raw.get("extra") if isinstance(raw.get("extra"), dict) else {}
    meta = extra.get("metadata") if isinstance(extra.get("metadata"), dict) else {}
    params = extra.get("invocation_params") if isinstance(extra.get("invocation_params"), dict) else {}
    typ = str(raw.get("run_type") or "chain")
    kind = {"llm": LLM, "chat_model": LLM, "tool": TOOL}.get(typ, CHAIN)
    name = str(raw.get("name") or "")
    node = str(meta.get("langgraph_node") or "")
    if kind == CHAIN and node and node == name and node not in _SKIP_NODES:
        kind = AGENT
    span = Span(
        id=str(raw["id"]),
        trace=str(raw.get("trace_id") or ""),
        parent=str(raw.get("parent_run_id") or parent or ""),
        name=name,
        kind=kind,
        order=order,
        record=record,
        start=epoch(raw.get("start_time")),
        end=epoch(raw.get("end_time")),
        agent=name if kind == AGENT else "",
        model=str(meta.get("ls_model_name") or params.get("model") or params.get("model_name") or ""),
        input_tokens=as_int(raw.get("prompt_tokens")),
        output_tokens=as_int(raw.get("completion_tokens")),
        error=as_text(raw.get("error")),
    )
    inputs = raw.get("inputs") if isinstance(raw.get("inputs"), dict) else {}
    outputs = raw.get("outputs") if isinstance(raw.get("outputs"), dict) else {}
    if kind == LLM:
        _llm(span, inputs, outputs)
    elif kind == TOOL:
        span.tool_name = name
        span.tool_args = as_text(inputs.get("input", inputs) if inputs else "")
        out = outputs.get("output", outputs) if outputs else ""
        if isinstance(out, dict) and "content" in out:
            span.tool_call_id = str(out.get("tool_call_id") or (out.get("kwargs") or {}).get("tool_call_id") or "")
            out = out["content"]
        elif isinstance(out, dict) and isinstance(out.get("kwargs"), dict):
            span.tool_call_id = str(out["kwargs"].get("tool_call_id") or "")
            out = out["kwargs"].get("content", out)
        span.output_text = as_text(out)
    else:
        span.input_text = _value_text(inputs)
        span.output_text = _value_text(outputs)
    if not parent and not span.parent:
        span.info["task"] = _value_text(inputs)
    return span


def _value_text(d: dict) -> str:
    """A chain's inputs/outputs: the single value when there is one key, else the JSON."""
    if not d:
        return ""
    d = {k: v for k, v in d.items() if v not in (None, "", [], {})}
    if not d:
        return ""
    if len(d) == 1:
        (value,) = d.values()
        if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
            msgs = [lc_message(m) for m in value]
            if all(m.content or m.tool_calls for m in msgs):
                return msgs[-1].content
        return as_text(value)
    return as_text(d)


def _llm(span: Span, inputs: dict, outputs: dict) -> None:
    msgs = inputs.get("messages")
    if isinstance(msgs, list) and msgs and isinstance(msgs[0], list):
        msgs = msgs[0]
    if isinstance(msgs, list):
        span.inputs = [lc_message(m) for m in msgs if isinstance(m, dict)]
    elif isinstance(inputs.get("prompts"), list):
        span.inputs = [Msg("user", as_text(p)) for p in inputs["prompts"]]
    gens = outputs.get("generations")
    if isinstance(gens, list) and gens and isinstance(gens[0], list):
        gens = gens[0]
    for g in gens or ():
        if isinstance(g, dict):
            m = g.get("message")
            msg = lc_message(m) if isinstance(m, dict) else Msg("assistant", as_text(g.get("text")))
            msg.role = msg.role or "assistant"
            span.outputs.append(msg)
            usage = (m or {}).get("kwargs", m or {}).get("usage_metadata") if isinstance(m, dict) else None
            if isinstance(usage, dict):
                span.input_tokens = span.input_tokens or as_int(usage.get("input_tokens"))
                span.output_tokens = span.output_tokens or as_int(usage.get("output_tokens"))
    if not span.outputs and isinstance(outputs.get("messages"), list):
        span.outputs = [lc_message(m) for m in outputs["messages"] if isinstance(m, dict)]
    llm_output = outputs.get("llm_output") if isinstance(outputs.get("llm_output"), dict) else {}
    usage = llm_output.get("token_usage") if isinstance(llm_output.get("token_usage"), dict) else {}
    span.input_tokens = span.input_tokens or as_int(usage.get("prompt_tokens"))
    span.output_tokens = span.output_tokens or as_int(usage.get("completion_tokens"))
    span.model = span.model or str(llm_output.get("model_name") or "")


def lc_message(m: dict) -> Msg:
    """A LangChain message in any of its serialisations -> Msg."""
    if m.get("lc") == 1 and isinstance(m.get("kwargs"), dict):
        cls = (m.get("id") or ["", ""])[-1]
        kw = m["kwargs"]
        role = _LC_ROLES.get(cls, str(kw.get("role") or ""))
        return _from_kwargs(kw, role)
    if "type" in m and "role" not in m:
        return _from_kwargs(m, _TYPE_ROLES.get(str(m["type"]), str(m["type"])))
    return chat_message(m)


def _from_kwargs(kw: dict, role: str) -> Msg:
    calls = kw.get("tool_calls") or (kw.get("additional_kwargs") or {}).get("tool_calls") or []
    norm = []
    for c in calls:
        if isinstance(c, dict) and "args" in c:  # LangChain's own ToolCall: {name, args, id}
            norm.append({"id": c.get("id"), "function": {"name": c.get("name"), "arguments": c.get("args")}})
        elif isinstance(c, dict):
            norm.append(c)
    return chat_message(
        {
            "role": role,
            "content": kw.get("content"),
            "name": kw.get("name"),
            "tool_calls": norm,
            "tool_call_id": kw.get("tool_call_id"),
        }
    )


_OTEL_KINDS = {"llm": LLM, "chat_model": LLM, "tool": TOOL, "chain": CHAIN}


def otel_run_io(span: Span, attrs: dict) -> None:
    """LangSmith's OpenTelemetry exporter (langsmith ``OTELExporter``): a run's inputs and outputs
    are plain ``gen_ai.prompt`` / ``gen_ai.completion`` attributes holding the run's JSON
    (``{"messages": [[...]]}`` with ``{"generations": [[...]]}`` for a chat model, any dict for a
    chain or tool), its type in ``langsmith.span.kind``. Read only where no other convention gave
    the span content; text that is not JSON is kept as it is."""
    if span.inputs or span.outputs or span.input_text or span.output_text:
        return
    raw_in, raw_out = attrs.get("gen_ai.prompt"), attrs.get("gen_ai.completion")
    if not isinstance(raw_in, str | dict | list) and not isinstance(raw_out, str | dict | list):
        return
    inputs, outputs = decode_json(raw_in), decode_json(raw_out)
    kind = _OTEL_KINDS.get(str(attrs.get("langsmith.span.kind") or "").lower())
    if kind is not None and span.kind == CHAIN:
        span.kind = kind
    node = str(attrs.get("langsmith.metadata.langgraph_node") or "")
    if span.kind == CHAIN and node and node == span.name:  # a LangGraph node: an agent's turn
        span.kind, span.agent = AGENT, span.agent or node
    if span.kind == TOOL:
        span.tool_name = span.tool_name or span.name
    if isinstance(inputs, list) and inputs and all(isinstance(m, dict) for m in inputs):
        inputs = {"messages": inputs}
    if isinstance(inputs, dict) and isinstance(outputs, dict | type(None)) and (
        "messages" in inputs or "prompts" in inputs or "generations" in (outputs or {})
    ):
        _llm(span, inputs, outputs or {})
        choices = (outputs or {}).get("choices")
        if not span.outputs and isinstance(choices, list):  # an OpenAI chat completion
            span.outputs = [
                chat_message({"role": "assistant", **c["message"]})
                for c in choices
                if isinstance(c, dict) and isinstance(c.get("message"), dict)
            ]
        if span.inputs or span.outputs:
            if span.kind == CHAIN:
                span.kind = LLM
            return
    text_in = _value_text(inputs) if isinstance(inputs, dict) else as_text(raw_in) if raw_in else ""
    text_out = _value_text(outputs) if isinstance(outputs, dict) else as_text(raw_out) if raw_out else ""
    if span.kind == LLM:  # a model's prompt and answer as text: one message each
        span.inputs = [Msg("user", text_in)] if text_in else []
        span.outputs = [Msg("assistant", text_out)] if text_out else []
    elif span.kind == TOOL:  # the tool's arguments and its result
        span.tool_args, span.output_text = span.tool_args or text_in, text_out
    else:
        span.input_text, span.output_text = text_in, text_out
