"""Shared fixtures: loopback tool and LLM servers, a store path, and a CLI runner."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.llm_server import ScriptedLLMServer
from tests.support.tool_server import ScriptedToolServer


@pytest.fixture
def tool_server() -> Iterator[ScriptedToolServer]:
    """A scripted tool server on 127.0.0.1."""
    with ScriptedToolServer() as server:
        yield server


@pytest.fixture
def llm_server() -> Iterator[ScriptedLLMServer]:
    """A scripted OpenAI-compatible server on 127.0.0.1, reached through the real openai client."""
    with ScriptedLLMServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """No test reads the developer's TruvaG3/OpenAI settings or writes to ./.truva."""
    import os

    for name in list(os.environ):
        if name.startswith(("TRUVAG3_", "OPENAI_", "TRUVA_", "OTEL_")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRUVA_DB", str(tmp_path / "store" / "debug.duckdb"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user keymap
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # no user SQL history


@pytest.fixture(autouse=True, scope="session")
def _highlight_queries_compiled_once() -> Iterator[None]:
    """Textual compiles a TextArea's tree-sitter highlight query for every widget (~70 ms under
    load, a few per screen); a compiled `Query` is immutable (tree-sitter >= 0.25 runs it through
    a `QueryCursor`), so the suite compiles each (language, query) once and shares it."""
    from textual.document._syntax_aware_document import SyntaxAwareDocument

    compiled: dict[tuple[object, str], object] = {}
    original = SyntaxAwareDocument.prepare_query

    def prepare_query(self: SyntaxAwareDocument, query: str) -> object:
        key = (self.language, query)
        if key not in compiled:
            compiled[key] = original(self, query)
        return compiled[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SyntaxAwareDocument, "prepare_query", prepare_query)
        yield
