"""The probe's own check rows, graded after lint's: the request was deliberately bad."""

from __future__ import annotations

from console.probe.cases import MALFORMED_KINDS, ProbeCase
from executor.runtime.outcomes import HttpOutcome
from executor.tool_contract import CHECKS, Check, Finding, Grade, Response, grade_response

# ------------------------------------------------------------------------------ the checks


def _rejected(r: Response) -> tuple[Grade, str]:
    if r.status in (400, 422):
        return Grade.PASS, f"rejected with HTTP {r.status}"
    if 200 <= r.status < 300:
        return Grade.FAIL, (f"HTTP {r.status} for a deliberately bad request: the tool accepted "
                            "it, so the executor takes its answer as a result")
    if r.status >= 500:
        return Grade.FAIL, (f"HTTP {r.status} for a deliberately bad request: the executor "
                            "resends it unchanged and it cannot succeed (Scenario D); answer "
                            "400 or 422")
    if 400 <= r.status < 500:
        return Grade.WARN, (f"HTTP {r.status} for a deliberately bad request: an input error "
                            "is 400 or 422 (INPUT_ERROR)")
    return Grade.FAIL, f"HTTP {r.status} for a deliberately bad request: answer 400 or 422"


def _malformed_retryable(r: Response) -> tuple[Grade, str]:
    if (r.envelope.error_object or {}).get("retryable") is False:
        return Grade.PASS, "retryable:false for a body that cannot be read"
    return Grade.WARN, ("retryable:true for a body that is empty or not JSON: no correction of "
                        "the parameters fixes a body that was never read; seed 001 answers "
                        "bad JSON with retryable:false")


def _declares_retryable(r: Response) -> bool:
    return r.is_error and isinstance((r.envelope.error_object or {}).get("retryable"), bool)


# The probe's own rows, after lint's: what a probe knows that a recorded response does not —
# the request was deliberately bad.
PROBE_CHECKS: tuple[Check, ...] = (
    Check("probe_rejected", "a bad request gets a 4xx input error (400/422), not 2xx or 5xx",
          "seed 000 §8 Scenario D, §11", lambda r: True, _rejected),
    Check("probe_malformed_retryable", "an unreadable body gets retryable:false",
          "seed 001 Part 2", _declares_retryable, _malformed_retryable),
)
PROBE_TABLE: tuple[Check, ...] = CHECKS + PROBE_CHECKS


def grade_probe(case: ProbeCase, outcome: HttpOutcome) -> list[Finding]:
    """Lint's findings for the answer to `case`, plus the probe's rows that apply to its kind.

    A request that got no answer fails `probe_rejected` and has no other finding; one
    cancelled in flight has none.
    """
    if outcome.transport_error == "cancelled":
        return []
    if outcome.status == 0:
        return [Finding("probe_rejected", Grade.FAIL,
                        f"no answer: {outcome.transport_error_message or outcome.transport_error}")]
    rows = [row for row in PROBE_TABLE
            if row.id != "probe_malformed_retryable" or case.kind in MALFORMED_KINDS]
    return grade_response(outcome.status, outcome.headers, outcome.body, rows)


