"""Test-session settings shared by every module.

Hypothesis profiles: `ci` (selected when the environment has CI=true, as .ci/run runs) is
derandomized, so a CI run never depends on a random draw; `dev` (default) draws fresh examples
(pass `--hypothesis-seed=N` to replay one). Every shape that ever failed is pinned as a plain
regression test or an `@example`, so it runs under both profiles.
"""
import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or
                      ("ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"))


# --------------------------------------------------------------------- requirements (tests/require.py)
import pytest  # noqa: E402

import require as _require  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "requires(*names): skip without them, fail if EXPS_REQUIRE lists them "
                                       "(names: " + ", ".join(_require.KNOWN) + ")")
    _require.required()          # an unknown EXPS_REQUIRE name stops the session


def pytest_runtest_setup(item):
    for mark in item.iter_markers(name="requires"):
        _require.require(*mark.args)
