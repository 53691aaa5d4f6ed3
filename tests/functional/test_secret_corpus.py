"""Secrets in innocently named places: none survives a redacted bundle, and outgoing auth header
values reach neither the store nor its spool.

One real run on loopback puts every credential form of `tests.support.secrets` in each place
with its own value (a custom request header, parameters named `note` and `aws`, an error
message, a response header and body, an LLM answer, the plan `query`), the real CLI exports
it, and every byte of the bundle is searched, base64 BLOB columns decoded.
"""

from __future__ import annotations

import base64
import contextlib
import json
import zipfile
from pathlib import Path
from typing import Any

import duckdb
import pytest

from executor.events import ListRecorder
from executor.plan import parse_plan
from executor.runtime import PlanExecutor
from tests.support.plans import run_cli, write_plan
from tests.support.secrets import random_chars, secret_forms
from tests.support.tool_server import ToolReply

PLACES = (
    "request_header",
    "parameter_note",
    "parameter_aws",
    "error_message",
    "response_header",
    "response_body",
    "llm_answer",
    "plan_query",
)
HEADER_PLACES = {"request_header", "response_header"}


def _corpus() -> dict[tuple[str, str], tuple[str, str]]:
    """(form, place) → (text, secret), a fresh value for every pair; a header holds one line."""
    corpus = {}
    for place in PLACES:
        for form, (text, secret) in secret_forms().items():
            if place in HEADER_PLACES and "\n" in text:
                continue
            corpus[(form, place)] = (text, secret)
    return corpus


def _analysis(reason: str) -> str:
    return json.dumps({"should_retry": True, "reason": reason, "is_transient_error": False,
                       "suggested_changes": {"city": "PAR"}})  # fmt: skip


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return [value] if isinstance(value, str) else []


def _bundle_text(path: Path) -> str:
    """Every member's bytes as text, plus every string of the JSON lines base64-decoded."""
    parts: list[str] = []
    with zipfile.ZipFile(path) as bundle:
        for name in bundle.namelist():
            data = bundle.read(name)
            parts.append(data.decode("utf-8", "replace"))
            if not name.endswith(".jsonl"):
                continue
            for line in data.splitlines():
                for text in _strings(json.loads(line)):
                    parts.append(text)
                    with contextlib.suppress(ValueError):  # not base64, or not text
                        parts.append(base64.b64decode(text, validate=True).decode("utf-8"))
    return "\n".join(parts)


def test_no_secret_form_in_any_place_survives_a_redacted_bundle(
    tmp_path: Path, tool_server, llm_server
) -> None:
    corpus = _corpus()
    forms = sorted({form for form, _ in corpus})
    tools, capabilities, steps = {}, {}, []
    for index, form in enumerate(forms):
        def text(place: str, form: str = form) -> str:
            return corpus.get((form, place), ("", ""))[0]

        name = f"cap{index:02d}x"
        tools[f"tool{index:02d}"] = {
            "base_url": tool_server.base_url,
            "headers": {"X-Note": text("request_header")} if text("request_header") else {},
        }
        capabilities[f"tool{index:02d}.{name}"] = {
            "path": f"/capabilities/{name}", "description": f"the {name} capability"}
        steps.append({"id": f"step-{index:02d}", "tool": f"tool{index:02d}", "capability": name,
                      "parameters": {"city": "PARIS", "note": text("parameter_note"),
                                     "aws": text("parameter_aws")}})  # fmt: skip
        response_header = {"X-Debug": text("response_header")} if text("response_header") else {}
        tool_server.script(
            f"/capabilities/{name}",
            ToolReply.error(400, "BAD_CITY", f"unknown city; debug {text('error_message')}",
                            "INPUT_ERROR", headers=response_header),
            ToolReply.ok({"echo": text("response_body")}, headers=response_header),
        )  # fmt: skip
        llm_server.script_for(name,
                              _analysis(f"city code wrong {text('llm_answer')}"))  # fmt: skip
    query = "book it " + " ".join(text for (_, place), (text, _) in corpus.items()
                                  if place == "plan_query")  # fmt: skip
    document = {
        "query": query, "tools": tools, "capabilities": capabilities, "steps": steps,
        "config": {"initial_delay_ms": 1, "max_delay_ms": 5, "semantic_retry_enabled": False},
        "llm": {"base_url": llm_server.base_url, "model": "scripted-model"},
    }  # fmt: skip
    db = tmp_path / "store.duckdb"
    result = run_cli("run", str(write_plan(tmp_path, document)), "--json", "--db", str(db))
    assert result.code == 0, result.stderr
    outcome = result.json()
    assert {step["status"] for step in outcome["steps"]} == {"succeeded"}, result.stdout[:3000]
    bundle = tmp_path / "bundle.zip"
    exported = run_cli("export", "--all", "--db", str(db), "-o", str(bundle))
    assert exported.code == 0, exported.stderr

    text = _bundle_text(bundle)
    survivors = sorted(pair for pair, (_, secret) in corpus.items() if secret in text)
    assert len(corpus) >= 150
    assert survivors == [], survivors
    assert "[REDACTED]" in text and "PARIS" in text  # redacted, not emptied

    # At rest, headers are redacted by value too; bodies stay byte-exact.
    with duckdb.connect(str(db), read_only=True) as conn:
        stored_headers = " ".join(
            str(row) for row in conn.execute(
                "SELECT request_headers, response_headers FROM attempts").fetchall()
        )  # fmt: skip
        stored_bodies = b"".join(
            row[0] for row in conn.execute("SELECT request_body FROM attempts").fetchall()
        )
    for (_, place), (_, secret) in corpus.items():
        if place in HEADER_PLACES:
            assert secret not in stored_headers, place
    _, note_secret = corpus[("openai_sk", "parameter_note")]
    assert note_secret.encode() in stored_bodies


