"""Step parameters: schema coercion, template bindings, the pre-dispatch guard, legacy patterns."""

from executor.params.bindings import (
    MISSING,
    TEMPLATE_RE,
    binding_references,
    exact_bound_keys,
    exact_bound_paths,
    render_path,
    resolve_bindings,
    value_at_path,
)
from executor.params.coercion import Coercion, coerce_parameters
from executor.params.error_patterns import (
    TYPE_ERROR_PATTERNS,
    VALIDATION_ERROR_PATTERNS,
    match_type_related_error,
)
from executor.params.gofmt import go_format_value
from executor.params.guard import GuardViolation, guard_parameters, json_equal, json_type_name

__all__ = [
    "MISSING",
    "TEMPLATE_RE",
    "TYPE_ERROR_PATTERNS",
    "VALIDATION_ERROR_PATTERNS",
    "Coercion",
    "GuardViolation",
    "binding_references",
    "coerce_parameters",
    "exact_bound_keys",
    "exact_bound_paths",
    "go_format_value",
    "guard_parameters",
    "json_equal",
    "json_type_name",
    "match_type_related_error",
    "render_path",
    "resolve_bindings",
    "value_at_path",
]
