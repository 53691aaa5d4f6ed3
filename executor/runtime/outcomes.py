"""What a run reports back (attempt, step and execution outcomes) and small wire helpers."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import ssl
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import httpcore
import httpx
from httpcore._backends.anyio import AnyIOStream
from httpcore._utils import is_socket_readable

from executor.llm import (
    LayerResult,
)
from executor.params.gofmt import go_json, holds_float
from executor.plan import CapabilitySpec, StepSpec
from executor.redact import redact_sensitive_text
from executor.wire import (
    WireEnvelope,
    parse_envelope,
)

if TYPE_CHECKING:
    from executor.policy import Decision

Sleep = Callable[[float], Awaitable[None]]

STEP_SUCCEEDED = "succeeded"
STEP_FAILED = "failed"
STEP_REJECTED = "rejected"
STEP_SKIPPED = "skipped"



@dataclass(frozen=True, slots=True)
class AttemptSummary:
    """One attempt of a step as `run --json` prints it (SPEC §3.2)."""

    n: int
    attempt_number: int
    dispatched: bool
    status: int | None
    parameters: dict[str, Any]
    action: str
    rule: str
    reason: str
    delay_ms: float | None
    delay_source: str | None
    layer: str | None
    transport_error: str | None
    sent: bool = False
    recovery: str | None = None
    impact: str | None = None
    budgets: dict[str, int | None] = field(default_factory=dict)
    decision: Decision | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """SPEC §3.2 attempt shape plus a few explanatory fields."""
        return {
            "n": self.n,
            "attempt_number": self.attempt_number,
            "dispatched": self.dispatched,
            "sent": self.sent,
            "status": self.status,
            "parameters": self.parameters,
            "action": self.action,
            "rule": self.rule,
            "reason": self.reason,
            "delay_ms": self.delay_ms,
            "delay_source": self.delay_source,
            "layer": self.layer,
            "transport_error": self.transport_error,
            "recovery": self.recovery,
            "impact": self.impact,
            "budgets": dict(self.budgets),
        }


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """How a step ended."""

    id: str
    status: str
    dispatch_count: int
    validation_retries: int
    semantic_retries: int
    attempts: tuple[AttemptSummary, ...]
    tool: str = ""
    capability: str = ""
    parameters: dict[str, Any] | None = None
    result: Any = None
    error: str | None = None
    skip_reason: str | None = None
    final_action: str | None = None
    final_rule: str | None = None
    recovery: str | None = None
    impact: str | None = None
    attempt_counter: int = 0
    max_attempts: int = 0
    start_time: float | None = None
    end_time: float | None = None
    reused_from: str | None = None

    @property
    def retry_exhausted(self) -> bool:
        """TruvaG3's flag: stopped with every attempt used (failed, or rejected when no attempt
        reached the tool: every connection refused)."""
        stopped = self.status in (STEP_FAILED, STEP_REJECTED)
        return stopped and self.attempt_counter >= self.max_attempts

    def to_dict(self) -> dict[str, Any]:
        """SPEC §3.2 step shape, plus TruvaG3's StepResult fields (reference §3.1)."""
        duration_ms = (
            (self.end_time - self.start_time) * 1000.0
            if self.start_time is not None and self.end_time is not None else None
        )
        return {
            "id": self.id,
            "status": self.status,
            "dispatch_count": self.dispatch_count,
            "validation_retries": self.validation_retries,
            "semantic_retries": self.semantic_retries,
            "attempts": [a.to_dict() for a in self.attempts],
            "tool": self.tool,
            "capability": self.capability,
            "parameters": self.parameters,
            "response": self.result,
            "success": self.status == STEP_SUCCEEDED,
            "error": self.error,
            "final_action": self.final_action,
            "final_rule": self.final_rule,
            "recovery": self.recovery,
            "impact": self.impact,
            "retry_exhausted": self.retry_exhausted,
            "skipped": self.status == STEP_SKIPPED,
            "skip_reason": self.skip_reason,
            "reused_from": self.reused_from,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "duration_ms": round(duration_ms, 3) if duration_ms is not None else None,
        }


