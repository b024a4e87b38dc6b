"""The build-state tests once more under Python 3.13, whose `dbm` opens new files with dbm.sqlite3:
doit keeps its state (.doit.db) through `dbm`, so under 3.13 that state is an SQLite file (3.11
and 3.12: dbm.gnu where python3-gdbm is installed, else dbm.dumb), with its own ways to be cut
short or to meet a full disk (codegen/build/statedb.py). tests/test_hostile.py (kills, cut-short
state files, a full disk) and tests/test_tasks.py (the build's stages) run in a pytest of that
Python, from this checkout, with its `exps-codegen` and `doit` first on PATH.

Requires `py313` (tests/require.py): $EXPS_PY313 (or python3.13 on PATH) with the test extras
installed; .ci/run makes one. Slow: the two files take minutes.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from require import py313

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.requires("py313", "nvcc", "tmpfs")]


def _env(exe: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PATH"] = os.pathsep.join([str(Path(exe).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_dbm_of_python_3_13_is_sqlite(tmp_path: Path) -> None:
    exe = py313()
    code = ("import dbm, sys; d = dbm.open(sys.argv[1], 'c'); d[b'k'] = b'v'; d.close(); "
            "print(dbm.whichdb(sys.argv[1]))")
    r = subprocess.run([exe, "-c", code, str(tmp_path / "state")], capture_output=True, text=True, check=True)
    assert r.stdout == "dbm.sqlite3\n"


def test_state_and_stage_tests_under_python_3_13(tmp_path: Path) -> None:
    exe = py313()
    env = _env(exe)
    for tool in ("exps-codegen", "doit"):     # the subprocess builds run 3.13 too
        r = subprocess.run(["sh", "-c", f"command -v {tool}"], env=env, capture_output=True, text=True)
        assert Path(r.stdout.strip()).parent == Path(exe).parent, \
            f"{tool} of {exe} is not first on PATH ({r.stdout.strip()}): pip install -e '.[test]' into it"
    r = subprocess.run([exe, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                        "--basetemp", str(tmp_path / "t"), "tests/test_hostile.py", "tests/test_tasks.py"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=3000)
    tail = r.stdout[-6000:] + r.stderr[-3000:]
    assert r.returncode == 0, tail
    assert " passed" in r.stdout and " skipped" not in r.stdout and " failed" not in r.stdout, tail
