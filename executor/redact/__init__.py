"""The one redaction policy: credential names and shapes, and what each level redacts where.

`redact_sensitive_text` is Go's `core.RedactSensitiveText` (the nine patterns of reference
notes §1.5); the executor uses it for error texts and prompts. `redact_secrets` adds
value-based detection of well-known credential shapes. `redact(level, place, value)` applies
the policy: `AT_REST` (the store and its spool) and `EXPORT` (trace bundles). Every pattern
runs in time linear in its input.

The package: `patterns` (Go's text patterns), `shapes` (credential shapes by value), `names`
(sensitive key and header names), `text` (texts, JSON text, bodies), `values` (header maps,
JSON values) and `policy` (the levels).
"""

from executor.redact.names import is_secretish_name, is_sensitive_name
from executor.redact.patterns import REDACTED
from executor.redact.policy import Place, RedactionLevel, redact, redact_plan, redacts
from executor.redact.shapes import looks_random
from executor.redact.text import redact_body, redact_secrets, redact_sensitive_text
from executor.redact.values import redact_headers, redact_json_value

__all__ = [
    "REDACTED",
    "Place",
    "RedactionLevel",
    "is_secretish_name",
    "is_sensitive_name",
    "looks_random",
    "redact",
    "redact_body",
    "redact_headers",
    "redact_json_value",
    "redact_plan",
    "redact_secrets",
    "redact_sensitive_text",
    "redacts",
]
