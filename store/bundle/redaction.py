"""How a bundle's rows are redacted on export (the EXPORT level of `executor.redact`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from executor.redact import REDACTED, Place, RedactionLevel, redact
from executor.redact import redact_body as redact_body  # public here too: the body rule

# How each column is redacted on export; columns not named here hold no user data.
REDACTED_COLUMNS: dict[str, dict[str, str]] = {
    "executions": {"query": "text", "stop_reason": "text"},
    "execution_snapshots": {
        "plan": "plan",
        "config": "json",
        "config_sources": "json",
        "llm": "json",
    },
    "steps": {
        "url": "text",
        "parameters": "json",
        "error": "text",
        "result": "json",
        "skip_reason": "text",
    },
    "attempts": {
        "parameters": "json",
        "url": "text",
        "request_headers": "headers",
        "request_body": "body",
        "response_headers": "headers",
        "response_body": "body",
        "transport_error_message": "text",
        "reason": "text",
        "decision": "json",
        "corrected_parameters": "json",
    },
    "llm_calls": {
        "base_url": "text",
        "request_body": "body",
        "response_body": "body",
        "response_headers": "headers",
        "unsent_messages": "json",
        "raw_text": "text",
        "parsed": "json",
        "parse_error": "text",
        "error": "text",
    },
    "events": {"message": "text", "attrs": "json"},
}
# A redacted body's size column is set to the new length.
_SIZE_COLUMNS = {"request_body": "request_size", "response_body": "response_size"}
# How each `REDACTED_COLUMNS` entry is handed to the policy.
_PLACES = {"text": Place.TEXT, "json": Place.JSON, "plan": Place.PLAN, "headers": Place.HEADERS}


def _redact_json_text(text: str, place: Place) -> str:
    value = json.loads(text)
    redacted = redact(RedactionLevel.EXPORT, place, value)
    if redacted == value:
        return text
    return json.dumps(redacted, ensure_ascii=False)


def redact_row(table: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a raw row with the columns of `REDACTED_COLUMNS[table]` redacted for EXPORT."""
    redacted = dict(row)
    for column, how in REDACTED_COLUMNS.get(table, {}).items():
        value = redacted.get(column)
        if value is None:
            continue
        if how == "text":
            redacted[column] = redact(RedactionLevel.EXPORT, Place.TEXT, value)
        elif how == "body":
            body = redact(RedactionLevel.EXPORT, Place.BODY, bytes(value))
            if body != value and _SIZE_COLUMNS.get(column) in redacted:
                redacted[_SIZE_COLUMNS[column]] = len(body)
            redacted[column] = body
        else:
            redacted[column] = _redact_json_text(value, _PLACES[how])
    return redacted


def redaction_manifest(applied: bool) -> dict[str, Any]:
    if not applied:
        return {"applied": False}
    return {
        "applied": True,
        "replacement": REDACTED,
        "columns": REDACTED_COLUMNS,
        "notes": (
            "executor.redact policy, level export. text: credential patterns (keys, "
            "authorization values, URL query parameters, bearer/basic credentials, URL "
            "userinfo) and credential shapes found by value (sk-, AKIA/ASIA, ghp_/github_pat_, "
            "JWTs, xox?-, sk_live_/rk_live_, AIza, PEM private keys, random-looking values "
            "assigned to secret-ish words); json: values under credential-named keys, "
            "random-looking values under secret-ish keys, and every string as text; headers: "
            "credential-named headers lose their value, the rest as text; body: as text, JSON "
            "stays valid JSON, non-UTF-8 bytes kept unless a pattern matches, and the *_size "
            "column is the redacted length; plan: json, capability schemas keep their shape"
        ),
    }
