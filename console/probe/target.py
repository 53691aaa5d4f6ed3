"""What a probe is sent to: a plan's step, or a URL, capability path and schema."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from console.probe.cases import STEP_SLUG
from executor.plan import CapabilitySpec, Plan, PlanError, StepSpec, parse_plan
from executor.plan.model import key_path


class ProbeError(ValueError):
    """Bad probe input (unknown step, bad schema, unreachable tool); str() is one line."""


# ------------------------------------------------------------------------------ the target


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """What is probed: a plan holding the tool and capability (for headers, auth and the
    recorded snapshot), the step whose parameters seed the requests, and where they go."""

    plan: Plan
    step: StepSpec
    capability: CapabilitySpec
    url: str
    side_effects_known: bool = True

    @property
    def refusal(self) -> str | None:
        """Why probing needs `--yes` (side effects not `none`, or unknown), else None."""
        key = self.capability.key
        if not self.side_effects_known:
            return (f"{key}: side_effects unknown (no plan says it); the probes may change "
                    "something; pass --side-effects none if the capability has none, or --yes "
                    "to send them anyway")
        if self.capability.side_effects != "none":
            return (f"{key}: side_effects is {self.capability.side_effects!r}, not 'none'; the "
                    "probes may change something; pass --yes to send them anyway")
        return None


def target_from_plan(plan: Plan, step_id: str) -> ProbeTarget:
    """The target of `--step STEP` in `plan`; ProbeError naming the step when it is not one."""
    try:
        step = plan.step(step_id)
    except KeyError:
        shown = ", ".join(plan.step_ids[:10]) + (", ..." if len(plan.step_ids) > 10 else "")
        raise ProbeError(f"{plan.source_path or 'plan'}: --step {step_id}: not a step of this "
                         f"plan (steps: {shown})") from None  # fmt: skip
    return ProbeTarget(plan, step, plan.capability_for(step), plan.url_for(step))


def target_from_url(
    url: str,
    path: str,
    schema: Any,
    *,
    schema_file: str,
    tool: str = "tool",
    side_effects: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ProbeTarget:
    """The target of `--url URL --capability PATH --schema FILE`, validated as a plan's tool
    and capability are; ProbeError naming the option and the problem."""
    name = STEP_SLUG.sub("-", path.rstrip("/").rsplit("/", 1)[-1]).strip("-") or "root"
    key = f"{tool}.{name}"
    document = {
        "tools": {tool: {"base_url": url, "headers": dict(headers or {})}},
        "capabilities": {key: {"path": path, "schema": schema,
                               "side_effects": side_effects or "none"}},
        "steps": [{"id": "probe", "tool": tool, "capability": name}],
    }  # fmt: skip
    tool_path, capability_path = key_path("tools", tool), key_path("capabilities", key)
    options = {f"{tool_path}.base_url": "--url", f"{tool_path}.headers": "--header",
               tool_path: "--tool", f"{capability_path}.path": "--capability",
               f"{capability_path}.schema": f"--schema {schema_file}",
               capability_path: "--capability", "tools": "--tool"}  # fmt: skip
    try:
        plan = parse_plan(document, source="probe")
    except PlanError as error:
        if not error.path and error.problem.startswith("nested too deeply"):
            # Only the schema file can make the document this deep.
            raise ProbeError(f"--schema {schema_file}: nested too deeply to be a schema "
                             "(Python's recursion limit was reached)") from None
        where = next((_within(option, error.path[len(prefix):])
                      for prefix, option in options.items()
                      if error.path.startswith(prefix)), error.path)  # fmt: skip
        raise ProbeError(f"{where}: {error.problem}") from error
    target = target_from_plan(plan, "probe")
    return replace(target, side_effects_known=side_effects is not None)


def _within(option: str, rest: str) -> str:
    """Where in an option's value a problem is: `--schema FILE: properties.a.type` (was
    `--schema FILE.properties.a.type`, a file name that does not exist)."""
    if option.startswith("--schema ") and rest:
        return f"{option}: {rest.lstrip('.')}"
    return option + rest


def check_reachable(url: str, timeout_s: float) -> None:
    """ProbeError when nothing accepts a TCP connection at `url`'s host and port (checked
    before anything is recorded, so an unreachable tool leaves no execution behind)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname or "", port), timeout=timeout_s).close()
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise ProbeError(f"{url}: cannot connect to {parts.hostname}:{port}: {reason}; is "
                         "the tool running?") from error  # fmt: skip