@dataclass(frozen=True, slots=True)
class ExecutionOutcome:
    """How a run ended; `steps` are in plan order."""

    execution_id: str
    status: str
    steps: tuple[StepOutcome, ...]
    stop_reason: str | None
    incomplete_steps: tuple[str, ...]
    llm_calls: int
    llm_total_tokens: int
    duration_ms: float
    rerun_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The `truva-console run --json` document (SPEC §3.2)."""
        return {
            "execution_id": self.execution_id,
            "rerun_of": self.rerun_of,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "incomplete_steps": list(self.incomplete_steps),
            "llm_calls": self.llm_calls,
            "llm_total_tokens": self.llm_total_tokens,
            "duration_ms": round(self.duration_ms, 3),
            "steps": [s.to_dict() for s in self.steps],
        }


@dataclass(frozen=True, slots=True)
class HttpOutcome:
    """What one dispatch produced."""

    status: int
    headers: dict[str, str]
    body: bytes
    elapsed_ms: float
    transport_error: str | None = None
    transport_error_message: str | None = None
    ended_by_deadline: bool = False

    envelope: WireEnvelope = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The body read as a TruvaG3 envelope, parsed once per attempt.
        object.__setattr__(self, "envelope", parse_envelope(self.body))


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a step's loop reads but never changes."""

    step: StepSpec
    capability: CapabilitySpec
    url: str
    protected: dict[str, str]
    dependency_results: dict[str, Any]
    protected_paths: dict[str, tuple[str | int, ...]] = field(default_factory=dict)


@dataclass(slots=True)
class StepState:
    """Mutable per-step loop state (private to the loop)."""

    parameters: dict[str, Any]
    started_at: float = 0.0
    attempt_number: int = 1
    validation_retries: int = 0
    semantic_retries: int = 0
    dispatch_count: int = 0
    n: int = 0
    correction_layer: str | None = None
    previous_errors: list[str] = field(default_factory=list)
    attempts: list[AttemptSummary] = field(default_factory=list)


@functools.cache
def default_tls_context() -> ssl.SSLContext:
    """httpx's default TLS context, built once: loading the CA bundle took ~100 ms per run."""
    return httpx.create_ssl_context()


class _ResponseCookies(httpx.Cookies):
    """A client's cookies that read a response only when it sets one: httpx otherwise builds
    a urllib request (copying every header) per response to find no `Set-Cookie` in it."""

    def extract_cookies(self, response: httpx.Response) -> None:
        headers = response.headers
        if "set-cookie" in headers or "set-cookie2" in headers:
            super().extract_cookies(response)


# A request's head and a body up to this size leave in one write (one copy of the body).
_JOINED_WRITE_BYTES = 64 * 1024


class _SocketCheckedStream(httpcore.AsyncNetworkStream):
    """A connection's stream that answers httpcore's idle check from the socket it keeps, and
    sends a request's head with its body in one write.

    httpcore asks every idle connection of the pool whether its socket is readable (a server
    that closed it) each time it assigns a request; anyio answered by building a dict of the
    socket's attributes, `getpeername()` included (a syscall that lets other threads take the
    GIL), to find the same socket every time. The check itself is httpcore's, unchanged.
    httpcore writes the head, then the body, with nothing awaited between: the head waits here
    for the body's first write (or the response's first read) and goes with it, the same bytes
    in one `send` and one pass through anyio instead of two.
    """

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream
        self._socket = stream.get_extra_info("socket")
        # httpcore's anyio stream: its byte stream is read and written here directly.
        self._bytes = stream._stream if isinstance(stream, AnyIOStream) else None
        self._request_started = False  # a write came since the last read
        self._head = b""
        self._head_timeout: float | None = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._request_started = False
        if self._head:
            head, self._head = self._head, b""
            # What httpcore does with a failed request write: read the response all the same.
            with contextlib.suppress(httpcore.WriteError):
                await self._write(head, self._head_timeout)
        if self._bytes is None:
            return await self._stream.read(max_bytes, timeout)
        try:
            if timeout is None:
                return await self._bytes.receive(max_bytes)
            async with asyncio.timeout(timeout):
                return await self._bytes.receive(max_bytes)
        except anyio.EndOfStream:
            return b""
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(exc) from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise httpcore.ReadError(exc) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        if not self._request_started:
            self._request_started = True
            if len(buffer) <= _JOINED_WRITE_BYTES:
                self._head, self._head_timeout = buffer, timeout
                return
        if self._head:
            head, self._head = self._head, b""
            if len(buffer) > _JOINED_WRITE_BYTES:
                await self._write(head, self._head_timeout)
            else:
                buffer = head + buffer
        await self._write(buffer, timeout)

    async def _write(self, buffer: bytes, timeout: float | None) -> None:
        if self._bytes is None:
            await self._stream.write(buffer, timeout)
            return
        try:
            if timeout is None:
                await self._bytes.send(buffer)
                return
            async with asyncio.timeout(timeout):
                await self._bytes.send(buffer)
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(exc) from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise httpcore.WriteError(exc) from exc

    async def aclose(self) -> None:
        self._head = b""  # a request given up before its body: nothing of it is sent
        await self._stream.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return _SocketCheckedStream(
            await self._stream.start_tls(ssl_context, server_hostname, timeout)
        )

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self._socket is not None:
            return is_socket_readable(self._socket)
        return self._stream.get_extra_info(info)


