"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 for tests.

    with ScriptedLLMServer() as llm:
        llm.script('{"should_retry": true, ...}', LLMReply(status=500))
        llm.script_for("convert_currency", '{"should_retry": false, ...}')
        ...  # point the plan's `llm.base_url` at llm.base_url

Each POST to `/v1/chat/completions` takes the next reply: first from the oldest `script_for`
matcher whose substring occurs in the request's prompt (all message contents joined) and that
still has replies, else from the `script` queue. Replies are used once; when none is left the
server answers 500 with an OpenAI-style error naming the exhausted script.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Self

from tests.support.tool_server import LoopbackHTTPServer, ReceivedRequest

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
CREATED_AT = 1_767_225_600


@dataclass(frozen=True, slots=True)
class LLMReply:
    """One scripted answer.

    `content` becomes `choices[0].message.content` (None sends JSON null). A non-200 `status`
    without `body` sends an OpenAI-style error whose message is `content`. `body` (bytes or str)
    replaces the whole response body verbatim. `usage` replaces the computed usage object;
    `delay_s` is waited before answering; `drop` closes the connection without any response;
    `headers` are added to the response (a `Retry-After`, say).
    """

    content: str | None = ""
    status: int = 200
    body: bytes | str | None = None
    delay_s: float = 0.0
    usage: Mapping[str, Any] | None = None
    drop: bool = False
    finish_reason: str = "stop"
    headers: Mapping[str, str] | None = None


def prompt_text(request_json: Any) -> str:
    """All message contents of a chat request joined by newlines ("" when there are none)."""
    if not isinstance(request_json, Mapping):
        return ""
    messages = request_json.get("messages")
    if not isinstance(messages, list):
        return ""
    parts = [m.get("content") for m in messages if isinstance(m, Mapping)]
    return "\n".join(part for part in parts if isinstance(part, str))


def computed_usage(prompt: str, content: str | None) -> dict[str, int]:
    """Deterministic token counts: a quarter of the characters, rounded down."""
    prompt_tokens = len(prompt) // 4
    completion_tokens = len(content or "") // 4
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


class ScriptedLLMServer(LoopbackHTTPServer):
    """An OpenAI-compatible server answering chat completions from a script of replies."""

    def __init__(self) -> None:
        self._default_replies: deque[LLMReply] = deque()
        self._matchers: list[tuple[str, deque[LLMReply]]] = []
        super().__init__()

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`, the value for the openai client's `base_url`."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[ReceivedRequest]:
        """Every request received, in arrival order (`.json` is the decoded chat request)."""
        with self._lock:
            return list(self._requests)

    @property
    def prompts(self) -> list[str]:
        """The prompt text of every chat request received, in arrival order."""
        return [prompt_text(r.json) for r in self.requests]

    def script(self, *replies: str | LLMReply) -> Self:
        """Append replies for any request; a plain string is the assistant content."""
        with self._lock:
            self._default_replies.extend(_as_reply(r) for r in replies)
        return self

    def script_for(self, substring: str, *replies: str | LLMReply) -> Self:
        """Append replies used only for requests whose prompt contains `substring`."""
        with self._lock:
            self._matchers.append((substring, deque(_as_reply(r) for r in replies)))
        return self

    def pending(self) -> int:
        """How many scripted replies have not been used yet."""
        with self._lock:
            return len(self._default_replies) + sum(len(q) for _, q in self._matchers)

    def _next_reply(self, prompt: str) -> LLMReply | None:
        with self._lock:
            for substring, replies in self._matchers:
                if replies and substring in prompt:
                    return replies.popleft()
            if self._default_replies:
                return self._default_replies.popleft()
            return None

    def _handle(
        self, handler: BaseHTTPRequestHandler, request: ReceivedRequest, request_number: int
    ) -> None:
        if request.method != "POST" or request.path != CHAT_COMPLETIONS_PATH:
            message = (
                f"ScriptedLLMServer serves POST {CHAT_COMPLETIONS_PATH} only, "
                f"got {request.method} {request.path}"
            )
            self._send_json(handler, 404, _error_body(message, "not_found"))
            return
        prompt = prompt_text(request.json)
        reply = self._next_reply(prompt)
        if reply is None:
            message = (
                f"ScriptedLLMServer script exhausted: request #{request_number} has no reply left"
            )
            self._send_json(handler, 500, _error_body(message, "script_exhausted"))
            return
        if not self._wait(reply.delay_s) or reply.drop:
            self._drop(handler)
            return
        headers = dict(reply.headers or {})
        if reply.body is not None:
            raw = reply.body.encode() if isinstance(reply.body, str) else reply.body
            self._send(handler, reply.status, raw, "application/json", headers)
            return
        if reply.status != 200:
            self._send_json(
                handler,
                reply.status,
                _error_body(reply.content or "scripted error", "server_error"),
                headers,
            )
            return
        model = request.json.get("model") if isinstance(request.json, Mapping) else None
        completion = {
            "id": f"chatcmpl-scripted-{request_number}",
            "object": "chat.completion",
            "created": CREATED_AT,
            "model": model if isinstance(model, str) else "scripted-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": dict(reply.usage)
            if reply.usage is not None
            else computed_usage(prompt, reply.content),
        }
        self._send_json(handler, 200, completion, headers)

    def _send_json(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        payload: Any,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._send(
            handler, status, json.dumps(payload).encode(), "application/json", headers or {}
        )


def _as_reply(reply: str | LLMReply) -> LLMReply:
    if isinstance(reply, LLMReply):
        return reply
    if isinstance(reply, str):
        return LLMReply(content=reply)
    raise TypeError(f"a scripted reply must be a str or LLMReply, got {type(reply).__name__}")


def _error_body(message: str, error_type: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": None}}


def start_llm_server() -> ScriptedLLMServer:
    """Start a `ScriptedLLMServer`; call `close()` (or use it as a context manager) when done."""
    return ScriptedLLMServer()
