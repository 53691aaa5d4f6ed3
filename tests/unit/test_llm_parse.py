"""Pure parts of executor.llm: answer parsing, prompts, settings and legacy-callback answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from executor.llm import (
    DEFAULT_MODEL,
    PLACEHOLDER_API_KEY,
    AnalyzerVerdict,
    LegacyCorrectionRequest,
    LegacyVerdict,
    LLMParseError,
    LLMSettings,
    ResolverVerdict,
    build_analysis_messages,
    build_legacy_correction_messages,
    build_reresolution_messages,
    capability_schema_lines,
    extract_json_object,
    find_json_end,
    invoke_legacy_callback,
    parse_analysis,
    parse_legacy_correction,
    parse_reresolution,
    resolve_llm_settings,
)

# --- extract_json_object (reference §4.4) -----------------------------------------------------

EXTRACT_CASES = [
    ("plain", '{"should_retry": true}', {"should_retry": True}),
    ("json_fenced", '```json\n{"should_retry": true}\n```', {"should_retry": True}),
    ("bare_fenced", '```\n{"should_retry": false}\n```', {"should_retry": False}),
    (
        "prose_before_and_after",
        'Here\'s my analysis:\n{"should_retry": true, "reason": "Fixed"}\nHope this helps!',
        {"should_retry": True, "reason": "Fixed"},
    ),
    (
        "nested_braces",
        '{"suggested_changes": {"location": {"city": "Tokyo", "country": "Japan"}}} tail',
        {"suggested_changes": {"location": {"city": "Tokyo", "country": "Japan"}}},
    ),
    ("braces_inside_strings", '{"text": "has { and } in it"}', {"text": "has { and } in it"}),
    (
        "escaped_quotes_and_brace",
        r'{"text": "5\" screen } size"}',
        {"text": '5" screen } size'},
    ),
    ("first_object_wins", '{"a": 1} {"b": 2}', {"a": 1}),
    ("object_inside_array", '[{"a": 1}]', {"a": 1}),
    ("non_ascii", '{"city": "東京"}', {"city": "東京"}),
    ("surrounding_whitespace", '  \n\t{"a": 1}\n  ', {"a": 1}),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in EXTRACT_CASES], ids=[c[0] for c in EXTRACT_CASES]
)
def test_extract_json_object_finds_the_first_object(text: str, expected: dict) -> None:
    assert extract_json_object(text) == expected


EXTRACT_ERROR_CASES = [
    ("no_object", "I cannot fix this request.", "no JSON object found in response"),
    ("empty", "", "no JSON object found in response"),
    ("array_of_scalars", "[1, 2, 3]", "no JSON object found in response"),
    ("unbalanced", '{"a": {"b": 1}', "invalid JSON structure in response"),
    ("unterminated_string", '{"a": "}', "invalid JSON structure in response"),
    ("single_quotes", "{'should_retry': true}", "failed to parse JSON: "),
    ("trailing_comma", '{"a": 1,}', "failed to parse JSON: "),
    ("nan_is_not_json", '{"a": NaN}', "failed to parse JSON: "),
    ("bare_true", "{should_retry: true}", "failed to parse JSON: "),
]


@pytest.mark.parametrize(
    ("text", "message"),
    [c[1:] for c in EXTRACT_ERROR_CASES],
    ids=[c[0] for c in EXTRACT_ERROR_CASES],
)
def test_extract_json_object_names_why_it_failed(text: str, message: str) -> None:
    with pytest.raises(LLMParseError) as raised:
        extract_json_object(text)
    assert str(raised.value).startswith(message)


# TestFindJSONEndSimple in orchestration/error_analyzer_test.go, plus the unbalanced case.
FIND_END_CASES = [
    ("simple_object", '{"key": "value"}', 0, 16),
    ("nested_object", '{"outer": {"inner": "value"}}', 0, 29),
    ("with_string_braces", '{"text": "has { and } in it"}', 0, 29),
    ("with_escaped_quotes", r'{"text": "has \"quotes\""}', 0, 26),
    ("array_value", '{"arr": [1, 2, 3]}', 0, 18),
    ("prefix_text", 'text{"key": "value"}more', 4, 20),
    ("one_escaped_quote_then_brace", r'{"t": "5\" }"} tail', 0, 14),
    ("escaped_backslash_ends_string", r'{"t": "dir\\"} tail', 0, 14),
    ("unbalanced", '{"key": {"value": 1}', 0, -1),
]


@pytest.mark.parametrize(
    ("text", "start", "expected"),
    [c[1:] for c in FIND_END_CASES],
    ids=[c[0] for c in FIND_END_CASES],
)
def test_find_json_end_matches_the_reference_table(text: str, start: int, expected: int) -> None:
    assert find_json_end(text, start) == expected


# --- parse_analysis / parse_reresolution / parse_legacy_correction ----------------------------

ANALYSIS_CASES = [
    (
        "tokio_to_tokyo",
        '{"should_retry": true, "reason": "typo", "suggested_changes": {"city": "Tokyo"},'
        ' "is_transient_error": false}',
        AnalyzerVerdict(True, "typo", {"city": "Tokyo"}, False),
    ),
    (
        "only_should_retry",
        '{"should_retry": false}',
        AnalyzerVerdict(False, "", {}, False),
    ),
    ("should_retry_missing_is_false_as_in_go", '{"reason": "x"}',
     AnalyzerVerdict(False, "x", {}, False)),
    ("should_retry_null_is_false_as_in_go", '{"should_retry": null}',
     AnalyzerVerdict(False, "", {}, False)),
    (
        "null_optionals",
        '{"should_retry": false, "reason": null, "suggested_changes": null,'
        ' "is_transient_error": null}',
        AnalyzerVerdict(False, "", {}, False),
    ),
    (
        "transient_retry_same_params",
        '{"should_retry": true, "reason": "timeout", "suggested_changes": {},'
        ' "is_transient_error": true}',
        AnalyzerVerdict(True, "timeout", {}, True),
    ),
    (
        "unknown_keys_ignored",
        '{"should_retry": false, "confidence": 0.9}',
        AnalyzerVerdict(False, "", {}, False),
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in ANALYSIS_CASES], ids=[c[0] for c in ANALYSIS_CASES]
)
def test_parse_analysis_reads_the_verdict(text: str, expected: AnalyzerVerdict) -> None:
    assert parse_analysis(text) == expected


BOOL_EXPECTED = "should_retry must be a JSON boolean or absent, got"
ANALYSIS_TYPE_ERRORS = [
    ("should_retry_string", '{"should_retry": "true"}', f'{BOOL_EXPECTED} string "true"'),
    ("should_retry_number", '{"should_retry": 1}', f"{BOOL_EXPECTED} number 1"),
    (
        "suggested_changes_list",
        '{"should_retry": true, "suggested_changes": ["city", "Tokyo"]}',
        'suggested_changes must be a JSON object, null or absent, got array ["city", "Tokyo"]',
    ),
    (
        "suggested_changes_string",
        '{"should_retry": true, "suggested_changes": "city=Tokyo"}',
        'suggested_changes must be a JSON object, null or absent, got string "city=Tokyo"',
    ),
    (
        "reason_number",
        '{"should_retry": false, "reason": 42}',
        "reason must be a JSON string or absent, got number 42",
    ),
    (
        "transient_string",
        '{"should_retry": false, "is_transient_error": "yes"}',
        'is_transient_error must be a JSON boolean or absent, got string "yes"',
    ),
]


@pytest.mark.parametrize(
    ("text", "message"),
    [c[1:] for c in ANALYSIS_TYPE_ERRORS],
    ids=[c[0] for c in ANALYSIS_TYPE_ERRORS],
)
def test_parse_analysis_rejects_wrong_types(text: str, message: str) -> None:
    with pytest.raises(LLMParseError) as raised:
        parse_analysis(text)
    assert str(raised.value) == message


RERESOLUTION_CASES = [
    (
        "tesla_amount",
        '{"should_retry": true, "analysis": "100 x 468.285 = 46828.5",'
        ' "corrected_parameters": {"from": "USD", "to": "EUR", "amount": 46828.5}}',
        ResolverVerdict(
            should_retry=True,
            corrected_parameters={"from": "USD", "to": "EUR", "amount": 46828.5},
            analysis="100 x 468.285 = 46828.5",
        ),
    ),
    (
        "null_corrected_parameters",
        '{"should_retry": false, "analysis": "no data", "corrected_parameters": null}',
        ResolverVerdict(False, {}, "no data"),
    ),
    ("missing_optionals", '{"should_retry": false}', ResolverVerdict(False, {}, "")),
    (
        "markdown_wrapped",
        '```json\n{"should_retry": true, "analysis": "Fixed via markdown",'
        ' "corrected_parameters": {"amount": 100}}\n```',
        ResolverVerdict(True, {"amount": 100}, "Fixed via markdown"),
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [c[1:] for c in RERESOLUTION_CASES],
    ids=[c[0] for c in RERESOLUTION_CASES],
)
def test_parse_reresolution_reads_the_verdict(text: str, expected: ResolverVerdict) -> None:
    assert parse_reresolution(text) == expected


RERESOLUTION_TYPE_ERRORS = [
    ("should_retry_string", '{"should_retry": "false"}', "should_retry must be a JSON boolean"),
    (
        "corrected_parameters_list",
        '{"should_retry": true, "corrected_parameters": [46828.5]}',
        "corrected_parameters must be a JSON object, null or absent, got array",
    ),
    (
        "analysis_object",
        '{"should_retry": true, "analysis": {"why": "x"}}',
        "analysis must be a JSON string or absent, got object",
    ),
]


@pytest.mark.parametrize(
    ("text", "message"),
    [c[1:] for c in RERESOLUTION_TYPE_ERRORS],
    ids=[c[0] for c in RERESOLUTION_TYPE_ERRORS],
)
def test_parse_reresolution_rejects_wrong_types(text: str, message: str) -> None:
    with pytest.raises(LLMParseError) as raised:
        parse_reresolution(text)
    assert str(raised.value).startswith(message)


LEGACY_CASES = [
    ("bare_object", '{"lat": 35.6897, "lon": 139.6917}', {"lat": 35.6897, "lon": 139.6917}),
    ("json_fenced", '```json\n{"lat": 35.6897}\n```', {"lat": 35.6897}),
    ("bare_fenced", '```\n{"enabled": true}\n```', {"enabled": True}),
    ("fence_then_note", '```json\n{"lat": 1.5}\n```\nNumbers are unquoted now.', {"lat": 1.5}),
    ("prose_around", 'Corrected:\n{"lat": 1.5} (numbers unquoted)', {"lat": 1.5}),
    ("empty_object", "{}", {}),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in LEGACY_CASES], ids=[c[0] for c in LEGACY_CASES]
)
def test_parse_legacy_correction_reads_the_parameters(text: str, expected: dict) -> None:
    assert parse_legacy_correction(text) == LegacyVerdict(corrected_parameters=expected)


NOT_PARSED = "failed to parse corrected parameters:"
LEGACY_ERRORS = [
    ("array", "[1, 2]", f"{NOT_PARSED} expected a JSON object, got array [1, 2]"),
    ("string", '"lat=1.5"', f'{NOT_PARSED} expected a JSON object, got string "lat=1.5"'),
    ("prose_only", "I cannot fix it", f"{NOT_PARSED} no JSON object found"),
    ("empty", "", f"{NOT_PARSED} no JSON object found"),
    ("broken_json", '{"lat": 1.5,', f"{NOT_PARSED} invalid JSON structure"),
]


@pytest.mark.parametrize(
    ("text", "message"), [c[1:] for c in LEGACY_ERRORS], ids=[c[0] for c in LEGACY_ERRORS]
)
def test_parse_legacy_correction_requires_an_object(text: str, message: str) -> None:
    with pytest.raises(LLMParseError) as raised:
        parse_legacy_correction(text)
    assert str(raised.value).startswith(message)


# --- prompt builders ---------------------------------------------------------------------------


def assert_in_order(text: str, markers: list[str]) -> None:
    positions = [text.find(marker) for marker in markers]
    missing = [m for m, p in zip(markers, positions, strict=True) if p == -1]
    assert not missing, f"missing from prompt: {missing}"
    assert positions == sorted(positions), f"out of order: {positions}"


def analysis_prompt(**overrides: Any) -> str:
    arguments: dict[str, Any] = {
        "http_status": 400,
        "error_response": '{"error": "INVALID CITY CODE: PARIS"}',
        "original_request": {"city_code": "PARIS", "check_in": "2026-04-01"},
        "user_query": "Find hotels in Paris for April 1-3",
        "capability_name": "search_hotels",
        "capability_description": "Search hotel offers by IATA city code.",
        "step_id": "step-17",
    }
    arguments.update(overrides)
    messages = build_analysis_messages(**arguments)
    assert [m["role"] for m in messages] == ["user"]
    return messages[0]["content"]


def test_analysis_prompt_has_the_reference_sections_in_order() -> None:
    prompt = analysis_prompt()
    assert_in_order(
        prompt,
        [
            "<identity>",
            "</identity>",
            "<instructions>",
            "1. Determine if the error can be fixed",
            "2. If fixable, suggest",
            "3. Identify transient errors",
            "4. Suggest retry only when the error indicates a correctable input issue: "
            'a likely typo (e.g., "Tokio" instead of "Tokyo")',
            "5. Classify as non-retryable",
            "</instructions>",
            '<capability name="search_hotels">\n'
            "Search hotel offers by IATA city code.\n</capability>",
            '<original_request>\n{\n  "check_in": "2026-04-01",\n'
            '  "city_code": "PARIS"\n}\n</original_request>',
            '<error_response status="400">\n'
            '{"error": "INVALID CITY CODE: PARIS"}\n</error_response>',
            "<user_query>\nFind hotels in Paris for April 1-3\n</user_query>",
            "Return a JSON analysis. Output raw JSON — no markdown, no code blocks.",
        ],
    )
    assert prompt.endswith(
        '{"should_retry": true/false, "reason": "...", "suggested_changes": {...},'
        ' "is_transient_error": true/false}'
    )
    assert "step-17" not in prompt


TESLA_SCHEMA = {
    "type": "object",
    "properties": {
        "from": {"type": "string", "description": "Source currency code"},
        "to": {"type": "string", "description": "Target currency code"},
        "amount": {"type": "number", "description": "Amount to convert"},
    },
    "required": ["from", "to", "amount"],
}


def reresolution_prompt(**overrides: Any) -> str:
    arguments: dict[str, Any] = {
        "user_query": "Sell 100 Tesla shares and convert the proceeds to EUR",
        "source_data": {"symbol": "TSLA", "price": 468.285},
        "step_id": "step-2",
        "capability_name": "convert_currency",
        "capability_schema": TESLA_SCHEMA,
        "attempted_params": {"from": "USD", "to": "EUR", "amount": 0},
        "error_response": '{"error": "amount must be greater than 0"}',
        "http_status": 400,
        "previous_errors": ["amount is required", "amount must be positive"],
    }
    arguments.update(overrides)
    messages = build_reresolution_messages(**arguments)
    assert [m["role"] for m in messages] == ["user"]
    return messages[0]["content"]


def test_reresolution_prompt_has_the_reference_sections_in_order() -> None:
    prompt = reresolution_prompt()
    assert_in_order(
        prompt,
        [
            "<identity>\nYou are a parameter re-resolution assistant.",
            "<instructions>",
            "5. Return corrected_parameters as a complete parameters object",
            "<user_request>\nSell 100 Tesla shares and convert the proceeds to EUR\n",
            '<source_data>\n{"price":468.285,"symbol":"TSLA"}\n</source_data>',
            '<failed_attempt capability="convert_currency" status="400">',
            'Parameters sent: {\n  "amount": 0,\n  "from": "USD",\n  "to": "EUR"\n}',
            'Error: {"error": "amount must be greater than 0"}\n</failed_attempt>',
            "<previous_failed_attempts>\namount is required\n---\namount must be positive\n"
            "</previous_failed_attempts>",
            "<capability_schema>\n- from (string (required)): Source currency code\n"
            "- to (string (required)): Target currency code\n"
            "- amount (number (required)): Amount to convert\n</capability_schema>",
            "Return a JSON result. Output raw JSON",
        ],
    )
    assert prompt.endswith(
        '{"should_retry": true/false, "analysis": "...", "corrected_parameters": {...}}'
    )


def test_reresolution_prompt_omits_previous_attempts_when_there_are_none() -> None:
    prompt = reresolution_prompt(previous_errors=[], source_data={})
    assert "<previous_failed_attempts>" not in prompt
    assert "</failed_attempt>\n\n<capability_schema>" in prompt
    assert "<source_data>\n{}\n</source_data>" in prompt


SCHEMA_LINE_CASES = [
    ("no_schema", None, []),
    ("no_properties", {"type": "object"}, []),
    (
        "optional_without_description",
        {"properties": {"units": {"type": "string"}}},
        ["- units (string): "],
    ),
    (
        "type_union_and_required",
        {
            "properties": {"limit": {"type": ["integer", "null"], "description": "Max"}},
            "required": ["limit"],
        },
        ["- limit (integer|null (required)): Max"],
    ),
    (
        "declared_order_kept",
        {"properties": {"b": {"type": "string"}, "a": {"type": "number"}}},
        ["- b (string): ", "- a (number): "],
    ),
]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [c[1:] for c in SCHEMA_LINE_CASES],
    ids=[c[0] for c in SCHEMA_LINE_CASES],
)
def test_capability_schema_lines(schema: dict | None, expected: list[str]) -> None:
    assert capability_schema_lines(schema) == expected


def legacy_prompt(**overrides: Any) -> str:
    arguments: dict[str, Any] = {
        "tool": "weather",
        "capability": "get_weather",
        "error_text": "component returned status 400: json: cannot unmarshal string into float64",
        "original_params": {"lat": "35.6897", "lon": "139.6917"},
        "schema": {"properties": {"lat": {"type": "number"}, "lon": {"type": "number"}}},
    }
    arguments.update(overrides)
    messages = build_legacy_correction_messages(**arguments)
    assert [m["role"] for m in messages] == ["user"]
    return messages[0]["content"]


def test_legacy_prompt_has_the_reference_sections_in_order() -> None:
    prompt = legacy_prompt()
    assert_in_order(
        prompt,
        [
            "The following tool call failed with a type error. Please fix the parameters.",
            "Tool: weather\nCapability: get_weather\nError: component returned status 400",
            'Original Parameters (INCORRECT - caused the error above):\n{\n  "lat": "35.6897",',
            'Expected Parameter Schema:\n{\n  "properties": {\n    "lat": {',
            "CRITICAL RULES for correction:",
            '   CORRECT: "lat": 35.6897\n   WRONG:   "lat": "35.6897"',
            '   CORRECT: "enabled": true\n   WRONG:   "enabled": "true"',
            "3. Only strings should be quoted",
            "Respond with ONLY the corrected JSON parameters object.",
        ],
    )


def test_legacy_prompt_without_schema_leaves_the_section_empty() -> None:
    assert "Expected Parameter Schema:\n\n\nCRITICAL RULES" in legacy_prompt(schema=None)


SECRET_ERROR = "request failed: api_key=top-secret status=400"
REDACTED_ERROR = "request failed: api_key=[REDACTED] status=400"

REDACTION_CASES = [
    ("analysis_error_response", lambda: analysis_prompt(error_response=SECRET_ERROR)),
    ("reresolution_error_response", lambda: reresolution_prompt(error_response=SECRET_ERROR)),
    ("reresolution_previous_errors", lambda: reresolution_prompt(previous_errors=[SECRET_ERROR])),
    ("legacy_error_text", lambda: legacy_prompt(error_text=SECRET_ERROR)),
    # SPEC §2.1 "anything shown to an LLM" (an outside check found these shown verbatim):
    ("analysis_user_query", lambda: analysis_prompt(user_query=SECRET_ERROR)),
    ("analysis_capability_description",
     lambda: analysis_prompt(capability_description=SECRET_ERROR)),
    ("analysis_step_instruction",
     lambda: analysis_prompt(step_instruction=SECRET_ERROR)),
    ("reresolution_user_query", lambda: reresolution_prompt(user_query=SECRET_ERROR)),
]


@pytest.mark.parametrize(
    "build_prompt", [c[1] for c in REDACTION_CASES], ids=[c[0] for c in REDACTION_CASES]
)
def test_error_text_is_redacted_before_the_llm_sees_it(build_prompt: Any) -> None:
    prompt = build_prompt()
    assert "top-secret" not in prompt
    assert REDACTED_ERROR in prompt


# --- settings ------------------------------------------------------------------------------------

ENV_SETTINGS = {
    "OPENAI_BASE_URL": "http://env/v1",
    "OPENAI_API_KEY": "sk-env",
    "TRUVAG3_LLM_MODEL": "env-model",
}
SETTINGS_CASES = [
    ("nothing_configured", None, {}, None),
    (
        "plan_base_url_only",
        {"base_url": "http://127.0.0.1:9/v1"},
        {},
        LLMSettings("http://127.0.0.1:9/v1", PLACEHOLDER_API_KEY, DEFAULT_MODEL, 60.0, "none"),
    ),
    (
        "environment_only",
        None,
        ENV_SETTINGS,
        LLMSettings("http://env/v1", "sk-env", "env-model", api_key_source="OPENAI_API_KEY"),
    ),
    (
        "plan_wins_over_environment",
        {"base_url": "http://plan/v1", "api_key": "sk-plan", "model": "plan-model", "timeout_s": 5},
        ENV_SETTINGS,
        LLMSettings("http://plan/v1", "sk-plan", "plan-model", 5.0),
    ),
    (
        "empty_plan_values_fall_back",
        {"base_url": "", "model": " "},
        {"OPENAI_BASE_URL": "http://env/v1"},
        LLMSettings("http://env/v1", PLACEHOLDER_API_KEY, DEFAULT_MODEL, 60.0, "none"),
    ),
    (
        "plan_key_wins_over_plan_userinfo",
        {"base_url": "http://u:p@plan/v1", "api_key": "sk-plan"},
        {},
        LLMSettings("http://plan/v1", "sk-plan", DEFAULT_MODEL),
    ),
    (
        "env_key_wins_over_plan_userinfo",
        {"base_url": "http://u:p@plan/v1"},
        {"OPENAI_API_KEY": "sk-env"},
        LLMSettings("http://plan/v1", "sk-env", DEFAULT_MODEL, api_key_source="OPENAI_API_KEY"),
    ),
    (
        "plan_userinfo_alone",
        {"base_url": "http://u%20x:p@plan/v1"},
        {},
        LLMSettings("http://plan/v1", PLACEHOLDER_API_KEY, DEFAULT_MODEL,
                    api_key_source="llm.base_url userinfo", basic_auth=("u x", "p")),
    ),
    ("model_without_base_url", {"model": "m"}, {"OPENAI_API_KEY": "sk"}, None),
]


@pytest.mark.parametrize(
    ("plan_llm", "env", "expected"),
    [c[1:] for c in SETTINGS_CASES],
    ids=[c[0] for c in SETTINGS_CASES],
)
def test_resolve_llm_settings(
    plan_llm: dict | None, env: dict, expected: LLMSettings | None
) -> None:
    assert resolve_llm_settings(plan_llm, env) == expected


POSITIVE_TIMEOUT = "llm.timeout_s must be a positive number"
SETTINGS_ERRORS = [
    ("timeout_zero", {"base_url": "http://x/v1", "timeout_s": 0}, POSITIVE_TIMEOUT),
    ("timeout_text", {"base_url": "http://x/v1", "timeout_s": "5"}, POSITIVE_TIMEOUT),
    ("timeout_bool", {"base_url": "http://x/v1", "timeout_s": True}, POSITIVE_TIMEOUT),
    ("base_url_number", {"base_url": 8080}, "llm.base_url must be a string, got int"),
]


@pytest.mark.parametrize(
    ("plan_llm", "message"),
    [c[1:] for c in SETTINGS_ERRORS],
    ids=[c[0] for c in SETTINGS_ERRORS],
)
def test_resolve_llm_settings_names_the_bad_field(plan_llm: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_llm_settings(plan_llm, {})


# --- legacy callback answers ---------------------------------------------------------------------

LEGACY_REQUEST = LegacyCorrectionRequest(
    step_id="step-1",
    tool="weather",
    capability="get_weather",
    parameters={"lat": "35.6897"},
    error_text="json: cannot unmarshal string into Go value of type float64",
    schema={"properties": {"lat": {"type": "number"}}},
)


@dataclass(frozen=True, slots=True)
class CallbackCase:
    answer: Any
    corrected: dict | None
    error: str | None


class Unexpected:
    pass


def _raise(request: LegacyCorrectionRequest) -> Any:
    raise RuntimeError(f"no model for {request.capability}")


CALLBACK_CASES = [
    ("dict", CallbackCase({"lat": 35.6897}, {"lat": 35.6897}, None)),
    ("legacy_verdict", CallbackCase(LegacyVerdict({"lat": 1.0}), {"lat": 1.0}, None)),
    ("none", CallbackCase(None, None, "legacy correction callback returned None")),
    (
        "wrong_type",
        CallbackCase(
            Unexpected(),
            None,
            "legacy correction callback must return a dict, LegacyVerdict, LayerResult or None,"
            " got Unexpected",
        ),
    ),
    (
        "raises",
        CallbackCase(
            _raise,
            None,
            "legacy correction callback raised RuntimeError: no model for get_weather",
        ),
    ),
]


@pytest.mark.parametrize("case", [c[1] for c in CALLBACK_CASES], ids=[c[0] for c in CALLBACK_CASES])
async def test_invoke_legacy_callback_normalises_plain_answers(case: CallbackCase) -> None:
    async def callback(request: LegacyCorrectionRequest) -> Any:
        return case.answer(request) if callable(case.answer) else case.answer

    outcome = await invoke_legacy_callback(callback, LEGACY_REQUEST)

    assert outcome.corrected_parameters == case.corrected
    assert outcome.error == case.error
    assert outcome.layer_result is None


def test_prompt_shows_values_json_cannot_encode_as_text() -> None:
    class Opaque:
        def __str__(self) -> str:
            return "opaque-value"

    prompt = analysis_prompt(original_request={"when": Opaque()})
    assert '"when": "opaque-value"' in prompt
