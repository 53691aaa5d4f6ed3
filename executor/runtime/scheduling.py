"""Which steps run when: the dependency graph and the scheduling part of `PlanExecutor`."""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from executor.events import (
    Notice,
    StepFinished,
    StepStarted,
)
from executor.params import (
    binding_references,
    resolve_bindings,
)
from executor.plan import Plan, StepSpec
from executor.runtime.outcomes import STEP_FAILED, STEP_SKIPPED, STEP_SUCCEEDED, StepOutcome


@dataclass(frozen=True, slots=True)
class _ScheduleGraph:
    """What the scheduler reads of a plan, computed once per run.

    `position`: step id → index in plan order; `unmet`: step id → number of distinct
    dependencies (`Plan.dependencies_of`); `blocked_by`: step id → the steps whose skip reason
    names it (its `depends_on`, or a binding with exactly its id), in plan order.
    """

    position: dict[str, int]
    unmet: dict[str, int]
    blocked_by: dict[str, tuple[str, ...]]

    @classmethod
    def of(cls, plan: Plan) -> _ScheduleGraph:
        position = {step.id: index for index, step in enumerate(plan.steps)}
        blocked_by: dict[str, list[str]] = {}
        for step in plan.steps:
            named = dict.fromkeys((*step.depends_on, *binding_references(step.parameters)))
            for name in named:
                if name in position:
                    blocked_by.setdefault(name, []).append(step.id)
        return cls(
            position=position,
            unmet={step.id: len(plan.dependencies_of(step.id)) for step in plan.steps},
            blocked_by={name: tuple(ids) for name, ids in blocked_by.items()},
        )


class _Slots:
    """At most `limit` step tasks at once; the steps beyond wait in a queue, not as tasks.

    Steps start in the order `put` is called, as a FIFO `asyncio.Semaphore` acquired by one task
    per ready step would let them, but a queued step holds no task, coroutine or future until
    a slot is free: 10,000 ready steps were 10,000 waiting tasks (~14 objects each that every
    full collection walked). `release()` (a step task ending) starts the next queued step at
    once, where the semaphore's release woke the next waiter. `running`: task → step id.
    """

    __slots__ = ("_on_done", "_run", "free", "queued", "running")

    def __init__(
        self,
        limit: int,
        run: Callable[[StepSpec, _Slots], Coroutine[Any, Any, StepOutcome]],
        on_done: Callable[[asyncio.Task[StepOutcome]], object],
    ) -> None:
        self.free = limit
        self.queued: deque[StepSpec] = deque()
        self.running: dict[asyncio.Task[StepOutcome], str] = {}
        self._run = run
        self._on_done = on_done

    def put(self, step: StepSpec) -> None:
        if self.free > 0:
            self.free -= 1
            self._start(step)
        else:
            self.queued.append(step)

    def release(self) -> None:
        if self.queued:
            self._start(self.queued.popleft())
        else:
            self.free += 1

    def _start(self, step: StepSpec) -> None:
        task = asyncio.create_task(self._run(step, self))
        task.add_done_callback(self._on_done)
        self.running[task] = step.id


