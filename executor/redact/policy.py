"""The policy: what each level (AT_REST, EXPORT) redacts in each place, the plan included."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from executor.redact.text import redact_body, redact_secrets
from executor.redact.values import redact_headers, redact_json_value


class Place(StrEnum):
    """A kind of recorded value, as the policy tells them apart."""

    HEADERS = "headers"  # request and response header maps
    URL = "url"  # tool and LLM URLs
    ERROR_TEXT = "error_text"  # transport error messages, step errors
    LLM_SETTINGS = "llm_settings"  # the LLM endpoint snapshot (api_key, base_url)
    PLAN = "plan"  # the plan snapshot
    TEXT = "text"  # any other text: the query, reasons, prompts, answers, event messages
    JSON = "json"  # any other JSON value: parameters, results, decisions, messages
    BODY = "body"  # request and response bytes


class RedactionLevel(StrEnum):
    """Where recorded values go. AT_REST: the store and its spool, where bodies, parameters,
    prompts and answers stay exactly as sent and received. EXPORT: a trace bundle, where
    everything that can carry a credential is redacted."""

    AT_REST = "at_rest"
    EXPORT = "export"


_REDACTED_AT_REST = frozenset(
    {Place.HEADERS, Place.URL, Place.ERROR_TEXT, Place.LLM_SETTINGS, Place.PLAN}
)


def redacts(level: RedactionLevel, place: Place) -> bool:
    """Whether `level` changes values of `place` (the plan: at rest only its credentials)."""
    return level is RedactionLevel.EXPORT or place in _REDACTED_AT_REST


def redact(level: RedactionLevel, place: Place, value: Any) -> Any:
    """`value` (text, a decoded JSON value, header map or body bytes) as `level` keeps it."""
    if value is None or not redacts(level, place):
        return value
    if place is Place.HEADERS:
        if isinstance(value, Mapping) and all(isinstance(item, str) for item in value.values()):
            return redact_headers({str(key): item for key, item in value.items()})
        return redact_json_value(value)
    if place is Place.BODY:
        return redact_body(bytes(value))
    if place is Place.PLAN:
        return redact_plan(value, level)
    if place in (Place.LLM_SETTINGS, Place.JSON):
        return redact_json_value(value)
    return redact_secrets(value) if isinstance(value, str) else redact_json_value(value)


def redact_plan(plan: Any, level: RedactionLevel) -> Any:
    """The plan snapshot as `level` keeps it: one rule set, each level adding to the one before.

    At rest: the tools' headers and base URLs, the capabilities' paths and the `llm` block.
    On export: the at-rest plan with everything else redacted too, except that capability
    schemas keep their keys (a property named `password` describes a type, not a secret) and
    have only their strings redacted, so a replay still validates parameters.
    """
    if not isinstance(plan, dict):
        return redact_json_value(plan) if level is RedactionLevel.EXPORT else plan
    at_rest = _plan_credentials_redacted(plan)
    if level is RedactionLevel.AT_REST:
        return at_rest
    if not isinstance(at_rest.get("capabilities"), dict):
        return redact_json_value(at_rest)
    redacted = redact_json_value(
        {key: item for key, item in at_rest.items() if key != "capabilities"}
    )
    capabilities = {}
    for name, capability in at_rest["capabilities"].items():
        if isinstance(capability, dict):
            capabilities[name] = {
                **redact_json_value({k: v for k, v in capability.items() if k != "schema"}),
                **(
                    {"schema": _redact_strings(capability["schema"])}
                    if "schema" in capability
                    else {}
                ),
            }
        else:
            capabilities[name] = redact_json_value(capability)
    return {key: capabilities if key == "capabilities" else redacted[key] for key in at_rest}


def _plan_credentials_redacted(plan: dict[str, Any]) -> dict[str, Any]:
    redacted = dict(plan)
    tools = plan.get("tools")
    if isinstance(tools, dict):
        redacted["tools"] = {
            name: _tool_credentials_redacted(spec) if isinstance(spec, dict) else spec
            for name, spec in tools.items()
        }
    capabilities = plan.get("capabilities")
    if isinstance(capabilities, dict):
        redacted["capabilities"] = {
            name: {**spec, "path": redact_secrets(spec["path"])}
            if isinstance(spec, dict) and isinstance(spec.get("path"), str)
            else spec
            for name, spec in capabilities.items()
        }
    if plan.get("llm") is not None:
        redacted["llm"] = redact_json_value(plan["llm"])
    return redacted


def _tool_credentials_redacted(spec: dict[str, Any]) -> dict[str, Any]:
    redacted = dict(spec)
    if isinstance(spec.get("headers"), dict):
        redacted["headers"] = redact_headers({str(k): str(v) for k, v in spec["headers"].items()})
    if isinstance(spec.get("base_url"), str):
        redacted["base_url"] = redact_secrets(spec["base_url"])
    return redacted


def _redact_strings(value: Any) -> Any:
    """Every string of a JSON value through `redact_secrets`, keys and shape kept."""
    if isinstance(value, dict):
        return {key: _redact_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact_strings(item) for item in value]
    if isinstance(value, str):
        return redact_secrets(value)
    return value
