"""Test-session settings shared by every module.

The checkout is read-only to the tests: at the start of a session every file under it (less git's,
the virtual environments', pytest's and hypothesis' own folders, Python's byte code and dot files)
is noted with its size and mtime, and a session at whose end a file was added or removed, or one
of provingkey-sample/ or templates/ changed, fails, naming it (edits of the code while the tests
run are the developer's). Whatever a `doit` left in provingkey-sample/ (its `.exps.so` files)
stays as it was.

Hypothesis profiles: `ci` (selected when the environment has CI=true, as .ci/run runs) is
derandomized, so a CI run never depends on a random draw; `dev` (default) draws fresh examples
(pass `--hypothesis-seed=N` to replay one). Every shape that ever failed is pinned as a plain
regression test or an `@example`, so it runs under both profiles.
"""
import os
from pathlib import Path

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or
                      ("ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"))


# --------------------------------------------------------------------- requirements (tests/require.py)
import pytest  # noqa: E402

import require as _require  # noqa: E402


ROOT = Path(__file__).resolve().parent.parent
_SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".whl", ".gl"}


def checkout_state(root: Path = ROOT) -> dict[str, tuple[int, int]]:
    """rel path -> (size, mtime_ns) of every file of the checkout the tests must leave alone."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in _SKIP_DIRS and not x.endswith(".egg-info")]
        for f in files:
            if f.endswith(".pyc") or f.startswith("."):
                continue
            p = Path(d) / f
            try:
                st = p.lstat()
            except OSError:
                continue
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")      # a pytest-xdist worker: the controller checks


def pytest_sessionstart(session):
    if not _is_worker(session.config):
        session.config._exps_checkout = checkout_state()


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "_exps_checkout", None)
    if before is None:
        return
    after = checkout_state()
    changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k]
                     and k.startswith(("provingkey-sample/", "templates/")))
    added, removed = sorted(after.keys() - before.keys()), sorted(before.keys() - after.keys())
    if changed or added or removed:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        msg = (f"the tests wrote into the checkout {ROOT}: changed {changed[:10]}, added {added[:10]}, "
               f"removed {removed[:10]}")
        if tr is not None:
            tr.write_line(msg, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


#: the longest tests of the slow tier, started first (pytest-xdist hands out tests in collection
#: order; with --dist worksteal an idle worker then takes what another has not started)
LONGEST_FIRST = ("tests/test_scale.py::", "tests/test_fuzz.py::test_every_field_set_to_each_alternate_value",
                 "tests/test_fuzz.py::test_fuzz_json_10k", "tests/test_py313.py::", "tests/test_readme.py::")


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        return next((i for i, p in enumerate(LONGEST_FIRST) if item.nodeid.startswith(p)), len(LONGEST_FIRST))
    items.sort(key=rank)          # stable: the others keep their order


def pytest_configure(config):
    config.addinivalue_line("markers", "requires(*names): skip without them, fail if EXPS_REQUIRE lists them "
                                       "(names: " + ", ".join(_require.KNOWN) + ")")
    _require.required()          # an unknown EXPS_REQUIRE name stops the session


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under EXPS_REQUIRE (a CI run) no test skips: a skip for any reason is a failure."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and not hasattr(rep, "wasxfail") and _require.required():
        why = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"skipped under EXPS_REQUIRE={os.environ.get('EXPS_REQUIRE')} (a CI run skips nothing): {why}"


def pytest_runtest_setup(item):
    for mark in item.iter_markers(name="requires"):
        _require.require(*mark.args)
