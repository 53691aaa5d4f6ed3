"""What the README says about `make test`, `make lint` and `make screenshot` is true."""

from __future__ import annotations

import html
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def svg_text(svg: str) -> str:
    """The characters an SVG exported by Textual shows, without markup."""
    return html.unescape(" ".join(re.findall(r"<text [^>]*>(.*?)</text>", svg))).replace(
        "\xa0", " "
    )


def test_screenshot_script_draws_the_failing_step_and_its_decision(tmp_path: Path) -> None:
    out = tmp_path / "shot.svg"
    child = subprocess.run([sys.executable, str(REPO / "docs" / "screenshots" / "redraw.py"),
                            str(out)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert child.returncode == 0, child.stderr
    shown = svg_text(out.read_text(encoding="utf-8"))
    for expected in ("stop_budget", "by rule budget.attempts",
                     "HTTP 503 is transient but all 3 attempts are used",
                     "Why not: earlier rules that did not match"):  # fmt: skip
        assert expected in shown


def test_readme_shows_the_committed_screenshot() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "](docs/screenshots/execution-failing-step.svg)" in readme
    assert (REPO / "docs" / "screenshots" / "execution-failing-step.svg").is_file()


def _make_rule(target: str) -> tuple[list[str], list[str]]:
    """The prerequisites and recipe lines of `target` in the Makefile."""
    lines = (REPO / "Makefile").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    recipe = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return lines[start].split(":", 1)[1].split(), recipe


def test_make_test_runs_lint_first_as_the_readme_says() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "runs make lint, then the whole test suite" in readme
    prerequisites, recipe = _make_rule("test")
    assert "lint" in prerequisites
    # The whole suite (no paths: testpaths) in two phases whose -m expressions are complements,
    # so each test runs in exactly one: the unmarked on two workers, then the `serial` alone.
    assert [shlex.split(line) for line in recipe] == [
        ["$(BIN)/python", "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile",
         "-m", "not serial"],
        ["$(BIN)/python", "-m", "pytest", "-q", "-m", "serial"],
    ]  # fmt: skip
    assert "then pytest\n  in two phases: the tests not marked `serial` on two workers" in readme
    _, lint = _make_rule("lint")
    assert lint == ["$(BIN)/ruff check .", "$(BIN)/lint-imports --no-cache"]
    assert "`make lint` runs ruff and `lint-imports`" in readme


def test_readme_python_example_calls_a_tool_that_demo_serve_provides() -> None:
    """The README's API example names `demo serve`'s weather URL and a capability it has."""
    from console.demo.ports import DEFAULT_BASE_PORT, TOOL_NAMES
    from console.demo.tools import build_tools

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    (name, url), = re.findall(r'Tool\("(\w+)", "([^"]+)"\)', block)
    port = DEFAULT_BASE_PORT + TOOL_NAMES.index(name)
    assert url == f"http://127.0.0.1:{port}"
    used = set(re.findall(r'capability\("(\w+)"\)', block))
    used |= set(re.findall(rf'call_tool\({name}, "(\w+)"', block))
    assert used and used <= set(build_tools()[name].capabilities)
