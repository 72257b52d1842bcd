"""A scripted stand-in for an LLM, for the demo only: a chat-completions server on 127.0.0.1.

It is not a model and says so in its name: it marks a mode present when the trace shows a
keyword typical of that mode (or, for a few traces, by a fixed hash of trace and code, so it
disagrees with the humans now and then the way a real judge does), and answers the project's
JSON format or the MAST authors' ``@@`` format, whichever the prompt asks. Like a reasoning
model it refuses the ``system`` role (as OpenAI's o1-mini and o1-preview do), ``max_tokens`` and
a non-default temperature, with HTTP 400s in OpenAI's words, and reports reasoning tokens, so
the demo shows the request adapting and the connection recording the accepted form.

It also takes POSTs under ``/hooks/`` with a 200: the demo's alert webhook points there. Asked to
look for a behaviour (a behaviour search), it quotes the steps holding two or more of the
behaviour's longer words, each quote a line copied from its step.

``make demo`` (scripts/demo.sh) runs it for as long as the demo runs, on a fixed loopback port
(``DEMO_LLM_PORT``, default the site's PORT + 1000), through ``manage.py serve_demo_llm``
(``make_server``); the demo's connection points there, so *Test connection* and new judge
runs work. ``serve`` runs it on a free port for a block (``seed_demo`` without a stand-in URL,
e.g. in tests).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEYWORDS = {
    "1.1": r"requirement|specification|instead of",
    "1.3": r"again|repeat|same step",
    "1.5": r"terminat|keep going|continue",
    "2.2": r"assum|unclear",
    "2.3": r"unrelated|off.topic",
    "2.6": r"but (?:then|instead)",
    "3.1": r"done|finished|complete",
    "3.2": r"no test|untested|not verified",
    "3.3": r"test|verif",
}
# POSTs here are taken as the demo's webhook receiver (the demo's alert webhook points at it)
HOOK_PATH = "/hooks/"
BEHAVIOUR_MARK = "look for one behaviour"
STEP_RE = re.compile(r"^\[step (\d+)\] [^\n]*:\n(.*?)(?=^\[step \d+\] |\Z)", re.S | re.M)
CODES_RE = re.compile(r"one entry for each of these codes: ([0-9., ]+)")
MAST_CODES = ("1.1", "1.2", "1.3", "1.4", "1.5", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "3.1", "3.2", "3.3")


def _present(text: str, code: str) -> bool:
    if code in KEYWORDS and re.search(KEYWORDS[code], text, re.IGNORECASE):
        return int(hashlib.sha256(f"{code}|{text[:2000]}".encode()).hexdigest(), 16) % 5 != 0
    return int(hashlib.sha256(f"{text[:2000]}|{code}".encode()).hexdigest(), 16) % 11 == 0


def answer(body: dict) -> tuple[int, dict]:
    for i, message in enumerate(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "system":
            return 400, {
                "error": {
                    "message": f"Unsupported value: 'messages[{i}].role' does not support 'system' with this model.",
                    "type": "invalid_request_error",
                    "param": f"messages[{i}].role",
                    "code": "unsupported_value",
                }
            }
    if "max_tokens" in body:
        return 400, {
            "error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "param": "max_tokens",
            }
        }
    if body.get("temperature", 1) != 1:
        return 400, {
            "error": {
                "message": f"Unsupported value: 'temperature' does not support {body['temperature']} with this model.",
                "param": "temperature",
            }
        }
    text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    if BEHAVIOUR_MARK in text:
        return 200, _completion(body, text, behaviour_answer(text))
    trace = text.split("## The trace", 1)[-1].split("## Your answer", 1)[0]
    trace = trace.split("Here is the trace:", 1)[-1].split("Also, here are the explanations", 1)[0]
    if "@@" in text and "begin of things you should answer" in text:
        lines = ["@@", "A. (scripted demo answer) The trace shows the modes marked yes.", "B. no", "C."]
        lines += [f"{c} {'yes' if _present(trace, c) else 'no'}" for c in MAST_CODES]
        content = "\n".join([*lines, "@@"])
    else:
        found = CODES_RE.findall(text)
        codes = [c.strip().rstrip(".") for c in found[-1].split(",")] if found else []
        content = json.dumps(
            {
                "task_success": "unknown",
                "modes": [
                    {
                        "code": c,
                        "present": _present(trace, c),
                        "evidence_steps": [],
                        "rationale": "scripted demo answer: a keyword of this mode appears"
                        if _present(trace, c)
                        else "",
                    }
                    for c in codes
                ],
            }
        )
    return 200, _completion(body, text, content)


def _completion(body: dict, text: str, content: str) -> dict:
    tokens_in = max(1, len(text) // 4)
    return {
        "id": "demo",
        "object": "chat.completion",
        "model": body.get("model", "demo"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": 400,
            "total_tokens": tokens_in + 400,
            "completion_tokens_details": {"reasoning_tokens": 250},
        },
    }


def behaviour_answer(text: str) -> str:
    """A behaviour search's answer: the steps holding two or more of the behaviour's words of 5+
    letters (their first 5 letters, so "approves" finds "approved"), one line of each quoted."""
    behaviour = text.split("Behaviour:", 1)[-1].split("\n", 1)[0].lower()
    stems = {w[:5] for w in re.findall(r"[a-z]{5,}", behaviour)}
    quotes = []
    for number, content in STEP_RE.findall(text.split("Trace:", 1)[-1]):
        lines = [ln.strip() for ln in content.splitlines() if ln.strip()]
        hits = [ln for ln in lines if sum(s in ln.lower() for s in stems) >= 1]
        if len({s for s in stems if s in content.lower()}) >= 2 and hits:
            quotes.append({"step": int(number), "quote": hits[0][:200]})
    return json.dumps(
        {
            "present": bool(quotes),
            "score": min(1.0, 0.5 + 0.1 * len(quotes)) if quotes else 0.1,
            "quotes": quotes[:5],
            "explanation": "scripted demo answer: steps with the behaviour's words" if quotes else "none of its words",
        }
    )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        payload: dict
        if self.path.startswith(HOOK_PATH):  # the demo's webhook receiver: takes every alert
            code, payload = 200, {"received": len(raw)}
        else:
            try:
                code, payload = answer(json.loads(raw or b"{}"))
            except json.JSONDecodeError:
                code, payload = 400, {"error": {"message": "the body is not JSON"}}
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def make_server(port: int = 0) -> ThreadingHTTPServer:
    """The stand-in bound to 127.0.0.1:`port` (0: a free port); OSError when the port is taken."""
    httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    httpd.daemon_threads = True
    return httpd


def base_url(httpd: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}/v1"


@contextmanager
def serve():
    """Run the scripted server for the block; yields its base URL (http://127.0.0.1:<port>/v1)."""
    httpd = make_server(0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield base_url(httpd)
    finally:
        httpd.shutdown()
        httpd.server_close()
