"""Hypothesis profiles for the property suite: `ci` (default) is derandomized and reproducible."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

# `ci`: a fixed, derandomized search so every run tries the same examples; no example database
# is written, and a failure prints the blob that `@reproduce_failure` replays.
settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
)
# `explore`: random seeds and ten times the examples, for hunting bugs locally.
settings.register_profile(
    "explore",
    parent=settings.get_profile("ci"),
    derandomize=False,
    database=None,
)
settings.load_profile(os.environ.get("TRUVA_HYPOTHESIS_PROFILE", "ci"))
