"""Probing a live tool: deliberately bad requests derived from a capability schema, graded.

`derive_cases(schema, parameters)` names a small set of bad requests (missing required key,
wrong type, empty body, not JSON, unknown enum value) and says which it could not derive and
why. `Prober` sends them once each over real HTTP (the headers and auth `run` sends, a timeout
per request, cancellable), records them as one execution (labelled `probe`) through the
recorder it is given, and grades every answer with lint's checks plus the probe's own rows
(`PROBE_CHECKS`). Headless: no Textual. `truva-console probe` is the command.
"""

from console.probe.cases import (
    KINDS,
    NOT_JSON_BODY,
    ProbeCase,
    SkippedCase,
    derive_cases,
)
from console.probe.checks import PROBE_CHECKS, PROBE_TABLE, grade_probe
from console.probe.runner import (
    DEFAULT_TIMEOUT_S,
    PROBE_LABEL,
    ProbeOutcome,
    Prober,
    ProbeResult,
)
from console.probe.target import (
    ProbeError,
    ProbeTarget,
    check_reachable,
    target_from_plan,
    target_from_url,
)

__all__ = [
    "DEFAULT_TIMEOUT_S", "KINDS", "NOT_JSON_BODY", "PROBE_CHECKS", "PROBE_LABEL", "PROBE_TABLE",
    "ProbeCase", "ProbeError", "ProbeOutcome", "ProbeResult", "ProbeTarget", "Prober",
    "SkippedCase", "check_reachable", "derive_cases", "grade_probe", "target_from_plan",
    "target_from_url",
]
