"""What every demo plan ends with: statuses and the rule of every attempt."""

from __future__ import annotations

# plan -> (execution status, {step: (step status, rule id of every attempt in order)})
EXPECTED: dict[str, tuple[str, dict[str, tuple[str, list[str]]]]] = {
    "scenario-a-invalid-city": ("succeeded", {
        "step-1": ("succeeded", ["analyzer.accept", "success.2xx"])}),
    "scenario-b-rate-limit": ("succeeded", {
        "step-1": ("succeeded", ["transient.retry_same", "success.2xx"])}),
    "scenario-c-expired-key": ("failed", {
        "step-1": ("failed", ["terminal.auth_or_method"])}),
    "scenario-d-misclassified-503": ("failed", {
        "step-1": ("failed", ["transient.retry_same", "transient.retry_same",
                              "budget.attempts"])}),
    "flower-mound": ("succeeded", {
        "step-1": ("succeeded", ["analyzer.accept", "success.2xx"])}),
    "tesla-layer4": ("succeeded", {
        "step-1": ("succeeded", ["transient.retry_same", "success.2xx"]),
        "step-2": ("succeeded", ["re_resolution.accept", "success.2xx"])}),
    "parallel-partial": ("partial", {
        "step-1": ("succeeded", ["success.2xx"]),
        "step-2": ("succeeded", ["analyzer.accept", "success.2xx"]),
        "step-3": ("succeeded", ["transient.retry_same", "transient.retry_same",
                                 "success.2xx"]),
        "step-4": ("failed", ["refused.explicit_false"]),
        "step-5": ("succeeded", ["success.2xx"]),
        "step-6": ("skipped", [])}),
    "unsafe-charge": ("partial", {
        "step-1": ("succeeded", ["success.2xx"]),
        "step-2": ("failed", ["side_effects.unsafe_resend"])}),
    "guard-rejection": ("failed", {
        "step-1": ("rejected", ["guard.reject_predispatch"])}),
    "hitl-protected": ("failed", {
        "step-1": ("failed", ["analyzer.protected"])}),
    "orchestrator-timeout": ("failed", {
        "step-1": ("failed", ["orchestrator.single_dispatch"])}),
    "no-correction": ("failed", {
        "step-1": ("failed", ["no_correction.stop"])}),
    "circuit-open": ("failed", {
        "step-1": ("failed", ["transient.retry_same"] * 9 + ["budget.attempts"]),
        "step-2": ("rejected", ["circuit.open"])}),
    "cancelled-report": ("cancelled", {
        "step-1": ("succeeded", ["success.2xx"]),
        "step-2": ("failed", ["cancel.in_flight"]),
        "step-3": ("skipped", [])}),
}  # fmt: skip

# Every action of executor.policy.Action that ends an attempt (ask_* and dispatch are internal).
EVERY_FINAL_ACTION = (
    "success", "retry_same", "retry_corrected", "stop_refused", "stop_terminal",
    "stop_single_dispatch", "stop_protected", "stop_budget", "stop_no_correction",
    "reject_predispatch", "stop_unsafe_resend", "stop_cancelled", "stop_circuit_open",
)  # fmt: skip
