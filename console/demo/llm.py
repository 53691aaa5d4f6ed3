"""The demo LLM: a rule-based, OpenAI-compatible stand-in so the demos need no network or key.

It is not a model. It recognises truva-console's three prompts (layer-3 error analysis, layer-4
re-resolution, legacy correction), reads the sections the executor wrote into them, and answers
from fixed rules: a small table of known corrections (PARIS→PAR, Tokio→Tokyo, "Flower Mound, TX"
→"Flower Mound, Texas, US") and one computation (N shares × the price found in the source data
fills a missing amount). Everything else gets "cannot fix". Answers are proper `chat.completion`
documents with usage, so the real `openai` client and the recorded LLM calls look as they would
with a real endpoint. Point a plan's `llm.base_url` at any other endpoint to use a real model.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from console.demo.server import DemoHTTPServer, DemoRequest, DemoResponse

DEMO_MODEL = "truva-demo-rules"
CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
CREATED_AT = 1_767_225_600  # 2026-01-01T00:00:00Z, fixed so answers are byte-identical

ANALYZER_MARKER = "You are an error analysis assistant"
RERESOLVER_MARKER = "You are a parameter re-resolution assistant"
LEGACY_MARKER = "The following tool call failed with a type error"
UNKNOWN_PROMPT_ANSWER = (
    "The truva demo LLM is a rule-based stand-in: it answers only truva-console's error "
    "analysis, re-resolution and correction prompts."
)
CANNOT_FIX_REASON = (
    "Cannot fix from the error alone: it does not say which value would be valid, and neither "
    "the request nor the user query identifies one."
)
TRANSIENT_WORDS = ("timeout", "timed out", "unavailable", "connection refused", "rate limit")
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Correction:
    """A parameter value the demo LLM knows how to correct, and why."""

    wrong: str
    right: str
    reason: str


CORRECTIONS = (
    Correction("PARIS", "PAR",
               "PARIS is not a valid IATA city code. The correct code for Paris is PAR."),
    Correction("Tokio", "Tokyo", "'Tokio' is a typo of the city name 'Tokyo'."),
    Correction("Flower Mound, TX", "Flower Mound, Texas, US",
               "TX is a US state abbreviation; the weather database expects "
               "'City, State, Country'."),
)  # fmt: skip

_SHARES_RE = re.compile(r"(\d+(?:\.\d+)?)\s+(?:[A-Za-z]+\s+){0,2}shares\b", re.IGNORECASE)


# ------------------------------------------------------------------------------ prompt reading


def _section(prompt: str, tag: str) -> str | None:
    match = re.search(rf"<{tag}(?: [^>]*)?>\n(.*?)\n</{tag}>", prompt, re.DOTALL)
    return match.group(1) if match else None


def _json_object(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _table_changes(parameters: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Top-level string values the correction table knows, and the reasons."""
    changes: dict[str, Any] = {}
    reasons: list[str] = []
    for key, value in parameters.items():
        for correction in CORRECTIONS:
            if value == correction.wrong:
                changes[key] = correction.right
                reasons.append(correction.reason)
    return changes, reasons


