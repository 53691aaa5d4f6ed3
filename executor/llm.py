"""LLM layers of the executor: layer-3 analyzer, layer-4 re-resolver, legacy correction callback.

Every call goes through the `openai` package to an OpenAI-compatible chat API and comes back as
an `LLMExchange` holding the exact request and response bytes. A layer returns a `LayerResult`
whose `verdict` is None whenever there is no usable correction (LLM failure, malformed, empty or
wrong-typed answer); layers never raise except `asyncio.CancelledError`. Prompts and parsing
follow TruvaG3's `error_analyzer.go`, `contextual_re_resolver.go` and `requestParameterCorrection`
(reference notes §4, §5). Error text shown to the LLM is redacted first.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from executor.params import json_type_name
from executor.plan import basic_authorization, split_userinfo
from executor.redact import redact_sensitive_text
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


def resolve_llm_settings(
    plan_llm: Mapping[str, Any] | None, env: Mapping[str, str] | None = None
) -> LLMSettings | None:
    """Settings from the plan's `llm` block, then the environment; None when no base_url is set.

    base_url: `llm.base_url` > `OPENAI_BASE_URL`. Credential: `llm.api_key` > `OPENAI_API_KEY`
    > userinfo in the base URL (sent as HTTP Basic) > none (the placeholder "unused", and
    `api_key_source` "none" so the run can say so). Userinfo is always taken out of the URL, so
    it never overrides an explicit key. model: `llm.model` > `TRUVAG3_LLM_MODEL` >
    "gpt-4o-mini". `llm.timeout_s` > 60. Empty strings count as unset. A wrongly typed value
    raises ValueError naming the field.
    """
    env = os.environ if env is None else env
    plan_llm = plan_llm or {}
    plan_base_url = _setting_text(plan_llm, "base_url")
    raw_base_url = plan_base_url or _env_text(env, "OPENAI_BASE_URL")
    if raw_base_url is None:
        return None
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
        payload = json.loads(response_body)
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
        return LLMExchange(
            site=site,
            model=self.settings.model,
            base_url=self.settings.base_url,
            temperature=temperature,
            max_tokens=max_tokens,
            messages=tuple(dict(m) for m in messages),
            request_body=b"",
            response_status=None,
            response_body=b"",
            raw_text=None,
            prompt_tokens=None,
            completion_tokens=None,
            total_tokens=None,
            latency_ms=0.0,
            error=error,
            started_at=self._clock(),
            error_kind=FAILURE_OTHER,
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
            error=fields.error,
            started_at=started_at,
            error_kind=fields.error_kind,
            response_headers=response_headers,
        )


# ---------------------------------------------------------------------------------------------
# Verdicts and parsing


@dataclass(frozen=True, slots=True)
class AnalyzerVerdict:
    """The layer-3 analyzer's answer (reference §4.1 ErrorAnalysisResult)."""

    should_retry: bool
    reason: str
    suggested_changes: dict[str, Any]
    is_transient_error: bool


@dataclass(frozen=True, slots=True)
class ResolverVerdict:
    """The layer-4 re-resolver's answer (reference §5.1 ReResolutionResult)."""

    should_retry: bool
    corrected_parameters: dict[str, Any]
    analysis: str


@dataclass(frozen=True, slots=True)
class LegacyVerdict:
    """The legacy correction callback's answer: the complete corrected parameters."""

    corrected_parameters: dict[str, Any]


Verdict = AnalyzerVerdict | ResolverVerdict | LegacyVerdict


@dataclass(frozen=True, slots=True)
class LayerResult:
    """One layer's call and outcome; `verdict` None means no correction.

    `parsed` is the decoded JSON object when there was one (also when its fields had the wrong
    types); `parse_error` says why an answer that arrived could not be used.
    """

    exchange: LLMExchange
    verdict: Verdict | None
    parse_error: str | None
    parsed: dict[str, Any] | None


class LLMParseError(ValueError):
    """An LLM answer that is not the JSON object, or not the field types, the layer expects."""


def strip_code_fences(text: str) -> str:
    """Trim, drop a leading ```json, then a leading ```, then a trailing ```; trim again (§4.4)."""
    content = text.strip()
    content = content.removeprefix("```json")
    content = content.removeprefix("```")
    content = content.removesuffix("```")
    return content.strip()


