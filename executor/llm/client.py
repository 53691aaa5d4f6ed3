"""LLM settings and one LLM call through the `openai` client, with its exact bytes."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from executor import gojson
from executor.params import json_type_name
from executor.plan import basic_authorization, split_userinfo
from executor.redact import redact_secrets
from executor.tracecontext import llm_headers
from executor.wire import is_transient_status

if TYPE_CHECKING:
    import openai


SITE_ERROR_ANALYSIS = "error_analysis"
SITE_SEMANTIC_RETRY = "semantic_retry"
SITE_CORRECTION = "correction"

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_TIMEOUT_S = 60.0
# Local OpenAI-compatible servers need no key, but the openai client insists on one.
PLACEHOLDER_API_KEY = "unused"

# reference §4.2: deterministic analysis, short answers.
ANALYZER_TEMPERATURE = 0.0
ANALYZER_MAX_TOKENS = 500
# reference §5.1: the re-resolver may return a complete parameters object.
RERESOLVER_TEMPERATURE = 0.0
RERESOLVER_MAX_TOKENS = 1000
# reference §5.5 passes 0 ("provider default"); we send explicit values so the record is exact.
LEGACY_TEMPERATURE = 0.0
LEGACY_MAX_TOKENS = 1000

# A failed LLM endpoint call is tried at most this often: the first call and 2 retries.
LLM_MAX_TRIES = 3

# How an `LLMExchange` failed (`error_kind`); the first three mean the endpoint was unavailable.
FAILURE_HTTP_STATUS = "http_status"
FAILURE_TIMEOUT = "timeout"
FAILURE_CONNECTION = "connection"
FAILURE_RESPONSE = "response"
FAILURE_OTHER = "other"
ENDPOINT_FAILURES = frozenset({FAILURE_HTTP_STATUS, FAILURE_TIMEOUT, FAILURE_CONNECTION})


# ---------------------------------------------------------------------------------------------
# Settings


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """Where and how to reach the OpenAI-compatible endpoint.

    `base_url` never holds userinfo; `api_key_source` says where the credential came from:
    "llm.api_key", "OPENAI_API_KEY", "llm.base_url userinfo", "OPENAI_BASE_URL userinfo", or
    "none" (then `api_key` is the placeholder and the client sends `Bearer unused`).
    `basic_auth` is the (user, password) of URL userinfo, sent as HTTP Basic when no key is set.
    """

    base_url: str
    api_key: str
    model: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    api_key_source: str = "llm.api_key"
    basic_auth: tuple[str, str] | None = None

    @property
    def has_credential(self) -> bool:
        """False when no key and no userinfo was configured anywhere."""
        return self.api_key_source != API_KEY_SOURCE_NONE

    def authorization_header(self) -> str:
        """The Authorization header the client sends with every call."""
        if self.basic_auth is not None:
            return basic_authorization(*self.basic_auth)
        return f"Bearer {self.api_key}"


API_KEY_SOURCE_NONE = "none"


def _setting_text(plan_llm: Mapping[str, Any], key: str) -> str | None:
    value = plan_llm.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"llm.{key} must be a string, got {type(value).__name__} {value!r}")
    return value.strip() or None


def _env_text(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    if not isinstance(value, str):
        return None
    return value.strip() or None


class LLMSettingsError(ValueError):
    """An LLM setting from the environment that no client can use; the message is one line."""


def _checked_env_base_url(url: str) -> str:
    """`OPENAI_BASE_URL` as `llm.base_url` is checked in a plan: http(s), a host, a valid port."""
    try:
        parts = urlsplit(url)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError:
        usable = False
    if not usable:
        if "@" in url:  # the userinfo may be a key: never print it
            scheme, _, rest = url.rpartition("//")
            url = f"{scheme}//[REDACTED]@{rest.rpartition('@')[2]}" if scheme else "[REDACTED]"
        raise LLMSettingsError(
            f"OPENAI_BASE_URL: expected an http:// or https:// URL with a host and a port "
            f"from 0 to 65535, got {json.dumps(url, ensure_ascii=True)}"
        )
    return url


def resolve_llm_settings(
    plan_llm: Mapping[str, Any] | None, env: Mapping[str, str] | None = None
) -> LLMSettings | None:
    """Settings from the plan's `llm` block, then the environment; None when no base_url is set.

    base_url: `llm.base_url` > `OPENAI_BASE_URL`. Credential: `llm.api_key` > `OPENAI_API_KEY`
    > userinfo in the base URL (sent as HTTP Basic) > none (the placeholder "unused", and
    `api_key_source` "none" so the run can say so). Userinfo is always taken out of the URL, so
    it never overrides an explicit key. model: `llm.model` > `TRUVAG3_LLM_MODEL` >
    "gpt-4o-mini". `llm.timeout_s` > 60. Empty strings count as unset. A wrongly typed value
    raises ValueError naming the field; an `OPENAI_BASE_URL` that is not an http(s) URL with a
    host and a valid port raises `LLMSettingsError` (the plan's `llm.base_url` is checked when
    the plan is loaded).
    """
    env = os.environ if env is None else env
    plan_llm = plan_llm or {}
    plan_base_url = _setting_text(plan_llm, "base_url")
    raw_base_url = plan_base_url or _env_text(env, "OPENAI_BASE_URL")
    if raw_base_url is None:
        return None
    if plan_base_url is None:
        _checked_env_base_url(raw_base_url)
    base_url, userinfo = split_userinfo(raw_base_url)
    basic_auth = None
    if (api_key := _setting_text(plan_llm, "api_key")) is not None:
        source = "llm.api_key"
    elif (api_key := _env_text(env, "OPENAI_API_KEY")) is not None:
        source = "OPENAI_API_KEY"
    elif userinfo is not None:
        api_key, basic_auth = PLACEHOLDER_API_KEY, userinfo
        source = f"{'llm.base_url' if plan_base_url else 'OPENAI_BASE_URL'} userinfo"
    else:
        api_key, source = PLACEHOLDER_API_KEY, API_KEY_SOURCE_NONE
    model = _setting_text(plan_llm, "model") or _env_text(env, "TRUVAG3_LLM_MODEL") or DEFAULT_MODEL
    timeout_s = plan_llm.get("timeout_s", DEFAULT_TIMEOUT_S)
    if timeout_s is None:
        timeout_s = DEFAULT_TIMEOUT_S
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or timeout_s <= 0:
        raise ValueError(f"llm.timeout_s must be a positive number of seconds, got {timeout_s!r}")
    return LLMSettings(base_url=base_url, api_key=api_key, model=model,
                       timeout_s=float(timeout_s), api_key_source=source, basic_auth=basic_auth)


# ---------------------------------------------------------------------------------------------
# One LLM call


@dataclass(frozen=True, slots=True)
class LLMExchange:
    """One chat call, complete and untruncated.

    `request_body`/`response_body` are the exact HTTP bytes (b"" when none was sent or received);
    `raw_text` the assistant message content; `error` a transport, HTTP, timeout or response-shape
    failure, None when the endpoint answered a usable completion, and `error_kind` which of
    those it was (`FAILURE_*`). `response_headers` are those of the answer, when one came.
    """

    site: str
    model: str
    base_url: str
    temperature: float
    max_tokens: int
    messages: tuple[dict[str, Any], ...]
    request_body: bytes
    response_status: int | None
    response_body: bytes
    raw_text: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    latency_ms: float
    error: str | None
    started_at: float
    error_kind: str | None = None
    response_headers: dict[str, str] = field(default_factory=dict)

    @property
    def endpoint_failure(self) -> str | None:
        """`HTTP 503`, `timeout` or `connection error` when the endpoint was unavailable."""
        if self.error is None or self.error_kind not in ENDPOINT_FAILURES:
            return None
        if self.error_kind == FAILURE_HTTP_STATUS:
            return f"HTTP {self.response_status}"
        return "timeout" if self.error_kind == FAILURE_TIMEOUT else "connection error"

    @property
    def transient_failure(self) -> bool:
        """True when the endpoint failed in a way worth retrying: 408/429/5xx, timeout, connection.

        The same classes as a tool's transient failures (seed 000 §3).
        """
        if self.error_kind in (FAILURE_TIMEOUT, FAILURE_CONNECTION):
            return True
        return self.error_kind == FAILURE_HTTP_STATUS and is_transient_status(
            self.response_status or 0
        )

    @property
    def retry_after_header(self) -> str | None:
        """The `Retry-After` header of an HTTP error answer, if it sent one."""
        for name, value in self.response_headers.items():
            if name.lower() == "retry-after":
                return value
        return None


def failure_summary(labels: Sequence[str]) -> str:
    """Endpoint failures counted in first-seen order: `HTTP 503 ×2, timeout ×1`."""
    return ", ".join(f"{label} ×{count}" for label, count in Counter(labels).items())


@dataclass(frozen=True, slots=True)
class _CompletionFields:
    raw_text: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    error: str | None = None
    error_kind: str | None = None


def _token_count(usage: Mapping[str, Any], key: str) -> int | None:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _completion_fields(response_body: bytes) -> _CompletionFields:
    """The assistant content and token usage of a chat.completion body, or why there are none."""
    try:
        payload = gojson.loads(response_body)
    except (ValueError, RecursionError) as e:
        return _CompletionFields(
            error=f"LLM response body is not JSON: {e}", error_kind=FAILURE_RESPONSE
        )
    if not isinstance(payload, dict):
        kind = json_type_name(payload)
        return _CompletionFields(
            error=f"LLM response body must be a JSON object, got {kind}",
            error_kind=FAILURE_RESPONSE,
        )
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
    prompt_tokens = _token_count(usage, "prompt_tokens")
    completion_tokens = _token_count(usage, "completion_tokens")
    total_tokens = _token_count(usage, "total_tokens")
    if total_tokens is None and prompt_tokens is not None and completion_tokens is not None:
        total_tokens = prompt_tokens + completion_tokens
    counts = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": total_tokens,
    }
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        return _CompletionFields(
            error="LLM response has no choices", error_kind=FAILURE_RESPONSE, **counts
        )
    first = choices[0] if isinstance(choices[0], dict) else {}
    message = first.get("message") if isinstance(first.get("message"), dict) else {}
    content = message.get("content")
    return _CompletionFields(raw_text=content if isinstance(content, str) else None, **counts)


def _request_bytes(request: Any) -> bytes:
    try:
        return bytes(request.content)
    except Exception:
        return b""


def _response_bytes(response: Any) -> bytes:
    try:
        return bytes(response.content)
    except Exception:
        return b""


def _response_headers(response: Any) -> dict[str, str]:
    """An answer's headers (request id, Retry-After, rate limits, cost), names lower-case."""
    try:
        return {str(name).lower(): str(value) for name, value in response.headers.items()}
    except Exception:
        return {}


