"""The scheduler on loopback: skip reasons and their order, and linear work on long plans.

The ready queue and the targeted skip checks must give exactly what checking every pending
step in plan order, until a pass skips nothing, gave: `reference_schedule` below is that
rescanning scheduler, written out as an oracle, and seeded random plans are run against it.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from typing import Any

import pytest

from executor.events import ListRecorder
from executor.params import binding_references
from executor.plan import Plan, parse_plan
from executor.runtime import PlanExecutor
from tests.support.plans import capability, plan, step
from tests.support.tool_server import ToolReply

OK, FAIL = "ok", "fail"


def _script(tool_server) -> None:
    tool_server.script(f"/capabilities/{OK}", ToolReply.ok({"n": 1}))
    tool_server.script(f"/capabilities/{FAIL}", ToolReply.error(401, "DENIED", "no"))


def _document(tool_server, steps: list[dict]) -> dict[str, Any]:
    return plan(tool_server.base_url, {OK: capability(OK), FAIL: capability(FAIL)}, steps,
                config={"max_concurrency": 1})


async def _finished(document: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    recorder = ListRecorder()
    await PlanExecutor(parse_plan(document), recorder=recorder, env={}).run()
    return [(e.step_id, e.status, e.skip_reason) for e in recorder.of_kind("step_finished")]


def _old_blocking_reason(step, statuses: dict[str, str]) -> str | None:
    """The skip reason, as `PlanExecutor._blocking_reason` words it (no cancel, no budget)."""
    explicit = sorted(d for d in step.depends_on if d in statuses and statuses[d] != "succeeded")
    if len(explicit) == 1:
        return f"skipped due to failed dependency: {explicit[0]}"
    if explicit:
        return f"skipped due to failed dependencies: {', '.join(explicit)}"
    templated = sorted(d for d in binding_references(step.parameters)
                       if d in statuses and statuses[d] != "succeeded")
    if templated:
        first, rest = templated[0], templated[1:]
        extra = f"; additional failed upstreams: {', '.join(rest)}" if rest else ""
        return (f"skipped due to failed template dependency: {first} "
                f"(parameter references {{{{{first}...}}}} but that step failed{extra})")
    return None


def reference_schedule(parsed: Plan, failing: set[str]) -> list[tuple[str, str, str | None]]:
    """The rescanning scheduler with max_concurrency 1: steps run one at a time, in the order
    they became ready; `failing` steps fail, the others succeed."""
    statuses: dict[str, str] = {}
    finished: list[tuple[str, str, str | None]] = []
    pending = {s.id: s for s in parsed.steps}
    queued: deque[str] = deque()
    while pending or queued:
        changed = True
        while changed:
            changed = False
            for step_id in list(pending):
                reason = _old_blocking_reason(pending[step_id], statuses)
                if reason is not None:
                    del pending[step_id]
                    statuses[step_id] = "skipped"
                    finished.append((step_id, "skipped", reason))
                    changed = True
        for step_id in [s for s in pending if all(
                statuses.get(d) == "succeeded" for d in parsed.dependencies_of(s))]:
            del pending[step_id]
            queued.append(step_id)
        if not queued:
            for step_id in list(pending):
                del pending[step_id]
                finished.append((step_id, "skipped", "no executable steps found"))
            break
        step_id = queued.popleft()
        statuses[step_id] = "failed" if step_id in failing else "succeeded"
        finished.append((step_id, statuses[step_id], None))
    return finished


def _random_steps(seed: int) -> tuple[list[dict], set[str]]:
    """A random DAG in shuffled plan order: depends_on and bindings (some in other letter case)
    to earlier steps of a hidden order, about a quarter of the steps failing."""
    rng = random.Random(seed)
    count = rng.randint(6, 16)
    ids = [f"step-{k}" for k in range(count)]
    steps, failing = [], set()
    for k, step_id in enumerate(ids):
        earlier = ids[:k]
        depends_on = rng.sample(earlier, min(len(earlier), rng.randint(0, 3)))
        parameters: dict[str, Any] = {"k": k}
        for b, target in enumerate(rng.sample(earlier, min(len(earlier), rng.randint(0, 2)))):
            shown = target.upper() if rng.random() < 0.2 else target
            token = f"{{{{{shown}.data.n}}}}"
            parameters[f"b{b}"] = token if rng.random() < 0.5 else f"n={token}"
        fails = rng.random() < 0.25
        if fails:
            failing.add(step_id)
        steps.append(step(step_id, FAIL if fails else OK, parameters, depends_on=depends_on))
    rng.shuffle(steps)
    return steps, failing


@pytest.mark.parametrize("seed", range(40))
async def test_skips_match_the_rescanning_scheduler(tool_server, seed: int) -> None:
    _script(tool_server)
    steps, failing = _random_steps(seed)
    document = _document(tool_server, steps)
    expected = reference_schedule(parse_plan(document), failing)
    assert await _finished(document) == expected


# (case name, steps, expected (step id, status, skip reason) in the order they finished)
CASCADES = [
    (
        "explicit_dependency",
        [step("step-1", FAIL), step("step-2", OK, depends_on=["step-1"])],
        [("step-1", "failed", None),
         ("step-2", "skipped", "skipped due to failed dependency: step-1")],
    ),
    (
        "skip_cascades_through_a_skipped_step_earlier_in_plan_order",
        [step("step-3", OK, depends_on=["step-2"]), step("step-1", FAIL),
         step("step-2", OK, depends_on=["step-1"])],
        [("step-1", "failed", None),
         ("step-2", "skipped", "skipped due to failed dependency: step-1"),
         ("step-3", "skipped", "skipped due to failed dependency: step-2")],
    ),
    (
        "two_dependencies_skipped_in_one_pass_are_named_together",
        [step("step-1", FAIL), step("step-a", OK, depends_on=["step-1"]),
         step("step-b", OK, depends_on=["step-1"]),
         step("step-3", OK, depends_on=["step-b", "step-a"])],
        [("step-1", "failed", None),
         ("step-a", "skipped", "skipped due to failed dependency: step-1"),
         ("step-b", "skipped", "skipped due to failed dependency: step-1"),
         ("step-3", "skipped", "skipped due to failed dependencies: step-a, step-b")],
    ),
    (
        "a_step_earlier_in_plan_order_is_checked_again_in_the_next_pass",
        [step("step-3", OK, depends_on=["step-b", "step-a"]), step("step-1", FAIL),
         step("step-a", OK, depends_on=["step-1"]), step("step-b", OK, depends_on=["step-1"])],
        [("step-1", "failed", None),
         ("step-a", "skipped", "skipped due to failed dependency: step-1"),
         ("step-b", "skipped", "skipped due to failed dependency: step-1"),
         ("step-3", "skipped", "skipped due to failed dependencies: step-a, step-b")],
    ),
    (
        "template_dependency_with_additional_upstreams",
        [step("step-1", FAIL), step("step-a", OK, depends_on=["step-1"]),
         step("step-b", OK, depends_on=["step-1"]),
         step("step-3", OK, {"x": "{{step-b.data.n}}", "y": "n={{step-a.data.n}}"})],
        [("step-1", "failed", None),
         ("step-a", "skipped", "skipped due to failed dependency: step-1"),
         ("step-b", "skipped", "skipped due to failed dependency: step-1"),
         ("step-3", "skipped", "skipped due to failed template dependency: step-a (parameter "
          "references {{step-a...}} but that step failed; additional failed upstreams: step-b)")],
    ),
    (
        "binding_in_other_case_to_a_failed_step_is_left_until_nothing_runs",
        [step("step-1", FAIL), step("step-2", OK, {"a": "{{STEP-1.data.n}}"}), step("step-3", OK)],
        [("step-1", "failed", None),
         ("step-3", "succeeded", None),
         ("step-2", "skipped", "no executable steps found")],
    ),
]


@pytest.mark.parametrize(
    ("steps", "expected"), [case[1:] for case in CASCADES], ids=[case[0] for case in CASCADES]
)
async def test_cascade(tool_server, steps: list[dict], expected: list) -> None:
    _script(tool_server)
    document = _document(tool_server, steps)
    assert await _finished(document) == expected
    failing = {s["id"] for s in steps if s["capability"] == FAIL}
    assert reference_schedule(parse_plan(document), failing) == expected


class _CountingExecutor(PlanExecutor):
    """Counts how many times a step's skip reason is worked out."""

    blocking_checks = 0

    def _blocking_reason(self, step):
        type(self).blocking_checks += 1
        return super()._blocking_reason(step)


