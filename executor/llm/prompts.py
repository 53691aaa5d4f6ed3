"""The layers' prompts (TruvaG3 reference notes §4.3, §5.2, §5.5) as chat messages."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from executor.redact import redact_sensitive_text

if TYPE_CHECKING:
    pass


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
    """The layer-3 prompt (reference §4.3) as one user message; the error text, the query and
    the capability's description are redacted (SPEC §2.1: anything shown to an LLM).

    `<user_query>` holds `intent_text(user_query, step_instruction)`. `step_id` is accepted for
    symmetry with `ErrorAnalyzer.analyze`; the reference does not show it to the LLM.
    """
    prompt = ANALYSIS_PROMPT.format(
        capability_name=capability_name,
        capability_description=redact_sensitive_text(capability_description),
        original_request=_sorted_json(original_request, indent=2),
        http_status=http_status,
        error_response=redact_sensitive_text(error_response),
        user_query=redact_sensitive_text(intent_text(user_query, step_instruction)),
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
    """The layer-4 prompt (reference §5.2) as one user message; error texts and the query are
    redacted.

    `<user_request>` holds `intent_text(user_query, step_instruction)`. `step_id` is accepted for
    symmetry with `ContextualReResolver.re_resolve`; the reference does not show it to the LLM.
    """
    previous = ""
    if previous_errors:
        joined = "\n---\n".join(redact_sensitive_text(e) for e in previous_errors)
        previous = f"\n<previous_failed_attempts>\n{joined}\n</previous_failed_attempts>\n"
    prompt = RERESOLUTION_PROMPT.format(
        user_query=redact_sensitive_text(intent_text(user_query, step_instruction)),
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
