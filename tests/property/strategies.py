"""Hypothesis strategies for the wire: statuses, Retry-After values, bodies, decision inputs."""

from __future__ import annotations

import itertools
import json
import os
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

from hypothesis import strategies as st

from executor.backoff import BackoffConfig
from executor.policy import DecisionInputs, Layer, LayerVerdict
from executor.wire import RetryPolicy

EXPLORING = os.environ.get("TRUVA_HYPOTHESIS_PROFILE") == "explore"


def examples(count: int) -> int:
    """`count` examples under the ci profile; ten times as many under `explore`."""
    return count * 10 if EXPLORING else count


# ---------------------------------------------------------------------------------------------
# Statuses

INTERESTING_STATUSES = (
    0, 100, 101, 102, 103, 199, 200, 201, 204, 206, 299, 300, 301, 302, 304, 307, 308, 399,
    400, 401, 402, 403, 404, 405, 406, 408, 409, 410, 418, 422, 425, 429, 431, 451, 499,
    500, 501, 502, 503, 504, 507, 511, 599, 600, 999,
)
statuses = st.one_of(
    st.sampled_from(INTERESTING_STATUSES),
    st.integers(min_value=100, max_value=999),
    st.integers(min_value=-5, max_value=1200),
)
# What a real HTTP response can carry: three digits (h11 refuses anything else).
wire_statuses = st.one_of(
    st.sampled_from([s for s in INTERESTING_STATUSES if 200 <= s <= 999]),
    st.integers(min_value=200, max_value=999),
)

# ---------------------------------------------------------------------------------------------
# JSON values and bodies

# Cheap draws dominate: sampled strings, small ints; big and odd values at low frequency.
_SHORT_TEXTS = ("", "a", "false", "true", "0", "é", "\u2028", "<&>", "{{step-1.x}}", "\x00",
                "null", "retryable", "status 503", " \n ")
short_texts = st.one_of(st.sampled_from(_SHORT_TEXTS), st.text(max_size=8))
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-1000, max_value=1000),
    st.sampled_from([0, -0.0, 1.5, 2**53 + 1, 2**63, -(2**63) - 1, 1e308, 5e-324, 10**400]),
    st.floats(allow_nan=False, allow_infinity=False),
    short_texts,
)
_KEYS = st.one_of(st.sampled_from(["a", "b", "success", "error", "retryable", "data", "details",
                                   "retry_after", "code", "message", "", "é"]),
                  st.text(max_size=4))
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(_KEYS, children, max_size=4),
    ),
    max_leaves=8,
)