async def test_a_failed_chain_head_checks_each_step_once(tool_server) -> None:
    """2,000-step chain whose first step fails: the rescanning scheduler checked ~N²/2 skip
    reasons (2,001,000 here); the targeted checks look at each blocked step once."""
    _script(tool_server)
    size = 2000
    steps = [step("step-0", FAIL)] + [
        step(f"step-{i}", OK, depends_on=[f"step-{i - 1}"]) for i in range(1, size)
    ]
    recorder = ListRecorder()
    _CountingExecutor.blocking_checks = 0
    await _CountingExecutor(parse_plan(_document(tool_server, steps)), recorder=recorder,
                            env={}).run()
    skipped = [e for e in recorder.of_kind("step_finished") if e.status == "skipped"]
    assert len(skipped) == size - 1
    assert skipped[-1].skip_reason == f"skipped due to failed dependency: step-{size - 2}"
    assert _CountingExecutor.blocking_checks == size - 1


async def test_a_succeeding_chain_checks_no_skip_reason(tool_server) -> None:
    _script(tool_server)
    steps = [step("step-0", OK)] + [
        step(f"step-{i}", OK, {"prev": f"{{{{step-{i - 1}.data.n}}}}"},
             depends_on=[f"step-{i - 1}"])
        for i in range(1, 300)
    ]
    _CountingExecutor.blocking_checks = 0
    outcome = await _CountingExecutor(parse_plan(_document(tool_server, steps)), env={}).run()
    assert outcome.status == "succeeded"
    assert _CountingExecutor.blocking_checks == 0


