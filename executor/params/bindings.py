"""Template bindings (`{{step-1.field}}`): resolution, references and exact-bound paths."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from executor.params.coercion import parse_go_int
from executor.params.gofmt import go_format_value, go_json

# reference §3.2: `{{<stepId>.<fieldPath>}}`, with Go's ASCII `\w`.
TEMPLATE_RE = re.compile(r"\{\{([\w-]+)\.([\w-]+(?:\.[\w-]+)*)\}\}", re.ASCII)


def _find_step_result(results: Mapping[str, Any], step_id: str) -> Any:
    """The result of `step_id`, matched exactly and then case-insensitively; `MISSING` if none."""
    if step_id in results:
        return results[step_id]
    folded = step_id.casefold()
    for candidate_id, result in results.items():
        if str(candidate_id).casefold() == folded:
            return result
    return MISSING


def _walk_path(root: Any, field_path: str) -> Any:
    """Go `extractFieldValue`: follow dot segments through maps and arrays; `MISSING` if lost.

    Array indexes are read like Go `strconv.Atoi` (int64 range).
    """
    current = root
    for segment in field_path.split("."):
        if isinstance(current, Mapping):
            current = current.get(segment, MISSING)
            if current is MISSING:
                return MISSING
        elif isinstance(current, list | tuple):
            index = parse_go_int(segment)
            if index is None or not 0 <= index < len(current):
                return MISSING
            current = current[index]
        else:
            return MISSING
    return current


def _lookup_binding(results: Mapping[str, Any], step_id: str, field_path: str) -> Any:
    """The value `{{step_id.field_path}}` names, or `MISSING` when the step or path is absent."""
    step_result = _find_step_result(results, step_id)
    if step_result is MISSING:
        return MISSING
    # reference §3.2: the path is read under "response." unless it already starts there.
    if not field_path.lower().startswith("response."):
        field_path = "response." + field_path
    return _walk_path({"response": step_result}, field_path)


def _resolve_string(text: str, results: Mapping[str, Any]) -> Any:
    """One string leaf with its bindings resolved (Go `substituteTemplates`)."""
    exact = TEMPLATE_RE.fullmatch(text)
    if exact is not None:
        value = _lookup_binding(results, exact.group(1), exact.group(2))
        if value is MISSING:
            return text
        if isinstance(value, Mapping | list | tuple):
            return go_json(value)
        return value

    def splice(match: re.Match[str]) -> str:
        value = _lookup_binding(results, match.group(1), match.group(2))
        return match.group(0) if value is MISSING else go_format_value(value)

    return TEMPLATE_RE.sub(splice, text)


def resolve_bindings(params: Any, results: Mapping[str, Any]) -> Any:
    """Replace `{{step-id.path}}` bindings in every string leaf with values from earlier steps.

    `results` maps a step id to that step's parsed JSON response body; the path is read under
    `response.` (added unless present). A string that is exactly one binding becomes the raw
    value (number, string or bool keep their type, an explicit JSON null becomes None, an
    object or array becomes compact Go-style JSON text). Bindings inside longer text are
    spliced in with `go_format_value`. A binding whose step or path is missing stays literal.
    Lists and dicts are rebuilt recursively; other values and `params` itself are unchanged.
    """
    if isinstance(params, str):
        return _resolve_string(params, results)
    if isinstance(params, Mapping):
        return {key: resolve_bindings(value, results) for key, value in params.items()}
    if isinstance(params, list | tuple):
        return [resolve_bindings(item, results) for item in params]
    return params


def string_leaves(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Every string leaf under `value` with its JSON-path-ish location, depth first (iterative)."""
    leaves: list[tuple[str, str]] = []
    pending: list[tuple[str, Any]] = [(path, value)]
    while pending:
        location, item = pending.pop()
        if isinstance(item, str):
            leaves.append((location, item))
        elif isinstance(item, Mapping):
            pending.extend(reversed([
                (f"{location}.{key}" if location else str(key), member)
                for key, member in item.items()
            ]))
        elif isinstance(item, list | tuple):
            pending.extend(reversed([
                (f"{location}[{index}]", member) for index, member in enumerate(item)
            ]))
    return leaves


def binding_references(value: Any) -> set[str]:
    """The step ids that `{{id.path}}` bindings in any string leaf of `value` refer to."""
    return {
        match.group(1) for _, text in string_leaves(value) for match in TEMPLATE_RE.finditer(text)
    }


def exact_bound_keys(params: Mapping[str, Any] | None) -> frozenset[str]:
    """Top-level keys whose original value is exactly one binding (protected from correction)."""
    if not params:
        return frozenset()
    return frozenset(
        key
        for key, value in params.items()
        if isinstance(value, str) and TEMPLATE_RE.fullmatch(value) is not None
    )


PathSegments = tuple[str | int, ...]
MISSING = object()  # what `value_at_path` returns where a path leads nowhere


def render_path(segments: PathSegments) -> str:
    """A JSON path as users read it: `filter.city`, `items[0].id`."""
    text = ""
    for segment in segments:
        if isinstance(segment, int):
            text += f"[{segment}]"
        else:
            text += f".{segment}" if text else segment
    return text


def exact_bound_paths(params: Any, prefix: PathSegments = ()) -> dict[str, PathSegments]:
    """Every location, at any depth, whose original value is exactly one `{{step.path}}` token.

    Maps the rendered path (`amount`, `order.total`, `lines[0].sku`) to its segments; these
    values are protected from correction (seed 000 §12: exact template bindings).
    """
    found: dict[str, PathSegments] = {}
    if isinstance(params, str):
        if prefix and TEMPLATE_RE.fullmatch(params) is not None:
            found[render_path(prefix)] = prefix
    elif isinstance(params, Mapping):
        for key, value in params.items():
            found.update(exact_bound_paths(value, (*prefix, str(key))))
    elif isinstance(params, list | tuple):
        for index, value in enumerate(params):
            found.update(exact_bound_paths(value, (*prefix, index)))
    return found


def value_at_path(root: Any, segments: PathSegments) -> Any:
    """The value at `segments` inside `root`, or `MISSING` when the path leads nowhere."""
    value = root
    for segment in segments:
        if isinstance(segment, int):
            if not isinstance(value, list | tuple) or not 0 <= segment < len(value):
                return MISSING
        elif not isinstance(value, Mapping) or segment not in value:
            return MISSING
        value = value[segment]
    return value
