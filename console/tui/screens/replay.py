"""The replay screen: edit the tool responses of one recorded step, replay it, compare.

The twin is `truva-console replay EXECUTION STEP --response N=FILE … --param KEY=VALUE …`; each
edited response is written to FILE (under the app's replay files directory) before the replay
runs, and the replay reads them back through the same `load_edits` the CLI uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rich.console import Group
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Header, Input, RadioButton, RadioSet, Static, TextArea

from console.render.replay_text import describe_original
from console.replay.edits import (
    ReplayError,
    ResponseSpecError,
    load_edits,
    load_parameter_edits,
    parse_config_override,
)
from console.replay.engine import Replayer, ReplayResult
from console.replay.setup import LLM_MODES, LLM_RECORDED, ReplaySetup, prepare_replay
from console.tui.actions import bindings
from console.tui.messages import ExecutionRequested
from console.tui.screens.palette import PaletteCommand
from console.tui.screens.panes import PaneScreen
from console.tui.screens.store_backed import StoreBacked, StoreRequests, one_line
from console.tui.widgets.cells import inline_json, twin_command
from console.tui.widgets.footer import KeysFooter
from console.tui.widgets.replay_view import (
    DispatchTable,
    RecordedDispatch,
    comparison_renderable,
    edited_value,
    response_spec_text,
    same_response_text,
)
from store.errors import StoreError
from store.queries import ExecutionDetail, StepRecord

# Below this many rows the inputs shrink (class -short) so the comparison keeps room.
SHORT_SCREEN_ROWS = 30
# Below this many columns the side-by-side comparison leaves out the rule columns.
NARROW_COMPARISON_COLUMNS = 110
_UNSAFE_FILE_CHARACTERS = re.compile(r"[^A-Za-z0-9._-]")
# Each text field of the screen → the attribute that keeps its text.
_FIELD_TEXTS = {
    "config-overrides": "config_text", "param-edits": "params_text",
    "llm-endpoint": "endpoint_text",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class EditFile:
    """An edited response to write before the replay: dispatch number, file, JSON text."""

    number: int
    path: Path
    text: str


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    """Everything one replay run needs, checked on the UI thread before the worker starts."""

    run: int
    detail: ExecutionDetail
    step_id: str
    edit_files: tuple[EditFile, ...]
    llm_mode: str
    config_overrides: dict[str, Any]
    db_path: Path
    parameter_edits: dict[str, Any] = field(default_factory=dict)
    llm_base_url: str | None = None
    llm_model: str | None = None


def _tokens(text: str) -> list[str]:
    """`text` split as a shell would, or at white space when its quotes do not close."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def response_file_text(value: Any) -> str:
    """The content of a `--response` file for a checked edit: indented JSON and a newline."""
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def write_edit_files(edit_files: tuple[EditFile, ...]) -> dict[int, Any]:
    """Write each edited response to its file and read them back as `--response N=FILE` does."""
    for edit in edit_files:
        edit.path.parent.mkdir(parents=True, exist_ok=True)
        edit.path.write_text(edit.text, encoding="utf-8")
    return load_edits([f"{edit.number}={edit.path}" for edit in edit_files])