async def test_many_ready_steps_are_not_all_watched_at_each_completion(tool_server) -> None:
    """1,000 independent steps, one at a time: waiting on every running task at each
    completion registered ~N²/2 (500,500) done callbacks; each step task now gets one."""
    _script(tool_server)
    size = 1000
    callbacks = {"registered": 0}

    class CountingTask(asyncio.Task):
        def add_done_callback(self, fn, *, context=None):
            if self.get_coro().__name__ == "_run_limited":
                callbacks["registered"] += 1
            return super().add_done_callback(fn, context=context)

    loop = asyncio.get_running_loop()
    previous = loop.get_task_factory()
    loop.set_task_factory(lambda loop, coro, **kwargs: CountingTask(coro, loop=loop, **kwargs))
    try:
        steps = [step(f"step-{i}", OK, {"i": i}) for i in range(size)]
        outcome = await PlanExecutor(parse_plan(_document(tool_server, steps)), env={}).run()
    finally:
        loop.set_task_factory(previous)
    assert outcome.status == "succeeded"
    assert callbacks["registered"] <= 2 * size


async def _peak_step_tasks(document: dict[str, Any]) -> tuple[Any, int, int, list[str]]:
    """Run `document`; its outcome, the step tasks created, the most alive at once, and the
    order the steps started in."""
    counts = {"created": 0, "alive": 0, "peak": 0}

    def ended(_task: asyncio.Task) -> None:
        counts["alive"] -= 1

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        if coro.__name__ == "_run_limited":
            counts["created"] += 1
            counts["alive"] += 1
            counts["peak"] = max(counts["peak"], counts["alive"])
            task.add_done_callback(ended)
        return task

    loop = asyncio.get_running_loop()
    previous = loop.get_task_factory()
    loop.set_task_factory(factory)
    recorder = ListRecorder()
    try:
        outcome = await PlanExecutor(parse_plan(document), recorder=recorder, env={}).run()
    finally:
        loop.set_task_factory(previous)
    started = [e.step_id for e in recorder.of_kind("step_started")]
    return outcome, counts["created"], counts["peak"], started


@pytest.mark.parametrize("concurrency", [1, 4])
async def test_ready_steps_wait_in_a_queue_not_as_tasks(tool_server, concurrency: int) -> None:
    """Every ready step was a task at once, waiting on a semaphore: 1,000 independent steps
    were 1,000 live tasks (~14 objects each that every full GC pass walked) before the first
    request. Now the live step tasks are bounded by max_concurrency whatever the plan's size,
    one task per step, and the steps still start in plan order."""
    _script(tool_server)
    for size in (50, 1000):
        steps = [step(f"step-{i}", OK, {"i": i}) for i in range(size)]
        document = plan(tool_server.base_url, {OK: capability(OK)}, steps,
                        config={"max_concurrency": concurrency})
        outcome, created, peak, started = await _peak_step_tasks(document)
        assert outcome.status == "succeeded"
        assert created == size
        # A step task ending starts the next queued one just before it is done itself, and
        # its done callback runs an iteration later: at most twice max_concurrency counted.
        assert peak <= 2 * concurrency, (size, peak)
        assert started == [f"step-{i}" for i in range(size)]


@pytest.mark.serial  # the cancelled run must end within 4 s
async def test_a_cancelled_run_skips_the_queued_steps_in_order(tool_server) -> None:
    """Queued steps not yet started when `cancel()` comes are reported skipped, in plan order,
    with the reason the semaphore's waiters gave."""
    tool_server.script(f"/capabilities/{OK}", ToolReply.ok({"n": 1}, delay_s=5.0))
    steps = [step(f"step-{i}", OK, {"i": i}) for i in range(20)]
    recorder = ListRecorder()
    executor = PlanExecutor(parse_plan(_document(tool_server, steps)), recorder=recorder, env={})
    run = asyncio.ensure_future(executor.run())
    await asyncio.to_thread(tool_server.wait_for_requests, 1)
    executor.cancel()
    outcome = await asyncio.wait_for(run, timeout=4.0)
    assert outcome.status == "cancelled"
    finished = [(e.step_id, e.skip_reason) for e in recorder.of_kind("step_finished")]
    assert finished[0] == ("step-0", None)
    assert finished[1:] == [(f"step-{i}", "run cancelled before the step started")
                            for i in range(1, 20)]
