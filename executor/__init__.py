"""truva-console executor: a faithful Python port of the TruvaG3 error-handling policy.

Headless: it imports no Textual, Rich or DuckDB. Modules and packages: `wire` (envelope,
classification), `redact` (the levels), `backoff`, `config`, `params` (coercion, bindings,
guard), `policy` (`decide()`, `redecide()`), `llm` (layers 3 and 4), `plan`, `runtime` (the
step loop), `resilience`, `events`, `eventlog` (the event codec), `jsonform`, `telemetry`.
"""

__version__ = "0.1.0"