def find_json_end(text: str, start: int) -> int:
    """Index just past the object that opens at `start`, or -1 when its braces never balance.

    Braces inside strings do not count and a backslash escapes the next character in a string
    (reference §4.4 findJSONEndSimple).
    """
    depth = 0
    in_string = False
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if escaped:
            escaped = False
            continue
        if char == "\\" and in_string:
            escaped = True
            continue
        if char == '"':
            in_string = not in_string
            continue
        if in_string:
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
    return -1


def _reject_non_standard_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def extract_json_object(text: str) -> dict[str, Any]:
    """The first balanced JSON object in an LLM answer, tolerating fences and prose (§4.4)."""
    content = strip_code_fences(text)
    start = content.find("{")
    if start == -1:
        raise LLMParseError("no JSON object found in response")
    end = find_json_end(content, start)
    if end == -1:
        raise LLMParseError("invalid JSON structure in response")
    try:
        decoded = json.loads(content[start:end], parse_constant=_reject_non_standard_constant)
    except RecursionError as e:
        raise LLMParseError("failed to parse JSON: nested too deeply") from e
    except ValueError as e:
        raise LLMParseError(f"failed to parse JSON: {e}") from e
    if not isinstance(decoded, dict):
        got = json_type_name(decoded)
        raise LLMParseError(f"failed to parse JSON: expected an object, got {got}")
    return decoded


def _described(value: Any) -> str:
    """The JSON type and shortened value of an answer field: `string "true"`, `number 1`, `null`."""
    if value is None:
        return "null"
    text = json.dumps(value, ensure_ascii=False, default=str)
    shown = text if len(text) <= 80 else text[:77] + "..."
    return f"{json_type_name(value)} {shown}"


def _optional_bool(answer: Mapping[str, Any], key: str) -> bool:
    value = answer.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise LLMParseError(f"{key} must be a JSON boolean or absent, got {_described(value)}")
    return value


def _optional_text(answer: Mapping[str, Any], key: str) -> str:
    value = answer.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise LLMParseError(f"{key} must be a JSON string or absent, got {_described(value)}")
    return value


