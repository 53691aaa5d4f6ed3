"""Demo tools, a rule-based demo LLM and demo plans that run offline on 127.0.0.1 (docs/demo.md)."""

from console.demo.runner import (
    DEMO_PLAN_NAMES,
    DEMO_PLANS,
    DemoEndpoints,
    DemoPlan,
    DemoServices,
    arecord_demo,
    demo_plans,
    record_demo,
    record_demo_events,
    start_demo_services,
)

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
