"""A small agent that calls the demo tools through truva-console's Python API, recorded.

It starts the demo tools and the demo LLM (an OpenAI-compatible, rule-based stand-in) on
loopback, then: runs a two-step plan built in code (hotels in "PARIS", which layer 3 corrects
to PAR, then the cheapest price converted to USD through a binding), and makes one direct
`call_tool` that the flights upstream refuses (401), handled as a typed error. Everything is
recorded into the store; open it with `truva-console --db PATH`.

    python examples/agent.py --db /tmp/agent.duckdb
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from console.demo.llm import DEMO_MODEL
from console.demo.runner import start_demo_services
from executor import LLM, Plan, Step, Tool, ToolCallError, call_tool, run_plan
from store import Recording

HOTEL_SCHEMA = {
    "type": "object",
    "properties": {"city_code": {"type": "string"}, "nights": {"type": "integer"}},
    "required": ["city_code"],
}


async def agent(db_path: str, tools_base_urls: dict[str, str], llm_base_url: str) -> int:
    """Run the agent's tool calls, recorded into `db_path`; 0 when it behaved as expected."""
    model = LLM(base_url=llm_base_url, model=DEMO_MODEL, api_key="demo-no-key-needed")
    travel = Tool("travel", tools_base_urls["travel"])
    currency = Tool("currency", tools_base_urls["currency"])
    hotels = travel.capability(
        "search_hotels", schema=HOTEL_SCHEMA,
        description="Search hotel offers by IATA city code (3 letters, e.g. PAR, TYO)",
    )  # fmt: skip
    search = Step("step-1", hotels, {"city_code": "PARIS", "nights": "2"})
    convert = Step("step-2", currency.capability("convert"),
                   {"amount": "{{step-1.data.hotels.0.total}}", "from": "EUR", "to": "USD"})
    plan = Plan([search, convert], query="Find a hotel in Paris for 2 nights, price in USD",
                llm=model)  # fmt: skip

    async with Recording(db_path) as rec:
        outcome = await run_plan(plan, recorder=rec, labels={"agent": "examples/agent.py"})
        for step in outcome.steps:
            last = step.attempts[-1].decision if step.attempts else None
            rule = last.rule_id if last is not None else "-"
            print(f"{step.id}: {step.status} after {len(step.attempts)} attempt(s) [{rule}]")
        try:
            await call_tool(travel, "search_flights",
                            {"origin": "PAR", "destination": "TYO"}, recorder=rec)
        except ToolCallError as error:
            decision = error.decision
            assert decision is not None
            print(f"flights: {decision.action} [{decision.rule_id}] {decision.recovery}")
    print(f"recorded into {db_path}; open it with: truva-console --db {db_path}")
    return 0 if outcome.status == "succeeded" else 1


def main(argv: Sequence[str] | None = None) -> int:
    """`python examples/agent.py --db PATH`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=".truva/agent.duckdb", help="the store to record into")
    args = parser.parse_args(argv)
    with start_demo_services() as services:
        return asyncio.run(agent(args.db, services.tools_base_urls, services.llm_base_url))


if __name__ == "__main__":
    sys.exit(main())
