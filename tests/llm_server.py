"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions protocol, scripted per test.

    server = LLMServer().start()
    server.push(Reply(good_answer(codes)), Status(429, headers={"Retry-After": "1"}), Drop())
    ... point a judge run at server.url ...
    server.requests  # every request body received, in order
    server.headers   # and the headers of each (e.g. Authorization)

Scripted actions are consumed in order, one per request; when the script is empty the
``default`` callable (request body -> action) answers: by default a valid judge answer for the
codes the prompt asks for. Used by the tests (tests/annotations/conftest.py) and the bench.

``LLMServer(reasoning=True)`` behaves like OpenAI's reasoning models (o1, o3, gpt-5): a request
with ``max_tokens`` or a non-default ``temperature`` gets the 400 those models send (naming the
parameter), and answers report ``completion_tokens_details.reasoning_tokens``. ``default_answer``
answers the MAST authors' ``@@`` format when the prompt is agentdash's (``mast_answer``), JSON
otherwise. ``require_key`` answers 401 to any other bearer token.

``refuse_roles=("system",)`` refuses a message in those roles with the 400 the real servers send
(``role_style``): "openai" is OpenAI's o1-mini/o1-preview, also on Azure ("Unsupported value:
'messages[0].role' does not support 'system' with this model.", param ``messages[0].role``; the
same for ``developer``); "vllm" is vLLM serving Gemma, whose chat template says "System role not
supported" (param null) and, to a first message in another role, "Conversation roles must
alternate user/assistant/user/assistant/...". Every refusal the server sends (role or
reasoning parameter) is kept in ``refusals``.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# codes of any version: "1.1", a split's "1.2a", an imported taxonomy's "X.1" (ends at the sentence's ".\n")
CODES_RE = re.compile(r"one entry for each of these codes: ([0-9A-Za-z_., -]+?)\.?(?:\n|$)")


@dataclass
class Reply:
    content: str
    delay: float = 0.0
    prompt_tokens: int = 1000
    completion_tokens: int = 200
    reasoning_tokens: int | None = None  # None: 150 on a reasoning server, absent otherwise


@dataclass
class Status:
    code: int
    body: dict | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Drop:
    """Close the connection without answering (after reading the request)."""

    delay: float = 0.0


Action = Reply | Status | Drop


def codes_of(body: dict) -> list[str]:
    text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    found = CODES_RE.findall(text)
    if not found:
        return []
    return [c.strip().rstrip(".") for c in found[-1].split(",") if c.strip()]


def good_answer(codes: Iterable[str], present: Iterable[str] = (), evidence: int = 0) -> str:
    present = set(present)
    return json.dumps(
        {
            "task_success": "no" if present else "yes",
            "modes": [
                {
                    "code": c,
                    "present": c in present,
                    "evidence_steps": [evidence] if c in present else [],
                    "rationale": f"Mode {c} {'shows' if c in present else 'does not show'} in the trace.",
                }
                for c in codes
            ],
        }
    )


MAST_CODES = ("1.1", "1.2", "1.3", "1.4", "1.5", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "3.1", "3.2", "3.3")


def is_mast_prompt(body: dict) -> bool:
    text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    return "@@" in text and "*** begin of things you should answer ***" in text


def mast_answer(present: Iterable[str] = ("1.3",), omit: Iterable[str] = (), success: bool = False) -> str:
    """An answer in the MAST authors' format (between @@ marks), leaving out the codes in `omit`."""
    present, omit = set(present), set(omit)
    lines = [
        "@@",
        "A. The agents repeated a step and nobody checked the result.",
        f"B. {'yes' if success else 'no'}",
        "C.",
    ]
    lines += [f"{c} {'yes' if c in present else 'no'}" for c in MAST_CODES if c not in omit]
    return "\n".join([*lines, "@@"])


def default_answer(body: dict) -> Action:
    if is_mast_prompt(body):
        return Reply(mast_answer())
    codes = codes_of(body)
    return Reply(good_answer(codes, present=codes[:1]))


