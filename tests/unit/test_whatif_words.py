"""The what-if headline counts its nouns: one execution, one decision, not "1 executions"."""

from __future__ import annotations

import pytest

from console.render.whatif_view import whatif_text, whatif_view
from console.whatif import WhatIfReport


@pytest.mark.parametrize(
    ("executions", "decisions", "filtered", "expected"),
    [
        (1, 1, False, "1 decision in 1 execution re-decided"),
        (1, 2, True, "2 decisions in 1 matching execution re-decided"),
        (2, 1, False, "1 decision in 2 executions re-decided"),
        (0, 0, True, "0 decisions in 0 matching executions re-decided"),
    ],
)
def test_the_headline_counts_executions_and_decisions(executions, decisions, filtered, expected):
    report = WhatIfReport(overrides={}, executions=executions, decisions=decisions)
    view = whatif_view(report, filtered=filtered)
    assert view.headline.endswith(expected)
    assert expected in whatif_text(view)
