"""The rule table in docs/rules.md matches the code's rule table, row for row."""

import re
from pathlib import Path

from executor.policy import PREDISPATCH_RULES, RESPONSE_RULES

DOC = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
ROW = re.compile(r"^\| (\d+) \| `([^`]+)` \| `([^`]+)` \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$")


def _doc_tables() -> list[list[tuple[str, str, str, str, str]]]:
    tables: list[list[tuple[str, str, str, str, str]]] = []
    current: list[tuple[str, str, str, str, str]] | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            if current is None:
                current = []
                tables.append(current)
            _, rule_id, action, row, source, summary = match.groups()
            current.append((rule_id, action, row.strip(), source.strip(), summary.strip()))
        else:
            current = None
    return tables


def _code_table(rules) -> list[tuple[str, str, str, str, str]]:
    return [(r.rule_id, r.action.value, r.row, r.source, r.summary) for r in rules]


def test_docs_list_the_predispatch_rules_in_code_order():
    assert _doc_tables()[0] == _code_table(PREDISPATCH_RULES)


def test_docs_list_the_response_rules_in_code_order():
    assert _doc_tables()[1] == _code_table(RESPONSE_RULES)


def test_rule_ids_are_unique():
    ids = [r.rule_id for r in PREDISPATCH_RULES + RESPONSE_RULES]
    assert len(ids) == len(set(ids))


def test_both_tables_end_in_a_default_rule():
    assert PREDISPATCH_RULES[-1].rule_id == "predispatch.dispatch"
    assert RESPONSE_RULES[-1].rule_id == "default.unrouted"