def _first_price(value: Any, path: str = "") -> tuple[str, float] | None:
    """The first numeric `price` field in the source data, depth first, and its path."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if key == "price" and isinstance(item, int | float) and not isinstance(item, bool):
                return here, float(item)
            found = _first_price(item, here)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _first_price(item, f"{path}.{index}")
            if found is not None:
                return found
    return None


def _number_text(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


# -------------------------------------------------------------------------------------- rules


def analyze(prompt: str) -> dict[str, Any]:
    """The layer-3 answer: a table correction, else transient or cannot-fix."""
    request = _json_object(_section(prompt, "original_request"))
    changes, reasons = _table_changes(request)
    if changes:
        return {
            "should_retry": True,
            "reason": " ".join(reasons),
            "suggested_changes": changes,
            "is_transient_error": False,
        }
    status_match = re.search(r'<error_response status="(\d+)">', prompt)
    status = int(status_match.group(1)) if status_match else 0
    error_text = (_section(prompt, "error_response") or "").lower()
    if status in TRANSIENT_STATUSES or any(word in error_text for word in TRANSIENT_WORDS):
        return {
            "should_retry": False,
            "reason": "The error is transient; the same request may succeed later.",
            "suggested_changes": {},
            "is_transient_error": True,
        }
    return {
        "should_retry": False,
        "reason": CANNOT_FIX_REASON,
        "suggested_changes": {},
        "is_transient_error": False,
    }


def re_resolve(prompt: str) -> dict[str, Any]:
    """The layer-4 answer: a table correction, else N shares × price for a bad amount."""
    failed = re.search(
        r"Parameters sent: (.*?)\nError: (.*?)\n</failed_attempt>", prompt, re.DOTALL
    )
    attempted = _json_object(failed.group(1) if failed else None)
    error_text = failed.group(2) if failed else ""
    changes, reasons = _table_changes(attempted)
    if changes:
        return {
            "should_retry": True,
            "analysis": " ".join(reasons),
            "corrected_parameters": {**attempted, **changes},
        }
    user_request = _section(prompt, "user_request") or ""
    shares = _SHARES_RE.search(user_request)
    price = _first_price(_json_object(_section(prompt, "source_data")))
    if "amount" in attempted and "amount" in error_text.lower() and shares and price:
        quantity = float(shares.group(1))
        price_path, price_value = price
        amount = round(quantity * price_value, 6)
        analysis = (
            f"Computed {_number_text(quantity)} × {_number_text(price_value)} = "
            f"{_number_text(amount)}: the user asked about {_number_text(quantity)} shares and "
            f"{price_path} is the share price."
        )
        corrected = {**attempted, "amount": int(amount) if amount == int(amount) else amount}
        return {"should_retry": True, "analysis": analysis, "corrected_parameters": corrected}
    return {"should_retry": False, "analysis": CANNOT_FIX_REASON, "corrected_parameters": None}


def correct(prompt: str) -> dict[str, Any]:
    """The legacy answer: the parameters with table corrections and quoted scalars unquoted."""
    original = re.search(
        r"Original Parameters \(INCORRECT - caused the error above\):\n(.*?)\n\n"
        r"Expected Parameter Schema:\n(.*?)\n\nCRITICAL RULES",
        prompt,
        re.DOTALL,
    )
    parameters = _json_object(original.group(1) if original else None)
    schema = _json_object(original.group(2) if original else None)
    changes, _ = _table_changes(parameters)
    corrected = {**parameters, **changes}
    properties = schema.get("properties")
    for key, spec in properties.items() if isinstance(properties, Mapping) else ():
        value = corrected.get(key)
        declared = spec.get("type") if isinstance(spec, Mapping) else None
        if isinstance(value, str):
            corrected[key] = _unquoted(value, declared)
    return corrected


def _unquoted(value: str, declared: Any) -> Any:
    try:
        if declared == "integer":
            return int(value)
        if declared == "number":
            return float(value)
    except ValueError:
        return value
    if declared == "boolean" and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def answer(prompt: str) -> str:
    """The assistant content for a prompt: compact JSON for known prompts, else a sentence."""
    if ANALYZER_MARKER in prompt:
        return json.dumps(analyze(prompt), ensure_ascii=False)
    if RERESOLVER_MARKER in prompt:
        return json.dumps(re_resolve(prompt), ensure_ascii=False)
    if LEGACY_MARKER in prompt:
        return json.dumps(correct(prompt), ensure_ascii=False)
    return UNKNOWN_PROMPT_ANSWER


# ------------------------------------------------------------------------------------- server


def prompt_text(request_json: Any) -> str:
    """All string message contents of a chat request, joined by newlines."""
    messages = request_json.get("messages") if isinstance(request_json, Mapping) else None
    if not isinstance(messages, list):
        return ""
    parts = [m.get("content") for m in messages if isinstance(m, Mapping)]
    return "\n".join(part for part in parts if isinstance(part, str))


def _openai_error(status: int, message: str, error_type: str) -> DemoResponse:
    return DemoResponse(
        status, {"error": {"message": message, "type": error_type, "param": None, "code": None}}
    )


def handle_llm_request(request: DemoRequest) -> DemoResponse:
    """Serve `POST /v1/chat/completions` and `GET /v1/models`."""
    if request.path == MODELS_PATH and request.method == "GET":
        return DemoResponse(200, {"object": "list", "data": [
            {"id": DEMO_MODEL, "object": "model", "created": CREATED_AT,
             "owned_by": "truva-demo"}]})  # fmt: skip
    if request.path != CHAT_COMPLETIONS_PATH or request.method != "POST":
        return _openai_error(
            404, f"the demo LLM serves POST {CHAT_COMPLETIONS_PATH} and GET {MODELS_PATH}, "
            f"got {request.method} {request.path}", "not_found",
        )  # fmt: skip
    if not isinstance(request.json, dict) or not isinstance(request.json.get("messages"), list):
        return _openai_error(
            400, "the request must be a JSON object with a messages list", "invalid_request_error"
        )
    prompt = prompt_text(request.json)
    content = answer(prompt)
    model = request.json.get("model")
    prompt_tokens = len(prompt) // 4
    completion_tokens = len(content) // 4
    return DemoResponse(200, {
        "id": "chatcmpl-demo-" + hashlib.sha256(request.body).hexdigest()[:24],
        "object": "chat.completion",
        "created": CREATED_AT,
        "model": model if isinstance(model, str) and model else DEMO_MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    })  # fmt: skip


def start_demo_llm(port: int = 0) -> DemoHTTPServer:
    """Start the demo LLM on 127.0.0.1:`port`; its openai `base_url` is `<base_url>/v1`."""
    return DemoHTTPServer("llm", handle_llm_request, port=port)
