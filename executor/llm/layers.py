"""The correction layers: the layer-3 analyzer, the layer-4 re-resolver, the legacy callback."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from executor.llm.client import (
    ANALYZER_MAX_TOKENS,
    ANALYZER_TEMPERATURE,
    LEGACY_MAX_TOKENS,
    LEGACY_TEMPERATURE,
    RERESOLVER_MAX_TOKENS,
    RERESOLVER_TEMPERATURE,
    SITE_CORRECTION,
    SITE_ERROR_ANALYSIS,
    SITE_SEMANTIC_RETRY,
    LLMClient,
)
from executor.llm.parsing import (
    LayerResult,
    LegacyVerdict,
    LLMParseError,
    Verdict,
    analysis_verdict_from,
    extract_json_object,
    legacy_parameters_from,
    reresolution_verdict_from,
)
from executor.llm.prompts import (
    build_analysis_messages,
    build_legacy_correction_messages,
    build_reresolution_messages,
)


class _Layer:
    """One LLM correction layer: its call site and sampling settings over an `LLMClient`."""

    site: ClassVar[str]
    temperature: ClassVar[float]
    max_tokens: ClassVar[int]

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    async def _ask(
        self,
        build_messages: Callable[[], list[dict[str, Any]]],
        verdict_from: Callable[[dict[str, Any]], Verdict],
        *,
        decode: Callable[[str], dict[str, Any]] = extract_json_object,
    ) -> LayerResult:
        """Build, call, decode and type-check; every failure short of cancellation becomes data."""
        client, site = self.client, self.site
        temperature, max_tokens = self.temperature, self.max_tokens
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
            empty = "response content is empty"
            return LayerResult(exchange=exchange, verdict=None, parse_error=empty, parsed=None)
        try:
            parsed = decode(exchange.raw_text)
        except LLMParseError as e:
            return LayerResult(exchange=exchange, verdict=None, parse_error=str(e), parsed=None)
        try:
            verdict = verdict_from(parsed)
        except LLMParseError as e:
            return LayerResult(exchange=exchange, verdict=None, parse_error=str(e), parsed=parsed)
        return LayerResult(exchange=exchange, verdict=verdict, parse_error=None, parsed=parsed)


class ErrorAnalyzer(_Layer):
    """Layer 3: asks the LLM whether changed parameters can fix a failed call (reference §4)."""

    site = SITE_ERROR_ANALYSIS
    temperature = ANALYZER_TEMPERATURE
    max_tokens = ANALYZER_MAX_TOKENS

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
        return await self._ask(
            lambda: build_analysis_messages(
                http_status=http_status,
                error_response=error_response,
                original_request=original_request,
                user_query=user_query,
                capability_name=capability_name,
                capability_description=capability_description,
                step_id=step_id,
                step_instruction=step_instruction,
            ),
            analysis_verdict_from,
        )


class ContextualReResolver(_Layer):
    """Layer 4: asks the LLM to compute corrected parameters from earlier results (reference §5)."""

    site = SITE_SEMANTIC_RETRY
    temperature = RERESOLVER_TEMPERATURE
    max_tokens = RERESOLVER_MAX_TOKENS

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
        return await self._ask(
            lambda: build_reresolution_messages(
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
            reresolution_verdict_from,
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


class LegacyCorrector(_Layer):
    """The built-in legacy correction callback: one LLM call with the §5.5 prompt.

    An instance is itself a `LegacyCorrectionCallback`.
    """

    site = SITE_CORRECTION
    temperature = LEGACY_TEMPERATURE
    max_tokens = LEGACY_MAX_TOKENS

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
        return await self._ask(
            lambda: build_legacy_correction_messages(
                tool=tool,
                capability=capability,
                error_text=error_text,
                original_params=original_params,
                schema=schema,
            ),
            lambda parsed: LegacyVerdict(corrected_parameters=parsed),
            decode=legacy_parameters_from,
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