def _optional_object(answer: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = answer.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise LLMParseError(f"{key} must be a JSON object, null or absent, got {_described(value)}")
    return value


def analysis_verdict_from(answer: Mapping[str, Any]) -> AnalyzerVerdict:
    """Type-check a decoded analyzer answer; null or absent fields get their zero value.

    As Go's decoder does, a missing or null `should_retry` is false ("cannot fix").
    """
    return AnalyzerVerdict(
        should_retry=_optional_bool(answer, "should_retry"),
        reason=_optional_text(answer, "reason"),
        suggested_changes=_optional_object(answer, "suggested_changes"),
        is_transient_error=_optional_bool(answer, "is_transient_error"),
    )


def reresolution_verdict_from(answer: Mapping[str, Any]) -> ResolverVerdict:
    """Type-check a decoded re-resolver answer; null `corrected_parameters` becomes {} (§5.1)."""
    return ResolverVerdict(
        should_retry=_optional_bool(answer, "should_retry"),
        corrected_parameters=_optional_object(answer, "corrected_parameters"),
        analysis=_optional_text(answer, "analysis"),
    )


def parse_analysis(text: str) -> AnalyzerVerdict:
    """Parse a layer-3 answer; raises LLMParseError when it is malformed or wrongly typed."""
    return analysis_verdict_from(extract_json_object(text))


def parse_reresolution(text: str) -> ResolverVerdict:
    """Parse a layer-4 answer; raises LLMParseError when it is malformed or wrongly typed."""
    return reresolution_verdict_from(extract_json_object(text))


def strip_markdown_block(text: str) -> str:
    """Reference §5.5 extractJSON: what lies between a leading ```json or ``` and the next ```."""
    content = text.strip()
    for opening in ("```json", "```"):
        if content.startswith(opening):
            content = content.removeprefix(opening)
            closing = content.find("```")
            if closing != -1:
                content = content[:closing]
            break
    return content.strip()


def legacy_parameters_from(text: str) -> dict[str, Any]:
    """The corrected-parameters object of a legacy answer: fenced or bare JSON, else the first
    object inside surrounding prose. Raises LLMParseError when there is no JSON object."""
    content = strip_markdown_block(text)
    try:
        decoded = json.loads(content, parse_constant=_reject_non_standard_constant)
    except (ValueError, RecursionError):
        try:
            return extract_json_object(text)
        except LLMParseError as e:
            raise LLMParseError(f"failed to parse corrected parameters: {e}") from e
    if not isinstance(decoded, dict):
        raise LLMParseError(
            f"failed to parse corrected parameters: expected a JSON object, "
            f"got {_described(decoded)}"
        )
    return decoded


def parse_legacy_correction(text: str) -> LegacyVerdict:
    """Parse a legacy correction answer; raises LLMParseError when it holds no JSON object."""
    return LegacyVerdict(corrected_parameters=legacy_parameters_from(text))


# ---------------------------------------------------------------------------------------------
# Prompts


def _sorted_json(value: Any, *, indent: int | None) -> str:
    """JSON as Go's encoder writes a map: sorted keys; 2-space indent or compact."""
    separators = (",", ": ") if indent is not None else (",", ":")
    try:
        return json.dumps(
            value,
            indent=indent,
            separators=separators,
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
    except TypeError:
        return json.dumps(
            value, indent=indent, separators=separators, ensure_ascii=False, default=str
        )


def _user_message(prompt: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": prompt}]


def intent_text(user_query: str, step_instruction: str | None = None) -> str:
    """The user's intent as a layer prompt shows it: the query, and a step instruction beside it.

    Seed 001 gives layer 4 "the user's original query (the intent)"; a step's instruction is
    added, labelled, rather than replacing it. Without an instruction the query is shown as is.
    """
    query = user_query.strip()
    instruction = (step_instruction or "").strip()
    if not instruction or instruction == query:
        return user_query
    if not query:
        return f"Step instruction: {instruction}"
    return f"User query: {query}\nStep instruction: {instruction}"


ANALYSIS_PROMPT = """<identity>
You are an error analysis assistant that determines whether a failed tool call can be fixed by modifying its request parameters.
</identity>

<instructions>
1. Determine if the error can be fixed by changing the request parameters
2. If fixable, suggest the specific parameter changes
3. Identify transient errors (timeouts, "request canceled", service unavailable, connection refused, rate limiting, 503) by setting is_transient_error=true — these are temporary issues where retrying with the same parameters might succeed
4. Suggest retry only when the error indicates a correctable input issue: a likely typo (e.g., "Tokio" instead of "Tokyo"), invalid format (e.g., wrong date format, negative amount), or a value that can be inferred from context
5. Classify as non-retryable when the error is about permissions, authentication, or a genuinely non-existent resource
</instructions>

<capability name="{capability_name}">
{capability_description}
</capability>

<original_request>
{original_request}
</original_request>

<error_response status="{http_status}">
{error_response}
</error_response>

<user_query>
{user_query}
</user_query>

Return a JSON analysis. Output raw JSON — no markdown, no code blocks. Start with {{ and end with }}.
{{"should_retry": true/false, "reason": "...", "suggested_changes": {{...}}, "is_transient_error": true/false}}"""  # noqa: E501


def build_analysis_messages(
    *,
    http_status: int,
    error_response: str,
    original_request: Mapping[str, Any],
    user_query: str,
    capability_name: str,
    capability_description: str,
    step_id: str,
    step_instruction: str | None = None,
) -> list[dict[str, Any]]:
    """The layer-3 prompt (reference §4.3) as one user message; the error text is redacted.

    `<user_query>` holds `intent_text(user_query, step_instruction)`. `step_id` is accepted for
    symmetry with `ErrorAnalyzer.analyze`; the reference does not show it to the LLM.
    """
    prompt = ANALYSIS_PROMPT.format(
        capability_name=capability_name,
        capability_description=capability_description,
        original_request=_sorted_json(original_request, indent=2),
        http_status=http_status,
        error_response=redact_sensitive_text(error_response),
        user_query=intent_text(user_query, step_instruction),
    )
    return _user_message(prompt)


RERESOLUTION_PROMPT = """<identity>
You are a parameter re-resolution assistant. Given a failed tool call, source data, and the user's intent, compute corrected parameters.
</identity>

<instructions>
1. Analyze the error message to understand what went wrong
2. Use the user request to understand the intended computation
3. Use the source data to find or derive values that fix the error
4. If the fix requires a calculation, combination, or transformation, perform it and provide the result
5. Return corrected_parameters as a complete parameters object matching the capability schema
</instructions>

<user_request>
{user_query}
</user_request>

<source_data>
{source_data}
</source_data>

<failed_attempt capability="{capability_name}" status="{http_status}">
Parameters sent: {attempted_params}
Error: {error_response}
</failed_attempt>
{previous_errors}
<capability_schema>
{schema_lines}
</capability_schema>

Return a JSON result. Output raw JSON — no markdown, no code blocks. Start with {{ and end with }}.
{{"should_retry": true/false, "analysis": "...", "corrected_parameters": {{...}}}}"""  # noqa: E501


def capability_schema_lines(capability_schema: Mapping[str, Any] | None) -> list[str]:
    """One `- <name> (<type>[ (required)]): <description>` line per schema property, in order."""
    if not capability_schema:
        return []
    properties = capability_schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = capability_schema.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    lines = []
    for name, spec in properties.items():
        spec = spec if isinstance(spec, Mapping) else {}
        declared_type = spec.get("type", "")
        if isinstance(declared_type, list):
            declared_type = "|".join(str(t) for t in declared_type)
        required_mark = " (required)" if name in required_names else ""
        description = spec.get("description", "")
        lines.append(f"- {name} ({declared_type}{required_mark}): {description}")
    return lines


def build_reresolution_messages(
    *,
    user_query: str,
    source_data: Mapping[str, Any],
    step_id: str,
    capability_name: str,
    capability_schema: Mapping[str, Any] | None,
    attempted_params: Mapping[str, Any],
    error_response: str,
    http_status: int,
    previous_errors: Sequence[str],
    step_instruction: str | None = None,
) -> list[dict[str, Any]]:
    """The layer-4 prompt (reference §5.2) as one user message; error texts are redacted.

    `<user_request>` holds `intent_text(user_query, step_instruction)`. `step_id` is accepted for
    symmetry with `ContextualReResolver.re_resolve`; the reference does not show it to the LLM.
    """
    previous = ""
    if previous_errors:
        joined = "\n---\n".join(redact_sensitive_text(e) for e in previous_errors)
        previous = f"\n<previous_failed_attempts>\n{joined}\n</previous_failed_attempts>\n"
    prompt = RERESOLUTION_PROMPT.format(
        user_query=intent_text(user_query, step_instruction),
        source_data=_sorted_json(source_data, indent=None),
        capability_name=capability_name,
        http_status=http_status,
        attempted_params=_sorted_json(attempted_params, indent=2),
        error_response=redact_sensitive_text(error_response),
        previous_errors=previous,
        schema_lines="\n".join(capability_schema_lines(capability_schema)),
    )
    return _user_message(prompt)


LEGACY_CORRECTION_PROMPT = """The following tool call failed with a type error. Please fix the parameters.

Tool: {tool}
Capability: {capability}
Error: {error_text}

Original Parameters (INCORRECT - caused the error above):
{original_params}

Expected Parameter Schema:
{schema}

CRITICAL RULES for correction:
1. Numbers (type: number, float64, integer, int) must NOT be in quotes
   CORRECT: "lat": 35.6897
   WRONG:   "lat": "35.6897"

2. Booleans (type: boolean, bool) must NOT be in quotes
   CORRECT: "enabled": true
   WRONG:   "enabled": "true"

3. Only strings should be quoted

Respond with ONLY the corrected JSON parameters object. No explanation, no markdown, just the JSON object."""  # noqa: E501


def build_legacy_correction_messages(
    *,
    tool: str,
    capability: str,
    error_text: str,
    original_params: Mapping[str, Any],
    schema: Mapping[str, Any] | None,
) -> list[dict[str, Any]]:
    """The legacy correction prompt (reference §5.5) as one user message; the error is redacted.

    The schema is shown as indented JSON in its own key order, or empty when there is none.
    """
    schema_text = json.dumps(schema, indent=2, ensure_ascii=False, default=str) if schema else ""
    prompt = LEGACY_CORRECTION_PROMPT.format(
        tool=tool,
        capability=capability,
        error_text=redact_sensitive_text(error_text),
        original_params=_sorted_json(original_params, indent=2),
        schema=schema_text,
    )
    return _user_message(prompt)


# ---------------------------------------------------------------------------------------------
# Layers


async def _run_layer(
    client: LLMClient,
    *,
    site: str,
    temperature: float,
    max_tokens: int,
    build_messages: Callable[[], list[dict[str, Any]]],
    decode: Callable[[str], dict[str, Any]],
    verdict_from: Callable[[dict[str, Any]], Verdict],
) -> LayerResult:
    """Build, call, decode and type-check; every failure short of cancellation becomes data."""
    try:
        messages = build_messages()
    except Exception as e:
        exchange = client.failed_exchange(
            site=site,
            messages=[],
            temperature=temperature,
            max_tokens=max_tokens,
            error=f"could not build the {site} prompt: {type(e).__name__}: {e}",
        )
        return LayerResult(exchange=exchange, verdict=None, parse_error=None, parsed=None)
    exchange = await client.chat(
        site=site, messages=messages, temperature=temperature, max_tokens=max_tokens
    )
    if exchange.error is not None:
        return LayerResult(exchange=exchange, verdict=None, parse_error=None, parsed=None)
    if exchange.raw_text is None or not exchange.raw_text.strip():
        return LayerResult(
            exchange=exchange, verdict=None, parse_error="response content is empty", parsed=None
        )
    try:
        parsed = decode(exchange.raw_text)
    except LLMParseError as e:
        return LayerResult(exchange=exchange, verdict=None, parse_error=str(e), parsed=None)
    try:
        verdict = verdict_from(parsed)
    except LLMParseError as e:
        return LayerResult(exchange=exchange, verdict=None, parse_error=str(e), parsed=parsed)
    return LayerResult(exchange=exchange, verdict=verdict, parse_error=None, parsed=parsed)


class ErrorAnalyzer:
    """Layer 3: asks the LLM whether changed parameters can fix a failed call (reference §4)."""

    site = SITE_ERROR_ANALYSIS
    temperature = ANALYZER_TEMPERATURE
    max_tokens = ANALYZER_MAX_TOKENS

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    async def analyze(
        self,
        *,
        http_status: int,
        error_response: str,
        original_request: Mapping[str, Any],
        user_query: str,
        capability_name: str,
        capability_description: str,
        step_id: str,
        step_instruction: str | None = None,
    ) -> LayerResult:
        """One analyzer call; the verdict is an `AnalyzerVerdict` or None (no correction)."""
        return await _run_layer(
            self.client,
            site=self.site,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            build_messages=lambda: build_analysis_messages(
                http_status=http_status,
                error_response=error_response,
                original_request=original_request,
                user_query=user_query,
                capability_name=capability_name,
                capability_description=capability_description,
                step_id=step_id,
                step_instruction=step_instruction,
            ),
            decode=extract_json_object,
            verdict_from=analysis_verdict_from,
        )


class ContextualReResolver:
    """Layer 4: asks the LLM to compute corrected parameters from earlier results (reference §5)."""

    site = SITE_SEMANTIC_RETRY
    temperature = RERESOLVER_TEMPERATURE
    max_tokens = RERESOLVER_MAX_TOKENS

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    async def re_resolve(
        self,
        *,
        user_query: str,
        source_data: Mapping[str, Any],
        step_id: str,
        capability_name: str,
        capability_schema: Mapping[str, Any] | None,
        attempted_params: Mapping[str, Any],
        error_response: str,
        http_status: int,
        previous_errors: Sequence[str] = (),
        step_instruction: str | None = None,
    ) -> LayerResult:
        """One re-resolver call; the verdict is a `ResolverVerdict` or None (no correction)."""
        return await _run_layer(
            self.client,
            site=self.site,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            build_messages=lambda: build_reresolution_messages(
                user_query=user_query,
                source_data=source_data,
                step_id=step_id,
                capability_name=capability_name,
                capability_schema=capability_schema,
                attempted_params=attempted_params,
                error_response=error_response,
                http_status=http_status,
                previous_errors=previous_errors,
                step_instruction=step_instruction,
            ),
            decode=extract_json_object,
            verdict_from=reresolution_verdict_from,
        )


# ---------------------------------------------------------------------------------------------
# Legacy correction callback


@dataclass(frozen=True, slots=True)
class LegacyCorrectionRequest:
    """What a legacy correction callback is given (reference §3.5 step 6)."""

    step_id: str
    tool: str
    capability: str
    parameters: dict[str, Any]
    error_text: str
    schema: dict[str, Any] | None


LegacyCorrectionAnswer = LayerResult | LegacyVerdict | Mapping[str, Any] | None
LegacyCorrectionCallback = Callable[[LegacyCorrectionRequest], Awaitable[LegacyCorrectionAnswer]]


class LegacyCorrector:
    """The built-in legacy correction callback: one LLM call with the §5.5 prompt.

    An instance is itself a `LegacyCorrectionCallback`.
    """

    site = SITE_CORRECTION
    temperature = LEGACY_TEMPERATURE
    max_tokens = LEGACY_MAX_TOKENS

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    async def correct(
        self,
        *,
        tool: str,
        capability: str,
        error_text: str,
        original_params: Mapping[str, Any],
        schema: Mapping[str, Any] | None,
    ) -> LayerResult:
        """One correction call; the verdict is a `LegacyVerdict` or None (no correction)."""
        return await _run_layer(
            self.client,
            site=self.site,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            build_messages=lambda: build_legacy_correction_messages(
                tool=tool,
                capability=capability,
                error_text=error_text,
                original_params=original_params,
                schema=schema,
            ),
            decode=legacy_parameters_from,
            verdict_from=lambda parsed: LegacyVerdict(corrected_parameters=parsed),
        )

    async def __call__(self, request: LegacyCorrectionRequest) -> LayerResult:
        return await self.correct(
            tool=request.tool,
            capability=request.capability,
            error_text=request.error_text,
            original_params=request.parameters,
            schema=request.schema,
        )


@dataclass(frozen=True, slots=True)
class LegacyCorrectionOutcome:
    """What a legacy callback produced: corrected parameters, or None and the reason why not.

    `layer_result` holds the LLM call when the callback made one through `LLMClient`.
    """

    corrected_parameters: dict[str, Any] | None
    layer_result: LayerResult | None
    error: str | None


async def invoke_legacy_callback(
    callback: LegacyCorrectionCallback, request: LegacyCorrectionRequest
) -> LegacyCorrectionOutcome:
    """Await a legacy callback and normalise its answer; raises only on cancellation.

    A callback may return corrected parameters (a dict or `LegacyVerdict`), a `LayerResult`, or
    None for "no correction"; an exception it raises becomes the outcome's `error`.
    """
    try:
        answer = await callback(request)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        return LegacyCorrectionOutcome(
            None, None, f"legacy correction callback raised {type(e).__name__}: {e}"
        )
    if answer is None:
        return LegacyCorrectionOutcome(None, None, "legacy correction callback returned None")
    if isinstance(answer, LayerResult):
        if isinstance(answer.verdict, LegacyVerdict):
            return LegacyCorrectionOutcome(dict(answer.verdict.corrected_parameters), answer, None)
        reason = answer.exchange.error or answer.parse_error or "the LLM gave no correction"
        return LegacyCorrectionOutcome(None, answer, reason)
    if isinstance(answer, LegacyVerdict):
        return LegacyCorrectionOutcome(dict(answer.corrected_parameters), None, None)
    if isinstance(answer, Mapping):
        return LegacyCorrectionOutcome(dict(answer), None, None)
    return LegacyCorrectionOutcome(
        None,
        None,
        "legacy correction callback must return a dict, LegacyVerdict, LayerResult or None, "
        f"got {type(answer).__name__}",
    )
