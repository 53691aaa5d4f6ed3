"""LLM answers to verdicts: JSON extraction, code fences, the layers' answer shapes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from executor import gojson
from executor.llm.client import LLMExchange
from executor.params import json_type_name

if TYPE_CHECKING:
    pass


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
        decoded = gojson.loads(content[start:end], parse_constant=_reject_non_standard_constant)
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
        decoded = gojson.loads(content, parse_constant=_reject_non_standard_constant)
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
