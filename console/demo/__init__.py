"""Demo tools, a rule-based demo LLM and demo plans that run offline on 127.0.0.1 (docs/demo.md)."""

from executor.lazy import lazy_attributes

__all__ = [
    "DEMO_PLANS",
    "DEMO_PLAN_NAMES",
    "DemoEndpoints",
    "DemoPlan",
    "DemoServices",
    "arecord_demo",
    "demo_plans",
    "record_demo",
    "record_demo_events",
    "start_demo_services",
]

# Imported on first use: the servers need httpx, which the CLI's parser (and every command but
# `demo`) does without.
__getattr__ = lazy_attributes(__name__, dict.fromkeys(__all__, "console.demo.runner"), globals())
