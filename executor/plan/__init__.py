"""Plan files (SPEC §3.1): loading, validation with one-line errors, and the frozen plan records."""

from executor.plan.loading import load_plan, parse_plan
from executor.plan.model import (
    CapabilitySpec,
    Plan,
    PlanError,
    StepSpec,
    ToolSpec,
    basic_authorization,
    split_userinfo,
)
from executor.plan.validation import (
    LLM_TIMEOUT_MAX_S,
    PLAN_FIELDS,
    SCHEMA_TYPES,
    SIDE_EFFECTS,
    header_value_problem,
)

__all__ = [
    "LLM_TIMEOUT_MAX_S",
    "PLAN_FIELDS",
    "SCHEMA_TYPES",
    "SIDE_EFFECTS",
    "CapabilitySpec",
    "Plan",
    "PlanError",
    "StepSpec",
    "ToolSpec",
    "basic_authorization",
    "header_value_problem",
    "load_plan",
    "parse_plan",
    "split_userinfo",
]