class StepScheduling:
    """Part of `PlanExecutor`: which steps run when (dependency counts, skips, re-run seeds)."""

    def _seed_results(self) -> None:
        """Record the reused and the held steps before any step is scheduled."""
        for step in self.plan.steps:
            if step.id in self.reuse_results:
                self._reuse(step, self.reuse_results[step.id])
            elif step.id in self.skip_steps:
                self._store_skip(step, self.skip_steps[step.id])

    def _reuse(self, step: StepSpec, result: Any) -> None:
        now = self.clock()
        reason = f"result reused from execution {self.rerun_of}; not resent"
        self._emit(StepStarted(
            execution_id=self.execution_id, step_id=step.id, started_at=now, tool=step.tool,
            capability=step.capability, url=self.plan.url_for(step),
            depends_on=tuple(self.plan.dependencies_of(step.id)),
            parameters=dict(resolve_bindings(step.parameters, self.reuse_results) or {}),
            protected_keys={},
            orchestrator=self.plan.capability_for(step).orchestrator,
            side_effects=self.plan.capability_for(step).side_effects,
        ))
        self._emit(Notice(execution_id=self.execution_id, step_id=step.id, n=None, at=now,
                          name="rerun.result_reused", message=reason,
                          attrs={"reused_from": self.rerun_of}))
        self._emit(StepFinished(
            execution_id=self.execution_id, step_id=step.id, finished_at=now,
            status=STEP_SUCCEEDED, dispatch_count=0, attempts=0, validation_retries=0,
            semantic_retries=0, final_action=None, final_rule_id=None, error=None,
            result=result,
        ))
        self._parsed_results[step.id] = result
        self._results[step.id] = StepOutcome(
            id=step.id, status=STEP_SUCCEEDED, dispatch_count=0, validation_retries=0,
            semantic_retries=0, attempts=(), tool=step.tool, capability=step.capability,
            parameters=None, result=result, skip_reason=None,
            max_attempts=self.config.max_attempts, start_time=now, end_time=now,
            reused_from=self.rerun_of,
        )

    async def _schedule(self) -> None:
        """Start each step once its dependencies succeeded; skip the ones they block.

        Linear in the plan: a count of unmet dependencies per step makes the ready steps, and
        only the steps naming one that just ended unsucceeded are checked for a skip reason.
        Steps with a result already (a rerun's reused and held steps) count as ended.
        """
        plan = self.plan
        pending: dict[str, StepSpec] = {
            step.id: step for step in plan.steps if step.id not in self._results
        }
        graph = _ScheduleGraph.of(plan)
        unmet = dict(graph.unmet)
        ended_unsucceeded: list[str] = []
        for step in plan.steps:
            seeded = self._results.get(step.id)
            if seeded is not None and seeded.status == STEP_SUCCEEDED:
                self._ready(step.id, unmet)
            elif seeded is not None:
                ended_unsucceeded.append(step.id)
        ready = [step_id for step_id in pending if unmet[step_id] == 0]
        # Tasks put themselves here when done: waiting on all running tasks at each completion
        # (asyncio.wait) costs O(running), which made 10,000 ready steps quadratic.
        finished: asyncio.Queue[asyncio.Task[StepOutcome]] = asyncio.Queue()
        slots = _Slots(self.config.max_concurrency, self._run_limited, finished.put_nowait)
        running = slots.running
        while pending or running:
            self._skip_blocked(pending, graph, ended_unsucceeded)
            ended_unsucceeded = []
            for step_id in sorted(ready, key=graph.position.__getitem__):
                step = pending.pop(step_id, None)
                if step is not None:
                    slots.put(step)
            ready = []
            if not running:
                if pending:
                    for step_id in list(pending):
                        self._store_skip(pending.pop(step_id), "no executable steps found")
                break
            done = [await finished.get()]
            while not finished.empty():
                done.append(finished.get_nowait())
            for task in done:
                step_id = running.pop(task)
                outcome = task.result()
                self._results[step_id] = outcome
                if outcome.status == STEP_SUCCEEDED:
                    ready.extend(self._ready(step_id, unmet))
                else:
                    ended_unsucceeded.append(step_id)

    async def _run_limited(self, step: StepSpec, slots: _Slots) -> StepOutcome:
        """Run a started step; its slot goes to the next queued step as it ends (not when the
        run is torn down by a cancellation from outside)."""
        if self.cancelled:
            outcome = self._skip_outcome(step, "run cancelled before the step started")
        elif self._task_stop is not None:
            outcome = self._skip_outcome(step, f"task stopped: {self._task_stop}")
        else:
            try:
                outcome = await self._run_step(step)
            except Exception as exc:  # a bug in one step must not lose its siblings' results
                outcome = self._panic_outcome(step, exc)
        slots.release()
        return outcome

    def _panic_outcome(self, step: StepSpec, exc: Exception) -> StepOutcome:
        cause: BaseException = exc
        while isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            cause = cause.exceptions[0]  # name what failed, not "unhandled errors in a TaskGroup"
        error = f"step {step.id} execution panic: {type(cause).__name__}: {cause}"
        self._emit(StepFinished(
            execution_id=self.execution_id, step_id=step.id, finished_at=self.clock(),
            status=STEP_FAILED, dispatch_count=0, attempts=0, validation_retries=0,
            semantic_retries=0, final_action=None, final_rule_id=None, error=error, result=None,
        ))
        return StepOutcome(id=step.id, status=STEP_FAILED, dispatch_count=0,
                           validation_retries=0, semantic_retries=0, attempts=(),
                           tool=step.tool, capability=step.capability, error=error)

    def _ready(self, succeeded_id: str, unmet: dict[str, int]) -> list[str]:
        """The steps that `succeeded_id` succeeding leaves with every dependency succeeded."""
        ready = []
        for dependent in self.plan.dependents_of(succeeded_id):
            unmet[dependent] -= 1
            if unmet[dependent] == 0:
                ready.append(dependent)
        return ready

    def _skip_blocked(
        self, pending: dict[str, StepSpec], graph: _ScheduleGraph, ended_unsucceeded: list[str]
    ) -> None:
        """Skip every pending step that now has a blocking reason, cascading through skips.

        Gives the skips, in the order and with the reasons, of checking every pending step in
        plan order and repeating until a pass skips nothing; but only steps naming a step that
        ended unsucceeded (since the last call, or by a skip here) are checked.
        """
        if self.cancelled or self._task_stop is not None:
            for step_id in list(pending):
                reason = self._blocking_reason(pending[step_id])
                if reason is not None:
                    self._store_skip(pending.pop(step_id), reason)
            return
        this_pass = [graph.position[d] for ended in ended_unsucceeded
                     for d in graph.blocked_by.get(ended, ()) if d in pending]
        heapq.heapify(this_pass)
        next_pass: set[int] = set()
        while this_pass or next_pass:
            if not this_pass:
                this_pass = sorted(next_pass)
                next_pass = set()
            position = heapq.heappop(this_pass)
            while this_pass and this_pass[0] == position:
                heapq.heappop(this_pass)
            step = self.plan.steps[position]
            if step.id not in pending:
                continue
            reason = self._blocking_reason(step)
            if reason is None:
                continue
            self._store_skip(pending.pop(step.id), reason)
            for dependent in graph.blocked_by.get(step.id, ()):
                if dependent in pending:
                    later = graph.position[dependent]
                    if later > position:
                        heapq.heappush(this_pass, later)
                    else:
                        next_pass.add(later)

    def _blocking_reason(self, step: StepSpec) -> str | None:
        if self.cancelled:
            return "run cancelled before the step started"
        if self._task_stop is not None:
            return f"task stopped: {self._task_stop}"
        held = sorted(d for d in self.plan.dependencies_of(step.id) if d in self.skip_steps)
        if held:
            return f"skipped due to held dependency: {held[0]} ({self.skip_steps[held[0]]})"
        explicit = sorted(
            d for d in step.depends_on
            if d in self._results and self._results[d].status != STEP_SUCCEEDED
        )
        if len(explicit) == 1:
            return f"skipped due to failed dependency: {explicit[0]}"
        if explicit:
            return f"skipped due to failed dependencies: {', '.join(explicit)}"
        templated = sorted(
            d for d in binding_references(step.parameters)
            if d in self._results and self._results[d].status != STEP_SUCCEEDED
        )
        if templated:
            first, rest = templated[0], templated[1:]
            extra = f"; additional failed upstreams: {', '.join(rest)}" if rest else ""
            return (
                f"skipped due to failed template dependency: {first} "
                f"(parameter references {{{{{first}...}}}} but that step failed{extra})"
            )
        return None

    def _store_skip(self, step: StepSpec, reason: str) -> None:
        self._results[step.id] = self._skip_outcome(step, reason)

    def _skip_outcome(self, step: StepSpec, reason: str) -> StepOutcome:
        outcome = StepOutcome(
            id=step.id, status=STEP_SKIPPED, dispatch_count=0, validation_retries=0,
            semantic_retries=0, attempts=(), tool=step.tool, capability=step.capability,
            error=reason, skip_reason=reason, max_attempts=self.config.max_attempts,
        )
        self._emit(StepFinished(
            execution_id=self.execution_id, step_id=step.id, finished_at=self.clock(),
            status=STEP_SKIPPED, dispatch_count=0, attempts=0, validation_retries=0,
            semantic_retries=0, final_action=None, final_rule_id=None, error=reason,
            result=None, skip_reason=reason,
        ))
        return outcome