def reasoning_refusal(body: dict) -> Status | None:
    """The 400 an o1/o3/gpt-5 model sends for max_tokens or a non-default temperature (None: accepted)."""
    if "max_tokens" in body:
        return Status(
            400,
            {
                "error": {
                    "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                    "Use 'max_completion_tokens' instead.",
                    "type": "invalid_request_error",
                    "param": "max_tokens",
                    "code": "unsupported_parameter",
                }
            },
        )
    if "temperature" in body and body["temperature"] != 1:
        return Status(
            400,
            {
                "error": {
                    "message": f"Unsupported value: 'temperature' does not support {body['temperature']} with this "
                    "model. Only the default (1) value is supported.",
                    "type": "invalid_request_error",
                    "param": "temperature",
                    "code": "unsupported_value",
                }
            },
        )
    return None


def role_refusal(body: dict, refuse_roles: Iterable[str], style: str = "openai") -> Status | None:
    """The 400 a server that does not take these roles sends (None: every message's role is accepted)."""
    refuse = set(refuse_roles)
    for i, message in enumerate(body.get("messages", [])):
        role = message.get("role")
        if role not in refuse:
            continue
        if style == "vllm":
            text = (
                "System role not supported"
                if role == "system"
                else ("Conversation roles must alternate user/assistant/user/assistant/...")
            )
            return Status(
                400, {"object": "error", "message": text, "type": "BadRequestError", "param": None, "code": 400}
            )
        return Status(
            400,
            {
                "error": {
                    "message": f"Unsupported value: 'messages[{i}].role' does not support '{role}' with this model.",
                    "type": "invalid_request_error",
                    "param": f"messages[{i}].role",
                    "code": "unsupported_value",
                }
            },
        )
    return None


def _reasoning_usage(reasoning: bool, action: Reply) -> dict:
    n = action.reasoning_tokens if action.reasoning_tokens is not None else (150 if reasoning else None)
    return {} if n is None else {"completion_tokens_details": {"reasoning_tokens": n}}


class LLMServer:
    def __init__(
        self,
        default: Callable[[dict], Action] = default_answer,
        *,
        reasoning: bool = False,
        require_key: str = "",
        refuse_roles: Iterable[str] = (),
        role_style: str = "openai",
    ):
        self.default = default
        self.reasoning = reasoning
        self.require_key = require_key
        self.refuse_roles = tuple(refuse_roles)
        self.role_style = role_style
        self.refusals: list[str] = []  # the message of every refusal sent (roles, reasoning parameters)
        self.script: deque[Action] = deque()
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.times: list[float] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.httpd: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    # -- control
    def push(self, *actions: Action) -> LLMServer:
        with self.lock:
            self.script.extend(actions)
        return self

    def next_action(self, body: dict, headers: dict[str, str] | None = None) -> Action:
        with self.lock:
            self.requests.append(body)
            self.headers.append(headers or {})
            self.times.append(time.monotonic())
            if self.require_key and (headers or {}).get("authorization") != f"Bearer {self.require_key}":
                return Status(401, {"error": {"message": "Incorrect API key provided.", "code": "invalid_api_key"}})
            refusal = role_refusal(body, self.refuse_roles, self.role_style) if self.refuse_roles else None
            if refusal is None and self.reasoning:
                refusal = reasoning_refusal(body)
            if refusal is not None:
                err = refusal.body.get("error", refusal.body) if isinstance(refusal.body, dict) else {}
                self.refusals.append(str(err.get("message", refusal.body)))
                return refusal
            if self.script:
                return self.script.popleft()
        return self.default(body)

    @property
    def n_requests(self) -> int:
        with self.lock:
            return len(self.requests)

    @property
    def url(self) -> str:
        assert self.httpd is not None
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> LLMServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Send each write at once, as real servers do: with Nagle's algorithm on, the body
            # waited for the client's delayed ACK of the headers, adding ~40 ms to every answer.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._handle()
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                action = server.next_action(body, {k.lower(): v for k, v in self.headers.items()})
                if action.delay:
                    time.sleep(action.delay)
                if isinstance(action, Drop):
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(2)
                    return
                if isinstance(action, Status):
                    payload = action.body if action.body is not None else {"error": {"message": f"HTTP {action.code}"}}
                    self._send(action.code, payload, action.headers)
                    return
                self._send(
                    200,
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "test-model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": action.content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": action.prompt_tokens,
                            "completion_tokens": action.completion_tokens,
                            "total_tokens": action.prompt_tokens + action.completion_tokens,
                            **_reasoning_usage(server.reasoning, action),
                        },
                    },
                )

            def _send(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to tell it

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.request_queue_size = 128
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
