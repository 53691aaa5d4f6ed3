"""Credential precedence on the wire (issue 8 item 3), seen by loopback servers.

Tool calls: the tool's own `Authorization` header wins, then `TRUVAG3_OAUTH_TOKEN` (Bearer),
then userinfo in `base_url` (Basic). LLM calls: `llm.api_key` wins, then `OPENAI_API_KEY`,
then userinfo in the LLM base URL (Basic); with none of them the run says so.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from executor.events import ListRecorder
from executor.llm import SITE_CORRECTION, LLMClient, resolve_llm_settings
from executor.plan import parse_plan
from executor.runtime import PlanExecutor
from tests.support.plans import capability, plan, run_cli, step, write_plan
from tests.support.tool_server import ToolReply


def _basic(userinfo: str) -> str:
    return "Basic " + base64.b64encode(userinfo.encode()).decode()


def _with_userinfo(base_url: str, userinfo: str) -> str:
    return base_url.replace("http://", f"http://{userinfo}@", 1)


# (case name, userinfo in base_url, tool headers, env, Authorization the tool receives)
TOOL_CASES = [
    ("explicit_header_wins_over_userinfo", "alice:s3cret", {"Authorization": "Bearer plan"}, {},
     "Bearer plan"),
    ("explicit_header_wins_over_env_token", None, {"authorization": "Token plan"},
     {"TRUVAG3_OAUTH_TOKEN": "env-token"}, "Token plan"),
    ("explicit_header_wins_over_env_and_userinfo", "alice:s3cret", {"AUTHORIZATION": "Bearer p"},
     {"TRUVAG3_OAUTH_TOKEN": "env-token"}, "Bearer p"),
    ("env_token_wins_over_userinfo", "alice:s3cret", {}, {"TRUVAG3_OAUTH_TOKEN": "env-token"},
     "Bearer env-token"),
    ("env_token_alone", None, {"X-Api-Key": "k"}, {"TRUVAG3_OAUTH_TOKEN": "env-token"},
     "Bearer env-token"),
    ("userinfo_alone_is_basic", "alice:s3cret", {}, {}, _basic("alice:s3cret")),
    ("userinfo_is_percent_decoded", "al%40ce:p%3Ass", {}, {}, _basic("al@ce:p:ss")),
    ("userinfo_without_password", "alice", {}, {}, _basic("alice:")),
    ("nothing_sends_no_authorization", None, {}, {}, None),
]


@pytest.mark.parametrize(
    ("userinfo", "headers", "env", "received"),
    [case[1:] for case in TOOL_CASES],
    ids=[case[0] for case in TOOL_CASES],
)
async def test_tool_authorization_precedence(
    tool_server, userinfo: str | None, headers: dict, env: dict, received: str | None
) -> None:
    tool_server.script("/capabilities/x", ToolReply.ok({"ok": True}))
    base_url = _with_userinfo(tool_server.base_url, userinfo) if userinfo else tool_server.base_url
    document = plan(base_url, {"x": capability("x")}, [step("step-1", "x", {"a": 1})])
    document["tools"]["demo"]["headers"] = headers
    recorder = ListRecorder()
    outcome = await PlanExecutor(parse_plan(document), recorder=recorder, env=env).run()
    assert outcome.status == "succeeded"
    (request,) = tool_server.received("/capabilities/x")
    assert request.headers.get("authorization") == received
    (dispatched,) = recorder.of_kind("attempt_dispatched")
    # The record says what was sent: one Authorization, the same, and no userinfo in the URL.
    recorded = [v for k, v in dispatched.request_headers.items() if k.lower() == "authorization"]
    assert recorded == ([received] if received is not None else [])
    assert dispatched.url == f"{tool_server.base_url}/capabilities/x"


def _llm_block(llm_server, userinfo: str | None, api_key: str | None) -> dict[str, Any]:
    block: dict[str, Any] = {"base_url": _with_userinfo(llm_server.base_url, userinfo)
                             if userinfo else llm_server.base_url, "model": "scripted-model"}
    if api_key is not None:
        block["api_key"] = api_key
    return block


# (case name, userinfo in llm.base_url, llm.api_key, env, Authorization received, key source)
LLM_CASES = [
    ("plan_key_wins_over_userinfo", "alice:s3cret", "sk-plan", {}, "Bearer sk-plan",
     "llm.api_key"),
    ("plan_key_wins_over_env_key", None, "sk-plan", {"OPENAI_API_KEY": "sk-env"},
     "Bearer sk-plan", "llm.api_key"),
    ("env_key_wins_over_userinfo", "alice:s3cret", None, {"OPENAI_API_KEY": "sk-env"},
     "Bearer sk-env", "OPENAI_API_KEY"),
    ("userinfo_alone_is_basic", "alice:s3cret", None, {}, _basic("alice:s3cret"),
     "llm.base_url userinfo"),
    ("no_key_sends_the_placeholder", None, None, {}, "Bearer unused", "none"),
]


@pytest.mark.parametrize(
    ("userinfo", "api_key", "env", "received", "source"),
    [case[1:] for case in LLM_CASES],
    ids=[case[0] for case in LLM_CASES],
)
async def test_llm_authorization_precedence(
    llm_server, userinfo: str | None, api_key: str | None, env: dict, received: str, source: str
) -> None:
    llm_server.script('{"corrected_parameters": {}}')
    settings = resolve_llm_settings(_llm_block(llm_server, userinfo, api_key), env)
    assert settings is not None
    assert (settings.api_key_source, settings.base_url) == (source, llm_server.base_url)
    async with LLMClient(settings) as client:
        exchange = await client.chat(site=SITE_CORRECTION, temperature=0.0, max_tokens=10,
                                     messages=[{"role": "user", "content": "hi"}])
    assert exchange.error is None
    assert exchange.base_url == llm_server.base_url
    (request,) = llm_server.requests
    assert request.headers.get("authorization") == received


def test_userinfo_in_openai_base_url_is_named_as_the_source() -> None:
    settings = resolve_llm_settings(None, {"OPENAI_BASE_URL": "http://u:p@127.0.0.1:9/v1"})
    assert settings is not None
    assert (settings.base_url, settings.api_key_source, settings.basic_auth) == (
        "http://127.0.0.1:9/v1", "OPENAI_BASE_URL userinfo", ("u", "p"))


async def _run_with_llm(tool_server, llm_server, api_key: str | None, env: dict) -> ListRecorder:
    tool_server.script("/capabilities/x", ToolReply.ok({"ok": True}))
    document = plan(tool_server.base_url, {"x": capability("x")}, [step("step-1", "x")])
    document["llm"] = _llm_block(llm_server, None, api_key)
    recorder = ListRecorder()
    await PlanExecutor(parse_plan(document), recorder=recorder, env=env).run()
    return recorder


async def test_a_run_without_any_llm_key_says_so(tool_server, llm_server) -> None:
    recorder = await _run_with_llm(tool_server, llm_server, None, {})
    (started,) = recorder.of_kind("execution_started")
    assert started.llm["auth_source"] == "none"
    (notice,) = [n for n in recorder.of_kind("notice") if n.name == "llm.no_api_key"]
    assert notice.step_id is None
    assert notice.message == (
        "no LLM API key: none of llm.api_key, OPENAI_API_KEY or userinfo in the LLM base URL is "
        "set, so LLM calls send the placeholder 'Authorization: Bearer unused'")


@pytest.mark.parametrize(("api_key", "env"), [("sk-plan", {}), (None, {"OPENAI_API_KEY": "k"})],
                         ids=["plan_key", "env_key"])
async def test_a_run_with_a_key_has_no_missing_key_notice(
    tool_server, llm_server, api_key: str | None, env: dict
) -> None:
    recorder = await _run_with_llm(tool_server, llm_server, api_key, env)
    assert [n for n in recorder.of_kind("notice") if n.name == "llm.no_api_key"] == []
    (started,) = recorder.of_kind("execution_started")
    assert started.llm["auth_source"] == ("llm.api_key" if api_key else "OPENAI_API_KEY")


def test_cli_run_with_userinfo_and_explicit_header_sends_the_header(tool_server, tmp_path):
    tool_server.script("/capabilities/x", ToolReply.ok({"ok": True}))
    document = plan(_with_userinfo(tool_server.base_url, "alice:s3cret"), {"x": capability("x")},
                    [step("step-1", "x")])
    document["tools"]["demo"]["headers"] = {"Authorization": "Bearer plan"}
    result = run_cli("run", "--no-store", str(write_plan(tmp_path, document)))
    assert result.code == 0, result.stderr
    (request,) = tool_server.received("/capabilities/x")
    assert request.headers["authorization"] == "Bearer plan"


def test_run_says_on_stderr_when_llm_calls_have_no_key(tmp_path, tool_server, llm_server,
                                                      monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    tool_server.script("/capabilities/x", ToolReply.ok({"ok": True}))
    path = write_plan(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                     [step("step-1", "x", {})],
                                     llm_base_url=llm_server.base_url))
    result = run_cli("run", str(path), "--no-store", "--json")
    assert result.code == 0
    assert "note: no LLM API key" in result.stderr
    assert result.json()["status"] == "succeeded"


@pytest.mark.parametrize("token", ["abc\r\nX-Evil: 1", "abc\x1b[2J", "abc\n"],
                         ids=["crlf_injection", "escape", "trailing_lf"])
def test_an_oauth_token_with_control_characters_is_refused_in_one_line(
    tmp_path, tool_server, monkeypatch, token
):
    monkeypatch.setenv("TRUVAG3_OAUTH_TOKEN", token)
    path = write_plan(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                     [step("step-1", "x", {})]))
    result = run_cli("run", str(path), "--no-store")
    assert result.code == 2
    assert result.stderr.startswith("truva-console: TRUVAG3_OAUTH_TOKEN cannot be sent")
    assert len(result.stderr.strip().splitlines()) == 1
    assert tool_server.received() == []


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:99999/v1", "127.0.0.1:8200/v1",
                                      "http://me:sk-secret-key@127.0.0.1:abc/v1"],
                         ids=["port_out_of_range", "no_scheme", "bad_port_with_userinfo"])
def test_an_unusable_openai_base_url_is_refused_in_one_line(
    tmp_path, tool_server, monkeypatch, base_url
):
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    path = write_plan(tmp_path, plan(tool_server.base_url, {"x": capability("x")},
                                     [step("step-1", "x", {})]))
    store = tmp_path / "debug.duckdb"
    result = run_cli("run", str(path), "--db", str(store))
    assert result.code == 2
    assert result.stderr.startswith("truva-console: OPENAI_BASE_URL: expected an http:// or "
                                    "https:// URL")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "sk-secret-key" not in result.stderr
    assert tool_server.received() == []
    assert not store.exists()