def _auth_plan(tool_server, llm_server, secrets: dict[str, str]) -> dict[str, Any]:
    userinfo_url = tool_server.base_url.replace("http://", f"http://robot:{secrets['url']}@")
    return {
        "query": "fetch the report",
        "tools": {
            "headers": {"base_url": tool_server.base_url, "headers": {
                "Authorization": f"Bearer {secrets['bearer']}",
                "X-Api-Key": secrets["api_key"],
                "Proxy-Authorization": f"Basic {secrets['basic']}",
                "X-Auth": secrets["custom"],
                "X-Auth-Key": secrets["custom_key"],
            }},
            "env": {"base_url": tool_server.base_url},
            "userinfo": {"base_url": userinfo_url},
        },
        "capabilities": {f"{tool}.report": {"path": "/capabilities/report",
                                            "description": "the report"}
                         for tool in ("headers", "env", "userinfo")},
        "steps": [{"id": f"step-{tool}", "tool": tool, "capability": "report",
                   "parameters": {"q": 1}} for tool in ("headers", "env", "userinfo")],
        "config": {"initial_delay_ms": 1, "max_delay_ms": 5},
        "llm": {"base_url": llm_server.base_url, "model": "m", "api_key": secrets["llm"]},
    }  # fmt: skip


_AUTH_SECRET_NAMES = ("bearer", "api_key", "basic", "custom", "custom_key", "env", "url", "llm")


def _auth_secrets(kind: str = "random") -> dict[str, str]:
    """Random values (which the value detector would catch anyway), or ordinary words that only
    the header's name tells apart (found by an outside check: `X-Auth: hunter2` and
    `X-Auth-Key: cf-hunter3` were stored and exported as they were)."""
    if kind == "ordinary":
        return {name: f"hunter2-{name.replace('_', '-')}" for name in _AUTH_SECRET_NAMES}
    return {name: random_chars(32) for name in _AUTH_SECRET_NAMES}


@pytest.mark.parametrize("kind", ["random", "ordinary"])
def test_outgoing_auth_header_values_are_in_no_file_of_the_store(
    tmp_path: Path, tool_server, llm_server, monkeypatch, kind: str
) -> None:
    secrets = _auth_secrets(kind)
    tool_server.script("/capabilities/report", ToolReply.ok({"rows": 3}))
    monkeypatch.setenv("TRUVAG3_OAUTH_TOKEN", secrets["env"])
    db = tmp_path / "store" / "debug.duckdb"
    document = _auth_plan(tool_server, llm_server, secrets)

    result = run_cli("run", str(write_plan(tmp_path, document)), "--json", "--db", str(db))

    assert result.code == 0, result.stderr
    sent = " ".join(str(request.headers) for request in tool_server.received())
    assert secrets["api_key"] in sent and secrets["env"] in sent  # they did go on the wire
    files = [path for path in db.parent.rglob("*") if path.is_file()]
    assert db in files
    for path in files:
        content = path.read_bytes()
        for name, secret in secrets.items():
            assert secret.encode() not in content, (path.name, name)


async def test_outgoing_auth_header_values_never_reach_a_spool_segment(
    tmp_path: Path, tool_server, llm_server
) -> None:
    from store.ingest import encode_events
    from store.spool import WriterIdentity

    secrets = _auth_secrets()
    tool_server.script("/capabilities/report", ToolReply.ok({"rows": 3}))
    recorder = ListRecorder()
    document = _auth_plan(tool_server, llm_server, secrets)
    await PlanExecutor(parse_plan(document), recorder=recorder,
                       env={"TRUVAG3_OAUTH_TOKEN": secrets["env"]}).run()  # fmt: skip

    segment = encode_events(recorder.events, 1, WriterIdentity.for_this_process())
    encoded = json.dumps(segment.to_pylist(), default=repr)
    assert "[REDACTED]" in encoded
    for name, secret in secrets.items():
        assert secret not in encoded, name
