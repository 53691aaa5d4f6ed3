"""truva-console executor: a faithful Python port of the TruvaG3 error-handling policy.

Headless: it imports no Textual, Rich or DuckDB. Submodules: `wire` (envelope, classification),
`redact`, `backoff`, `config`, `params` (coercion, bindings, guard), `policy` (`decide()`),
`llm` (layers 3 and 4), `plan`, `runtime` (the step loop), `resilience`, `events`.
"""

__version__ = "0.1.0"
