"""docs/library.md: every Python block runs, in order, in one namespace, against loopback demos."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LIBRARY_DOC = REPO_ROOT / "docs" / "library.md"
BLOCK_RE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK_RE.finditer(text)]


def test_the_page_has_examples() -> None:
    assert len(python_blocks(LIBRARY_DOC.read_text(encoding="utf-8"))) >= 6


def test_every_python_block_of_library_md_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "library_doc"}
    try:
        for line, code in python_blocks(LIBRARY_DOC.read_text(encoding="utf-8")):
            compiled = compile("\n" * (line - 1) + code, str(LIBRARY_DOC), "exec")
            exec(compiled, namespace)
    finally:
        demo = namespace.get("demo")
        if demo is not None:
            demo.close()
    assert (tmp_path / "debug.duckdb").is_file()