class _SocketCheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's own network backend, its streams wrapped in `_SocketCheckedStream`."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return _SocketCheckedStream(await self._backend.connect_tcp(*args, **kwargs))

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return _SocketCheckedStream(await self._backend.connect_unix_socket(*args, **kwargs))

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


class _ToolConnection(httpcore.AsyncHTTPConnection):
    """httpcore's connection, whose locks (its own, held while it connects, and its HTTP/1.1
    connection's, taken twice per request) are asyncio's: httpcore's anyio locks pass once
    through the event loop and a cancel scope at every acquire, even when free (three extra
    loop passes per request). The same exclusion; a wait happens only when a lock is held."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._request_lock = asyncio.Lock()

    @property
    def _connection(self) -> httpcore.AsyncConnectionInterface | None:
        return self._protocol_connection

    @_connection.setter
    def _connection(self, connection: httpcore.AsyncConnectionInterface | None) -> None:
        if isinstance(connection, httpcore.AsyncHTTP11Connection):
            connection._state_lock = asyncio.Lock()
        self._protocol_connection = connection


class _ToolPool(httpcore.AsyncConnectionPool):
    """httpcore's pool of `_ToolConnection`s, which skips closing connections when none is to
    be closed (it entered a shielded anyio cancel scope for the empty list after every request
    and every response) and assigns requests without its quadratic walks of the pool."""

    def create_connection(self, origin: httpcore.Origin) -> httpcore.AsyncConnectionInterface:
        if self._proxy is not None:
            return super().create_connection(origin)
        return _ToolConnection(
            origin=origin, ssl_context=self._ssl_context, keepalive_expiry=self._keepalive_expiry,
            http1=self._http1, http2=self._http2, retries=self._retries,
            local_address=self._local_address, uds=self._uds,
            network_backend=self._network_backend, socket_options=self._socket_options,
        )

    def _assign_requests_to_connections(self) -> list[httpcore.AsyncConnectionInterface]:
        """httpcore's assignment: the same decisions in the same order. httpcore counted the
        pool by listing `is_idle()` of every connection for each idle one, and listed every
        available and every idle connection to take the first (all pure reads)."""
        closing: list[httpcore.AsyncConnectionInterface] = []
        connections = self._connections
        for connection in list(connections):
            if connection.is_closed():
                connections.remove(connection)
            elif connection.has_expired() or (
                connection.is_idle() and len(connections) > self._max_keepalive_connections
            ):
                connections.remove(connection)
                closing.append(connection)
        for pool_request in [request for request in self._requests if request.is_queued()]:
            origin = pool_request.request.url.origin
            connection = next((
                c for c in connections if c.can_handle_request(origin) and c.is_available()
            ), None)
            if connection is None:
                if len(connections) >= self._max_connections:
                    idle = next((c for c in connections if c.is_idle()), None)
                    if idle is None:
                        continue  # the request stays queued
                    connections.remove(idle)
                    closing.append(idle)
                connection = self.create_connection(origin)
                connections.append(connection)
            pool_request.assign_to_connection(connection)
        return closing

    async def _close_connections(self, closing: list[httpcore.AsyncConnectionInterface]) -> None:
        if closing:
            await super()._close_connections(closing)


# httpx's defaults (`httpx._config.DEFAULT_LIMITS`), as a plain `AsyncHTTPTransport` has them.
_TOOL_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)


class _ToolTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a `_ToolPool` that connects through `_SocketCheckedBackend`;
    otherwise httpx's defaults (HTTP/1.1, no retries, its limits and keep-alive expiry)."""

    def __init__(self, *, verify: ssl.SSLContext | bool = True) -> None:
        super().__init__(verify=verify, limits=_TOOL_LIMITS)
        self._pool = _ToolPool(
            ssl_context=httpx.create_ssl_context(verify=verify),
            max_connections=_TOOL_LIMITS.max_connections,
            max_keepalive_connections=_TOOL_LIMITS.max_keepalive_connections,
            keepalive_expiry=_TOOL_LIMITS.keepalive_expiry,
            network_backend=_SocketCheckedBackend(httpcore.AnyIOBackend()),
        )


def _environment_proxies() -> bool:
    """Whether the environment names a proxy for HTTP (what httpx's `trust_env` reads)."""
    return any(
        scheme in ("http", "https", "all") for scheme in urllib.request.getproxies()
    )