class LLMClient:
    """An `openai.AsyncOpenAI` client that turns every chat call into an `LLMExchange`.

    No retries (the executor's policy decides), the settings' timeout, and injectable clocks:
    `clock` stamps `started_at`, `monotonic` measures `latency_ms`.
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.perf_counter,
    ) -> None:
        # Imported here: openai costs ~0.3 s to import and runs without an LLM never need it.
        import openai

        self.settings = settings
        self._clock = clock
        self._monotonic = monotonic
        self._api: Any = openai
        # Userinfo left in the URL would make httpx send it instead of the key, so it never
        # reaches the client; `basic_auth` (the userinfo of resolved settings) is sent only
        # when there is no key.
        self._openai: openai.AsyncOpenAI = openai.AsyncOpenAI(
            base_url=split_userinfo(settings.base_url)[0],
            api_key=settings.api_key,
            max_retries=0,
            timeout=settings.timeout_s,
            default_headers=(
                {"Authorization": settings.authorization_header()}
                if settings.basic_auth is not None else None
            ),
        )

    async def aclose(self) -> None:
        """Close the underlying HTTP connections."""
        await self._openai.close()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def failed_exchange(
        self,
        *,
        site: str,
        messages: Sequence[Mapping[str, Any]],
        temperature: float,
        max_tokens: int,
        error: str,
    ) -> LLMExchange:
        """An exchange for a call that never reached the endpoint: its prompt failed to build."""
        return self._exchange(
            site, messages, temperature, max_tokens,
            fields=_CompletionFields(error=error, error_kind=FAILURE_OTHER),
            started_at=self._clock(), latency_ms=0.0,
        )  # fmt: skip

    def _exchange(
        self,
        site: str,
        messages: Sequence[Mapping[str, Any]],
        temperature: float,
        max_tokens: int,
        *,
        fields: _CompletionFields,
        started_at: float,
        latency_ms: float,
        request_body: bytes = b"",
        response_status: int | None = None,
        response_body: bytes = b"",
        response_headers: dict[str, str] | None = None,
    ) -> LLMExchange:
        """The record of one call to this client's model and endpoint."""
        return LLMExchange(
            site=site,
            model=self.settings.model,
            base_url=self.settings.base_url,
            temperature=temperature,
            max_tokens=max_tokens,
            messages=tuple(dict(m) for m in messages),
            request_body=request_body,
            response_status=response_status,
            response_body=response_body,
            raw_text=fields.raw_text,
            prompt_tokens=fields.prompt_tokens,
            completion_tokens=fields.completion_tokens,
            total_tokens=fields.total_tokens,
            latency_ms=latency_ms,
            # The endpoint's error text may echo a credential (OpenAI's 401 quotes the key): it
            # reaches decisions, `run` and `explain`, so it is redacted as the store's errors are.
            error=redact_secrets(fields.error) if fields.error else fields.error,
            started_at=started_at,
            error_kind=fields.error_kind,
            response_headers=response_headers or {},
        )

    async def chat(
        self,
        *,
        site: str,
        messages: list[dict[str, Any]],
        temperature: float,
        max_tokens: int,
    ) -> LLMExchange:
        """Send one chat completion; LLM-side failures come back in `error`, never as exceptions."""
        started_at = self._clock()
        started = self._monotonic()
        request_body = b""
        response_status: int | None = None
        response_body = b""
        response_headers: dict[str, str] = {}
        try:
            raw = await self._openai.chat.completions.with_raw_response.create(
                model=self.settings.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=temperature,
                max_tokens=max_tokens,
                extra_headers=llm_headers(),  # W3C traceparent when telemetry propagates it
            )
        except self._api.APIStatusError as e:
            request_body = _request_bytes(e.request)
            response_status = e.status_code
            response_body = _response_bytes(e.response)
            response_headers = _response_headers(e.response)
            detail = e.message.removeprefix(f"Error code: {e.status_code}").removeprefix(" - ")
            error = f"LLM endpoint answered HTTP {e.status_code}"
            fields = _CompletionFields(
                error=f"{error}: {detail}" if detail else error, error_kind=FAILURE_HTTP_STATUS
            )
        except self._api.APITimeoutError as e:
            request_body = _request_bytes(e.request)
            timeout_s = self.settings.timeout_s
            fields = _CompletionFields(
                error=f"LLM request timed out after {timeout_s:g} s", error_kind=FAILURE_TIMEOUT
            )
        except self._api.APIConnectionError as e:
            request_body = _request_bytes(e.request)
            cause = e.__cause__ or e
            fields = _CompletionFields(
                error=f"LLM connection to {self.settings.base_url} failed: "
                f"{type(cause).__name__}: {cause}",
                error_kind=FAILURE_CONNECTION,
            )
        except Exception as e:
            fields = _CompletionFields(
                error=f"LLM call failed: {type(e).__name__}: {e}", error_kind=FAILURE_OTHER
            )
        else:
            request_body = _request_bytes(raw.http_request)
            response_status = raw.status_code
            response_body = _response_bytes(raw)
            response_headers = _response_headers(raw)
            fields = _completion_fields(response_body)
        latency_ms = (self._monotonic() - started) * 1000.0
        return self._exchange(
            site, messages, temperature, max_tokens,
            fields=fields, started_at=started_at, latency_ms=latency_ms,
            request_body=request_body, response_status=response_status,
            response_body=response_body, response_headers=response_headers,
        )  # fmt: skip