# Values that are booleans to Python but not to JSON, and look-alikes that must never count.
retryable_values = st.one_of(
    st.just(True), st.just(False), st.none(),
    st.sampled_from(["true", "false", "True", "FALSE", "", "0", "1", 0, 1, 0.0, 1.0, [], {},
                     [True], {"value": False}]),
    json_values,
)
_OMIT: Any = object()


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`strategy`, or the marker for a field left out of the object."""
    return st.one_of(st.just(_OMIT), strategy)


retry_after_details = st.one_of(
    st.integers(min_value=-10, max_value=10**6),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(),  # NaN and infinities included: they cannot come from JSON but must not break
    st.sampled_from(["60s", "1.5s", "500ms", "2", "1.5", "-1s", "-2", "1h", "9999999999h", "abc",
                     "", " 2 ", "1e3", "0", "+3s", ".5", "5.", "1µs", "NaN", "inf"]),
    st.text(max_size=10),
    st.booleans(), st.none(), st.lists(st.integers(), max_size=2),
)
_CATEGORIES = st.sampled_from(["INPUT_ERROR", "NOT_FOUND", "RATE_LIMIT", "AUTH_ERROR",
                               "SERVICE_ERROR", "x"])
_ERROR_FIELDS = (
    ("code", maybe(st.one_of(short_texts, json_values))),
    ("message", maybe(st.one_of(short_texts, json_values))),
    ("category", maybe(st.one_of(_CATEGORIES, json_values))),
)
_RETRYABLE_KEY = st.sampled_from(["retryable", "retryable", "retryable", "Retryable"])
_MAYBE_RETRYABLE = maybe(retryable_values)
_MAYBE_DETAILS = maybe(st.one_of(
    st.fixed_dictionaries({}, optional={"retry_after": retry_after_details}), json_values,
))


@st.composite
def error_objects(draw: st.DrawFn) -> dict[str, Any]:
    """An `error` object whose fields are present, absent or of any JSON type."""
    error: dict[str, Any] = {}
    for name, strategy in _ERROR_FIELDS:
        value = draw(strategy)
        if value is not _OMIT:
            error[name] = value
    retryable = draw(_MAYBE_RETRYABLE)
    if retryable is not _OMIT:
        error[draw(_RETRYABLE_KEY)] = retryable
    details = draw(_MAYBE_DETAILS)
    if details is not _OMIT:
        error["details"] = details
    return error


_MAYBE_SUCCESS = maybe(st.one_of(st.booleans(), st.sampled_from([0, 1, "false", None]),
                                 json_values))
_SUCCESS_KEY = st.sampled_from(["success", "success", "success", "Success"])
_MAYBE_ERROR = maybe(st.one_of(error_objects(), short_texts, json_values))
_MAYBE_DATA = maybe(json_values)


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    """A dict shaped like (or almost like) a TruvaG3 envelope, with wrong types sprinkled in."""
    envelope: dict[str, Any] = {}
    success = draw(_MAYBE_SUCCESS)
    if success is not _OMIT:
        envelope[draw(_SUCCESS_KEY)] = success
    for name, strategy in (("error", _MAYBE_ERROR), ("data", _MAYBE_DATA),
                           ("retryable", _MAYBE_RETRYABLE)):
        value = draw(strategy)
        if value is not _OMIT:
            envelope[name] = value
    return envelope


def _dump(value: Any, style: int) -> str:
    if style == 0:
        return json.dumps(value)
    if style == 1:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(value, indent=2, ensure_ascii=False)


_STYLE = st.integers(0, 2)


@st.composite
def envelope_bodies(draw: st.DrawFn) -> tuple[dict[str, Any], bytes]:
    """An envelope and its UTF-8 JSON bytes, in one of several layouts."""
    envelope = draw(envelopes())
    return envelope, _dump(envelope, draw(_STYLE)).encode("utf-8")


def _deep(depth: int, opener: str) -> str:
    if opener == "[":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


_BODY_KINDS = st.sampled_from(["json", "envelope", "text", "binary", "bad_utf8", "huge", "deep",
                               "bom", "constants", "big_number", "truncated", "empty"])
_TEXT = st.text(max_size=200)
_BINARY = st.binary(max_size=300)
_BAD_BYTES = st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"])
_HUGE_UNIT = st.sampled_from(["a", " ", "\t", "\n", " \t", "9", "{", '"', "\\", "é", "status ",
                              "{{x.y}}"])
_HUGE_SIZE = st.sampled_from([1_000, 10_000, 100_000])
_DEPTH = st.sampled_from([50, 500, 990, 1_000, 5_000, 50_000])
_OPENER = st.sampled_from(["[", "{"])
_CONSTANT = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
_DIGITS = st.sampled_from([20, 400, 4_300, 4_301, 10_000])
_BOOL = st.booleans()


@st.composite
def hostile_bodies(draw: st.DrawFn) -> bytes:
    """Anything a server could send: JSON of every type, non-JSON, bad UTF-8, huge, deep."""
    kind = draw(_BODY_KINDS)
    if kind == "json":
        return _dump(draw(json_values), draw(_STYLE)).encode()
    if kind == "envelope":
        return draw(envelope_bodies())[1]
    if kind == "text":
        return draw(_TEXT).encode("utf-8", errors="surrogatepass")
    if kind == "binary":
        return draw(_BINARY)
    if kind == "bad_utf8":
        _, body = draw(envelope_bodies())
        cut = draw(st.integers(0, len(body)))
        return body[:cut] + draw(_BAD_BYTES) + body[cut:]
    if kind == "huge":
        unit = draw(_HUGE_UNIT)
        text = unit * (draw(_HUGE_SIZE) // len(unit))
        if draw(_BOOL):
            text = json.dumps({"success": False, "error": {"message": text, "retryable": False}})
        return text.encode()
    if kind == "deep":
        inner = _deep(draw(_DEPTH), draw(_OPENER))
        return ('{"success":false,"error":{"retryable":false},"data":' + inner + "}").encode()
    if kind == "bom":
        return b"\xef\xbb\xbf" + draw(envelope_bodies())[1]
    if kind == "constants":
        constant = draw(_CONSTANT)
        return ('{"success":false,"error":{"retryable":false,"details":{"retry_after":'
                + constant + '}},"x":' + constant + "}").encode()
    if kind == "big_number":
        digits = "9" * draw(_DIGITS)
        return ('{"success":false,"error":{"retryable":false,"details":{"retry_after":'
                + digits + '}},"x":' + digits + "}").encode()
    if kind == "truncated":
        body = draw(envelope_bodies())[1]
        return body[: draw(st.integers(0, max(0, len(body) - 1)))]
    return b""


# ---------------------------------------------------------------------------------------------
# LLM answers

FIELDS = ("should_retry", "reason", "suggested_changes", "is_transient_error",
          "corrected_parameters", "analysis")
_FIELD_VALUES = st.one_of(st.booleans(), st.none(), short_texts, json_values,
                          st.dictionaries(st.sampled_from(["city", "amount"]), json_values,
                                          max_size=2))
answers = st.dictionaries(st.sampled_from(FIELDS), _FIELD_VALUES, max_size=5)
_WRAPPERS = st.sampled_from([
    "{}", "```json\n{}\n```", "```\n{}\n```", "Sure! Here is the answer: {} Hope it helps.",
    "{} trailing }} braces", "{{}}", "```json\n{}", "{}```", "  \n{}\n  ",
])


_ANSWER_KINDS = st.sampled_from(["answer", "answer", "answer", "text", "truncated", "json",
                                 "strings_with_braces"])
_ANSWER_TEXT = st.text(max_size=60)


@st.composite
def llm_answers(draw: st.DrawFn) -> str:
    """What a model might answer: the JSON asked for, wrapped, broken, or anything at all."""
    kind = draw(_ANSWER_KINDS)
    if kind == "text":
        return draw(_ANSWER_TEXT)
    if kind == "json":
        return json.dumps(draw(json_values))
    encoded = json.dumps(draw(answers), ensure_ascii=draw(_BOOL))
    if kind == "truncated":
        return encoded[: draw(st.integers(0, max(0, len(encoded) - 1)))]
    if kind == "strings_with_braces":
        encoded = encoded[:-1] + (', "x": "} { \\" \\\\"}' if len(encoded) > 2 else '"x": "}"}')
    return draw(_WRAPPERS).replace("{}", encoded, 1)


# ---------------------------------------------------------------------------------------------
# Retry-After

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


@st.composite
def http_dates(draw: st.DrawFn) -> str:
    """An HTTP-date (IMF-fixdate, or obsolete forms) from the far past to the far future."""
    offset = draw(st.one_of(st.integers(-10**6, 10**6), st.integers(-60 * 10**9, 250 * 10**9)))
    try:
        moment = datetime.fromtimestamp(NOW, UTC) + timedelta(seconds=offset)
    except OverflowError:
        moment = datetime(9999, 12, 31, tzinfo=UTC)
    form = draw(st.integers(0, 3))
    if form == 0:
        return format_datetime(moment, usegmt=True)
    if form == 1:
        return moment.strftime("%A, %d-%b-%y %H:%M:%S GMT")  # RFC 850
    if form == 2:
        return moment.strftime("%a %b %d %H:%M:%S %Y")  # asctime
    return format_datetime(moment)  # "-0000" zone


retry_after_headers = st.one_of(
    st.integers(min_value=0, max_value=10**6).map(str),
    st.integers(min_value=-(10**6), max_value=-1).map(str),
    st.integers(min_value=10**15, max_value=10**500).map(str),
    st.decimals(min_value=0, max_value=10**6, allow_nan=False, places=3).map(str),
    http_dates(),
    st.sampled_from(["", " ", "soon", "1e3", "NaN", "inf", "-0", "0", "00", "1.", ".5", "1,5",
                     "Mon, 32 Jan 2026 00:00:00 GMT", "Mon, 01 Jan 10000 00:00:00 GMT",
                     "Fri, 31 Dec 9999 23:59:59 +2359", "Thu, 01 Jan 1970 00:00:00 -2359",
                     "Wed, 01 Jan 0001 00:00:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMT",
                     "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "2 2", "\t3\t"]),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255), max_size=40),
)


# ---------------------------------------------------------------------------------------------
# Decision inputs

protected_reasons = st.sampled_from(["hitl_approved", "exact_bound"])
parameter_names = st.sampled_from(["a", "b", "city", "amount", "id"])
_ERROR_TEXTS = ("", "type mismatch", "city is required", "error 429: slow down", "boom",
                "component returned status 400: {}")
_VIOLATIONS = ('parameter "a" is required by the schema but absent', "enum", "shape")


def _ms(low: int, high: int) -> st.SearchStrategy[float]:
    return st.one_of(st.integers(low, high).map(float), st.sampled_from([0.0, 0.5, 1e12]))


def _verdict_corpus(layer: Layer) -> list[LayerVerdict]:
    """Every combination of the verdict fields the rules read, including inconsistent ones."""
    corpus = []
    for answered, should_retry, is_transient in itertools.product((True, False), repeat=3):
        for changed, touched, violations in (
            ((), (), ()), (("a",), (), ()), (("a", "b"), ("b",), ()), (("a",), (), ("shape",)),
            (("a",), ("a",), ("enum",)),
        ):
            proposed = {key: 1 for key in changed} or None
            corpus.append(LayerVerdict(
                layer=layer, answered=answered, should_retry=should_retry,
                is_transient=is_transient, explanation="" if is_transient else "typo",
                changes=proposed, proposed_parameters=proposed, changed_keys=changed,
                touched_protected=touched, guard_violations=violations,
                failure=None if answered else "malformed answer: no JSON object found",
            ))
    return corpus


def layer_verdicts(layer: Layer) -> st.SearchStrategy[LayerVerdict]:
    """A verdict as `assess_correction` could return it, or an inconsistent one (one draw)."""
    return st.sampled_from(_verdict_corpus(layer))


_KEY_SETS = [(), ("a",), ("a", "b"), ("city", "amount", "id")]
_PROTECTED_SETS = [{}, {"a": "hitl_approved"}, {"a": "exact_bound", "b": "hitl_approved"},
                   {"city": "exact_bound", "amount": "exact_bound", "id": "hitl_approved"},
                   {"zz": "hitl_approved"}]


optional_limit = st.none() | st.integers(min_value=0, max_value=5)
_TRANSPORT_ERRORS = st.sampled_from([None, "connect", "timeout", "reset", "protocol", "cancelled"])
_POLICIES = st.sampled_from(list(RetryPolicy))
_ERROR_TEXT = st.sampled_from(_ERROR_TEXTS)
_GUARD = st.sampled_from([(), _VIOLATIONS[:1], _VIOLATIONS])
_SIDE_EFFECTS = st.sampled_from(["none", "idempotent", "unsafe"])
_KEYS_DRAW = st.sampled_from(_KEY_SETS)
_PROTECTED_DRAW = st.sampled_from(_PROTECTED_SETS)
_PATTERN = st.none() | st.sampled_from(["type mismatch", "is required"])
_OPTIONAL_MS = st.none() | _ms(0, 10**7)
_SOURCE = st.sampled_from(["retry_after_header", "retry_after_details"])
_FACTOR = st.sampled_from([0.0, 1.0, 1.5, 2.0, 10.0])
_DELAY = _ms(0, 10_000)
_MAX_DELAY = _ms(0, 100_000)
_ELAPSED = _ms(0, 10_000)
_OPTIONAL_WALL = st.none() | _ms(0, 10_000)
_TOKENS = st.integers(min_value=0, max_value=10_000)
_OPTIONAL_TOKENS = st.none() | _TOKENS
_SMALL = st.integers(min_value=0, max_value=6)
_FLAGS = st.tuples(*[st.booleans()] * 13)
_BODY_IS_OBJECT = st.sampled_from([True, True, True, False])
_VERDICTS = {layer: st.none() | layer_verdicts(layer) for layer in Layer}


@st.composite
def decision_inputs(draw: st.DrawFn, status: st.SearchStrategy[int] | None = None,
                    dispatched: bool | None = None,
                    inconsistent_verdicts: bool = False) -> DecisionInputs:
    """Any `DecisionInputs` the step loop could build (budgets and flags in any combination)."""
    flags = draw(_FLAGS)
    if dispatched is None:
        dispatched = flags[12]
    drawn_status = draw(status if status is not None else statuses) if dispatched else None
    max_attempts = draw(st.integers(min_value=1, max_value=6))
    max_validation = draw(st.integers(min_value=0, max_value=4))
    retry_after_ms = draw(_OPTIONAL_MS)
    with_verdicts = inconsistent_verdicts or (
        drawn_status is not None and 400 <= drawn_status <= 499
        and drawn_status not in (401, 403, 405, 408, 429)
    )
    return DecisionInputs(
        dispatched=dispatched,
        status=drawn_status,
        transport_error=draw(_TRANSPORT_ERRORS) if drawn_status == 0 else None,
        retry_policy=draw(_POLICIES),
        error_text=draw(_ERROR_TEXT),
        guard_violations=draw(_GUARD),
        attempt_number=draw(st.integers(min_value=1, max_value=max_attempts + 1)),
        max_attempts=max_attempts,
        validation_retries=draw(st.integers(min_value=0, max_value=max_validation + 1)),
        max_validation_retries=max_validation,
        max_semantic_retries=draw(_SMALL),
        orchestrator=flags[0],
        side_effects=draw(_SIDE_EFFECTS),
        protected_keys=draw(_PROTECTED_DRAW),
        parameter_keys=draw(_KEYS_DRAW),
        has_dependencies=flags[1],
        llm_configured=flags[2],
        error_analyzer_enabled=flags[3],
        semantic_retry_enabled=flags[4],
        semantic_retry_independent_steps=flags[5],
        validation_feedback_enabled=flags[6],
        legacy_callback_set=flags[7],
        legacy_pattern=draw(_PATTERN),
        cancelled=flags[8] and flags[9],
        circuit_open=flags[10] and flags[11],
        retry_after_ms=retry_after_ms,
        retry_after_source=draw(_SOURCE) if retry_after_ms is not None else None,
        retry_after_max_ms=draw(_OPTIONAL_MS),
        backoff=BackoffConfig.from_ms(draw(_DELAY), draw(_MAX_DELAY), draw(_FACTOR), flags[9]),
        elapsed_s=draw(_ELAPSED),
        max_wall_clock_s=draw(_OPTIONAL_WALL),
        llm_tokens_used=draw(_TOKENS),
        max_total_tokens=draw(_OPTIONAL_TOKENS),
        llm_calls_used=draw(_SMALL),
        max_llm_calls=draw(optional_limit),
        repeated_error_count=draw(_SMALL),
        max_repeated_errors=draw(optional_limit),
        body_is_json_object=draw(_BODY_IS_OBJECT),
        ended_by_deadline=drawn_status == 0 and flags[11] and not flags[10],
        tool_retries_used=draw(_SMALL),
        max_retries_per_tool=draw(optional_limit),
        # The step loop adds a layer's verdict only after decide() asked for it, which it does
        # for a correctable 4xx alone; `inconsistent_verdicts` drops that restriction.
        analyzer=draw(_VERDICTS[Layer.ANALYZER]) if with_verdicts else None,
        resolver=draw(_VERDICTS[Layer.RE_RESOLUTION]) if with_verdicts else None,
        legacy=draw(_VERDICTS[Layer.LEGACY]) if with_verdicts else None,
    )