class ReplayScreen(StoreBacked, PaneScreen, Screen):
    """One recorded step: its dispatches, an editor for their responses, and the replay result."""

    ACTION_SCOPE = "replay"
    PANES = (("dispatches", "Dispatches"), ("llm-mode", "LLM layers"),
             ("config-overrides", "config overrides"), ("param-edits", "parameters"),
             ("llm-endpoint", "live LLM endpoint"), ("response-editor", "Response"))  # fmt: skip
    BINDINGS: ClassVar[list[BindingType]] = bindings("replay")

    WORKER_GROUP = "replay-run"

    @dataclass
    class ReplayStarted(Message):
        """The replay is running; `replayer.cancel()` stops it."""

        run: int
        replayer: Replayer

    @dataclass
    class ReplayFinished(Message):
        """The replay ran; `result` holds both runs, `recording_problem` a store write failure."""

        run: int
        result: ReplayResult
        recording_problem: str | None

    @dataclass
    class ReplayFailed(Message):
        """The replay could not start; `problem` is one line."""

        run: int
        problem: str

    def __init__(
        self,
        detail: ExecutionDetail,
        step_id: str,
        *,
        db_path: Path,
        db_arg: str | None = None,
        files_dir: Path,
    ) -> None:
        super().__init__()
        self.detail = detail
        self.execution_id = detail.execution.execution_id
        self.step_id = step_id
        self.db_path = db_path
        self.db_arg = db_arg
        self.files_dir = files_dir
        self.setup: ReplaySetup | None = None
        self.setup_problem: str | None = None
        self.recorded: tuple[RecordedDispatch, ...] = ()
        self.recorded_texts: dict[int, str] = {}
        self.edits: dict[int, str] = {}
        self.dispatch_n = 1
        self.llm_mode = LLM_RECORDED
        self.config_text = ""
        self.params_text = ""
        self.endpoint_text = ""
        self.result: ReplayResult | None = None
        self.recording_problem: str | None = None
        self.problem: str | None = None
        self.running = False
        self.replayer: Replayer | None = None
        self.requests = StoreRequests()

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="replay-summary")
        with Horizontal(id="replay-inputs"):
            with VerticalScroll(id="replay-options"):
                yield DispatchTable(id="dispatches")
                with RadioSet(id="llm-mode"):
                    for mode in LLM_MODES:
                        yield RadioButton(mode, value=mode == LLM_RECORDED, id=f"llm-{mode}")
                yield Input(placeholder="KEY=VALUE …, e.g. max_attempts=5",
                            id="config-overrides")  # fmt: skip
                with Horizontal(id="replay-edits"):
                    yield Input(placeholder="KEY=VALUE …", id="param-edits")
                    yield Input(placeholder="URL [MODEL]", id="llm-endpoint")
            yield TextArea(language="json", id="response-editor")
        yield Static(id="replay-problem")
        with VerticalScroll(id="replay-result-scroll"):
            yield Static(id="replay-result")
        yield Static(id="replay-twin")
        yield KeysFooter()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.height < SHORT_SCREEN_ROWS, "-short")
        if self.is_mounted:
            self._show_result()  # the comparison's columns follow the width

    def on_mount(self) -> None:
        self.title = "truva-console"
        self.query_one(DispatchTable).border_title = "Dispatches"
        self.query_one("#llm-mode", RadioSet).border_title = "LLM layers"
        self.query_one("#config-overrides", Input).border_title = "config overrides"
        self.query_one("#param-edits", Input).border_title = "parameters"
        self.query_one("#llm-endpoint", Input).border_title = "live LLM endpoint"
        step = self._original_step()
        if step is not None:
            self._prepare(step)
        self.query_one("#replay-summary", Static).update(self._summary_text(step))
        self._show_rows()
        self._show_dispatch(1)
        self._show_problem(self.setup_problem)
        self._show_result()
        self._update_twin()
        self.query_one(DispatchTable).focus()

    def _original_step(self) -> StepRecord | None:
        try:
            return self.detail.step(self.step_id)
        except StoreError as error:
            self.setup_problem = one_line(error)
            return None

    def _prepare(self, step: StepRecord) -> None:
        """Check the step can be replayed, and take the recorded response of each dispatch."""
        responses: tuple[Any, ...] = ()
        try:
            self.setup = prepare_replay(self.detail, self.step_id)
            responses = self.setup.recorded
        except (ReplayError, StoreError) as error:
            self.setup_problem = f"cannot replay {self.step_id}: {one_line(error)}"
        dispatched = [attempt for attempt in step.attempts if attempt.dispatched]
        self.recorded = tuple(
            RecordedDispatch(number, attempt, responses[number - 1] if responses else None)
            for number, attempt in enumerate(dispatched, start=1)
        )
        self.recorded_texts = {d.number: response_spec_text(d.response) for d in self.recorded}

    # ---------------------------------------------------------------- rendering

    def _summary_text(self, step: StepRecord | None) -> Text:
        text = Text.assemble(("Replay ", "bold"), (self.step_id, "bold"),
                             no_wrap=True, overflow="ellipsis")  # fmt: skip
        if step is not None and step.tool:
            text.append(f" ({step.tool}.{step.capability})")
        text.append(f" of execution {self.execution_id}")
        if step is not None:
            text.append("\noriginal: ", style="bold")
            text.append(describe_original(step))
            text.append("  ·  parameters ", style="bold")
            text.append(inline_json(step.parameters))
        return text

    def _row_count(self) -> int:
        return max(len(self.recorded), max(self.edits, default=0)) + 1

    def _recorded_dispatch(self, number: int) -> RecordedDispatch | None:
        return self.recorded[number - 1] if number <= len(self.recorded) else None

    def _show_rows(self) -> None:
        self.query_one(DispatchTable).show_dispatches(
            self.recorded, self._row_count(), set(self.edits)
        )

    def _show_dispatch(self, number: int) -> None:
        self._record_edit()
        self.dispatch_n = number
        editor = self.query_one("#response-editor", TextArea)
        editor.load_text(self.edits.get(number, self.recorded_texts.get(number, "")))
        self._label_editor()
        self.refresh_bindings()

    def _label_editor(self) -> None:
        editor = self.query_one("#response-editor", TextArea)
        number = self.dispatch_n
        editor.border_title = f"Response #{number}"
        if number in self.edits:
            editor.border_subtitle = "edited"
        elif number in self.recorded_texts:
            editor.border_subtitle = "recorded (unchanged)"
        else:
            editor.border_subtitle = "not recorded: type a response or the replay stops here"

    def _show_problem(self, problem: str | None) -> None:
        self.problem = problem
        line = self.query_one("#replay-problem", Static)
        line.update(Text(problem, style="bold red") if problem else "")
        line.set_class(bool(problem), "-shown")

    def _show_result(self) -> None:
        body = self.query_one("#replay-result", Static)
        if self.running:
            body.update(Text(f"Replaying {self.step_id}… (esc cancels)", style="bold cyan"))
        elif self.result is None:
            body.update(Text(
                "Not replayed yet.\n\nPick a dispatch, edit the response the tool gives it: JSON "
                '{"status": 422, "headers": {…}, "body": …}, or the word drop (a transport '
                "failure). Unedited dispatches get the recorded response; an empty editor "
                "keeps it. Choose how LLM layers are answered and any config overrides, then "
                "ctrl+r replays the step locally and compares its decisions with the original.",
                style="dim",
            ))  # fmt: skip
        else:
            result = self.result
            stored = Text.assemble(
                ("replay execution ", "bold"), (result.execution_id, "bold cyan"),
                " recorded in the store  ·  ctrl+o opens it",
            )  # fmt: skip
            if self.recording_problem:
                stored = Text(
                    f"replay execution {result.execution_id} was not recorded: "
                    f"{self.recording_problem}",
                    style="bold red",
                )
            with_rules = self.size.width >= NARROW_COMPARISON_COLUMNS
            body.update(Group(comparison_renderable(result, with_rules=with_rules), stored))

    @property
    def twin_command(self) -> str:
        """The `truva-console replay` command that runs this replay."""
        args = ["replay", self.execution_id, self.step_id]
        for number in sorted(self.edits):
            args += ["--response", f"{number}={self.edit_path(number)}"]
        if self.llm_mode != LLM_RECORDED:
            args += ["--llm", self.llm_mode]
        for override in self._override_tokens():
            args += ["--config", override]
        for param in _tokens(self.params_text):
            args += ["--param", param]
        for token in _tokens(self.endpoint_text):
            args += ["--llm-base-url" if "://" in token else "--llm-model", token]
        return twin_command(self.db_arg, *args)

    def edit_path(self, number: int) -> Path:
        """The file the edited response of dispatch `number` is written to."""
        name = f"{self.execution_id}-{self.step_id}-dispatch-{number}.json"
        return self.files_dir / _UNSAFE_FILE_CHARACTERS.sub("_", name)

    def _override_tokens(self) -> list[str]:
        return _tokens(self.config_text)

    def _endpoint(self) -> tuple[str | None, str | None]:
        """(base URL, model) from the live endpoint field: a token with `://` is the URL."""
        urls = [token for token in _tokens(self.endpoint_text) if "://" in token]
        models = [token for token in _tokens(self.endpoint_text) if "://" not in token]
        if len(urls) > 1 or len(models) > 1:
            raise ReplayError(f"live LLM endpoint {self.endpoint_text.strip()!r}: expected a URL "
                              "and optionally a model name, e.g. http://127.0.0.1:8000/v1 qwen")
        return (urls[0] if urls else None), (models[0] if models else None)  # fmt: skip

    def _update_twin(self) -> None:
        self.sub_title = f"CLI: {self.twin_command}"
        twin = Text.assemble(("CLI ", "bold"), self.twin_command)
        self.query_one("#replay-twin", Static).update(twin)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer run only when the step can be replayed, open only once there is a replay."""
        if action == "run_replay":
            return None if self.running else self.setup is not None
        if action == "open_replay":
            return self.result is not None and self.recording_problem is None
        if action == "restore_response":
            return self.dispatch_n in self.edits and self.dispatch_n in self.recorded_texts
        return True

    # ------------------------------------------------------------------ events

    @on(DispatchTable.DispatchHighlighted)
    def _dispatch_highlighted(self, message: DispatchTable.DispatchHighlighted) -> None:
        if message.number != self.dispatch_n:
            self._show_dispatch(message.number)

    @on(DispatchTable.DispatchChosen)
    def _dispatch_chosen(self, message: DispatchTable.DispatchChosen) -> None:
        if message.number != self.dispatch_n:
            self._show_dispatch(message.number)
        self.query_one("#response-editor", TextArea).focus()

    @on(TextArea.Changed, "#response-editor")
    def _response_edited(self) -> None:
        self._record_edit()

    def _record_edit(self) -> None:
        """Keep the editor text as the edit of the dispatch it shows, unless it says the same."""
        number, text = self.dispatch_n, self.query_one("#response-editor", TextArea).text
        recorded_text = self.recorded_texts.get(number, "")
        was_edited, rows_before = number in self.edits, self._row_count()
        if not text.strip() or same_response_text(text, recorded_text):
            self.edits.pop(number, None)
        else:
            self.edits[number] = text
        if (number in self.edits) != was_edited:
            if self._row_count() != rows_before:
                self._show_rows()
            else:
                self.query_one(DispatchTable).mark_edited(
                    number, self._recorded_dispatch(number), number in self.edits
                )
            self._label_editor()
            self._update_twin()
            self.refresh_bindings()

    @on(RadioSet.Changed, "#llm-mode")
    def _llm_mode_chosen(self, event: RadioSet.Changed) -> None:
        self.llm_mode = str(event.pressed.label)
        self._update_twin()

    @on(Input.Changed, "#config-overrides, #param-edits, #llm-endpoint")
    def _field_edited(self, event: Input.Changed) -> None:
        setattr(self, _FIELD_TEXTS[event.input.id or ""], event.value)
        self._update_twin()

    @on(Input.Submitted, "#config-overrides, #param-edits, #llm-endpoint")
    def _overrides_submitted(self, event: Input.Submitted) -> None:
        self.action_run_replay()

    # ------------------------------------------------------------------ running

    def replay_request(self) -> ReplayRequest:
        """The checked request for the current edits; ResponseSpecError or ReplayError if not."""
        edit_files = []
        for number in sorted(self.edits):
            value = edited_value(self.edits[number], f"dispatch {number}")
            edit_files.append(EditFile(number, self.edit_path(number), response_file_text(value)))
        overrides = dict(parse_config_override(token) for token in self._override_tokens())
        parameter_edits = load_parameter_edits(_tokens(self.params_text))
        llm_base_url, llm_model = self._endpoint()
        return ReplayRequest(
            run=self.requests.start(),
            detail=self.detail,
            step_id=self.step_id,
            edit_files=tuple(edit_files),
            llm_mode=self.llm_mode,
            config_overrides=overrides,
            db_path=self.db_path,
            parameter_edits=parameter_edits,
            llm_base_url=llm_base_url,
            llm_model=llm_model,
        )

    def action_run_replay(self) -> None:
        """Check the edits and overrides, then replay the step in a worker."""
        if self.running or self.setup is None:
            self._show_problem(self.setup_problem or self.problem)
            return
        self._record_edit()
        try:
            request = self.replay_request()
        except (ResponseSpecError, ReplayError) as error:
            self._show_problem(one_line(error))
            return
        self.running = True
        self._show_problem(None)
        self._show_result()
        self.refresh_bindings()
        self._replay(request)

    @work(exclusive=True, exit_on_error=False, group="replay-run")
    async def _replay(self, request: ReplayRequest) -> None:
        from console.session import recording
        from executor.telemetry import TelemetryConfigError

        closing = contextlib.ExitStack()  # recording() is entered and left off the UI thread
        try:
            edits = await asyncio.to_thread(write_edit_files, request.edit_files)
            setup = prepare_replay(
                request.detail, request.step_id, edits=edits, llm_mode=request.llm_mode,
                config_overrides=request.config_overrides,
                parameter_edits=request.parameter_edits, llm_base_url=request.llm_base_url,
                llm_model=request.llm_model,
            )  # fmt: skip
            session = await asyncio.to_thread(closing.enter_context, recording(request.db_path))
        except (ResponseSpecError, ReplayError, StoreError, TelemetryConfigError, OSError) as error:
            self.post_message(self.ReplayFailed(request.run, one_line(error)))
            return
        replayer = Replayer(setup, recorder=session.recorder)
        self.post_message(self.ReplayStarted(request.run, replayer))
        try:
            result = await replayer.run()
        finally:
            await asyncio.to_thread(closing.close)
        self.post_message(self.ReplayFinished(request.run, result, session.store.last_error))

    @on(ReplayStarted)
    def _replay_started(self, message: ReplayStarted) -> None:
        if message.run == self.requests.current and self.running:
            self.replayer = message.replayer

    @on(ReplayFinished)
    def _replay_finished(self, message: ReplayFinished) -> None:
        if not self.requests.answered(message.run):
            return
        self.running, self.replayer = False, None
        self.result, self.recording_problem = message.result, message.recording_problem
        self._show_problem(None)
        self._show_result()
        self.refresh_bindings()

    @on(ReplayFailed)
    def _replay_failed(self, message: ReplayFailed) -> None:
        if not self.requests.answered(message.run):
            return
        self.running, self.replayer = False, None
        self._show_problem(message.problem)
        self._show_result()
        self.refresh_bindings()

    def store_work_crashed(self, problem: str) -> None:
        """The replay worker raised: say so under the inputs."""
        self.running, self.replayer = False, None
        self._show_problem(problem)
        self._show_result()
        self.refresh_bindings()

    # ------------------------------------------------------------------ actions

    def select_dispatch(self, number: int) -> None:
        """Show dispatch `number` in the editor and put the cursor on it."""
        self.query_one(DispatchTable).move_to_key(str(number))
        self._show_dispatch(number)

    def edit_response(self, number: int, text: str) -> None:
        """Replace the editor text of dispatch `number` with `text`."""
        self.select_dispatch(number)
        self.query_one("#response-editor", TextArea).load_text(text)

    def set_llm_mode(self, mode: str) -> None:
        """Choose how LLM layers are answered: recorded, live or off."""
        self.query_one(f"#llm-{mode}", RadioButton).value = True

    def cancel_running(self) -> bool:
        """While a replay runs, back cancels it instead (it then reports)."""
        if self.running and self.replayer is not None:
            self.replayer.cancel()
        return self.running

    def action_restore_response(self) -> None:
        """Put the recorded response of the current dispatch back."""
        if self.dispatch_n in self.recorded_texts:
            text = self.recorded_texts[self.dispatch_n]
            self.query_one("#response-editor", TextArea).load_text(text)

    def action_open_replay(self) -> None:
        """Open the replay execution in the execution screen."""
        if self.result is not None:
            self.post_message(ExecutionRequested(self.result.execution_id))

    def action_copy_twin(self) -> None:
        """Copy the equivalent CLI command to the clipboard."""
        self.app.copy_to_clipboard(self.twin_command)
        self.notify(self.twin_command, title="Copied the CLI command", markup=False)

    def action_twin(self, action_id: str) -> str | None:
        """The `replay` command for `copy-cli` and `run-replay`."""
        return self.twin_command if action_id in ("copy-cli", "run-replay") else None

    def palette_commands(self) -> list[PaletteCommand]:
        """Commands of this screen for the command palette: the registry's, then the inputs."""
        editor = self.query_one("#response-editor", TextArea)
        commands = [
            *self.registry_commands(),
            PaletteCommand("replay: Edit response", f"Edit the response to dispatch "
                           f"{self.dispatch_n}", editor.focus),
            PaletteCommand("replay: Edit config overrides", "KEY=VALUE, e.g. max_attempts=5",
                           self.query_one("#config-overrides", Input).focus),
            PaletteCommand("replay: Edit parameters", "KEY=VALUE, e.g. city_code=PAR",
                           self.query_one("#param-edits", Input).focus),
            PaletteCommand("replay: Edit live LLM endpoint", "URL [MODEL], with LLM live",
                           self.query_one("#llm-endpoint", Input).focus),
            *(
                PaletteCommand(f"replay: LLM {mode}", f"--llm {mode}",
                               lambda mode=mode: self.set_llm_mode(mode))
                for mode in LLM_MODES
            ),
            *(
                PaletteCommand(f"replay: Edit dispatch {number}", "Show its response",
                               lambda number=number: self.select_dispatch(number))
                for number in range(1, self._row_count() + 1)
            ),
        ]  # fmt: skip
        if self.result is not None:
            commands.append(
                PaletteCommand(
                    f"replay: Open {self.result.execution_id}",
                    "The replay execution",
                    self.action_open_replay,
                )
            )
        return commands