class ToolHttpClient(httpx.AsyncClient):
    """The executor's own httpx client: httpx's, with `_ResponseCookies` as its cookie jar
    (the same cookies kept and sent; ~10 % less Python per tool call) and `_ToolTransport` as
    its transport (the same requests, fewer syscalls per pooled request)."""

    def __init__(self, *, verify: ssl.SSLContext | bool = True, **kwargs: Any) -> None:
        # httpx honours HTTP(S)_PROXY / ALL_PROXY only with its own transport: where the
        # environment names a proxy, the tool calls keep going through it.
        proxied = kwargs.get("trust_env", True) and _environment_proxies()
        transport = None if proxied else _ToolTransport(verify=verify)
        super().__init__(transport=transport, verify=verify, **kwargs)
        self._response_cookies = _ResponseCookies(super().cookies.jar)

    @property
    def cookies(self) -> httpx.Cookies:
        return self._response_cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        self._response_cookies = _ResponseCookies(httpx.Cookies(cookies).jar)


def new_execution_id(now: float | None = None) -> str:
    """A sortable, readable id: UTC timestamp plus 10 random hex digits (40 bits per second)."""
    moment = datetime.fromtimestamp(now if now is not None else time.time(), tz=UTC)
    return f"{moment:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:10]}"


def encode_json_body(value: Any) -> bytes:
    """JSON bytes as Go's encoding/json writes them: sorted keys, compact, HTML-safe escapes,
    floats in Go's text (`35.0` → `35`, `1e16` → `10000000000000000`, `1e-07` → `1e-7`, `-0.0`
    → `-0`). Integers are written exactly (Go's float64 would round one past 2**53)."""
    if holds_float(value):  # Python's float text differs from Go's: the slower, exact encoder
        return go_json(value, exact_ints=True).encode("utf-8")
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return text.encode("utf-8")


class UndecodableResponse(httpx.TransportError):
    """The tool answered, but its body does not decode by its Content-Encoding (a failed
    request, classified "protocol"); the message names the status and the encoding."""


class ResponseTooLarge(httpx.TransportError):
    """The tool answered, but its body, decoded, passed `max_response_body_bytes` (a failed
    request, classified "protocol"); the message names the status, the limit and the bytes read."""


def classify_transport_error(exc: httpx.TransportError) -> str:
    """Name a transport failure: connect (never sent), timeout, reset, or protocol."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return "connect"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return "reset"
    if isinstance(exc, httpx.RemoteProtocolError):
        # httpx raises it both for a connection closed early and for bytes that are not HTTP
        # (an illegal status line, a bad header, a broken chunk): only the first is a reset.
        return "reset" if str(exc).startswith(_CLOSED_EARLY) else "protocol"
    return "protocol"


# How httpcore and h11 word a RemoteProtocolError for a connection the tool closed: before any
# response, or within the body.
_CLOSED_EARLY = ("Server disconnected", "peer closed connection")


def flatten_headers(headers: httpx.Headers) -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in headers.multi_items():
        flat[key] = f"{flat[key]}, {value}" if key in flat else value
    return flat


def first_header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None


def response_text(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")


ErrorSignature = tuple[str, str, int, str | None, str]


def error_signature(step: StepSpec, outcome: HttpOutcome) -> ErrorSignature | None:
    """What makes two outcomes "the same error" for `max_repeated_errors` (seed 003), or None
    for a 2xx, which is no error: the same tool and capability, the same status or transport
    failure (a reset and a timeout are two errors though both are status 0), the same body."""
    if 0 < outcome.status < 300:
        return None
    return (step.tool, step.capability, outcome.status, outcome.transport_error,
            hashlib.sha256(outcome.body).hexdigest())


def step_error_text(outcome: HttpOutcome) -> str:
    """The step error in TruvaG3's words, redacted; a 2xx body is a result, not error text."""
    if outcome.status == 0:
        return redact_sensitive_text(outcome.transport_error_message or "request failed")
    if 200 <= outcome.status < 300:
        return f"component returned status {outcome.status}"
    return redact_sensitive_text(
        f"component returned status {outcome.status}: {response_text(outcome.body)}"
    )


def layer_failure(result: LayerResult | None) -> str:
    if result is None:
        return "cancelled"
    if result.exchange.error:
        error = result.exchange.error
        prefix = "LLM call failed: "  # the client's own words for an unexpected error
        return error if error.startswith(prefix) else f"{prefix}{error}"
    if result.parse_error:
        return f"malformed answer: {result.parse_error}"
    return "no usable answer"
