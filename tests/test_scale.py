"""AIRs of any size build, verify and run: a 100,000-op synthetic Q (slow: the cold
build compiles ~2,000 chunk kernels). Not in the default run; `python3 -m pytest -q -m slow
tests/test_scale.py`; its times are docs/BENCHMARKS.md's (no timing here)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import buildkit as bk
from codegen.sample import synth

pytestmark = [pytest.mark.slow, pytest.mark.requires("nvcc", "gxx")]


def test_100k_op_q_builds_and_verifies(tmp_path: Path) -> None:
    pk = tmp_path / "pk"
    synth.build_large(pk, 100_000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPS_")}
    env.update({"EXPS_CACHE_DIR": str(tmp_path / "cache"), "EXPS_BUILD_ROOT": str(tmp_path / "builds")})
    b = subprocess.run([*bk.exps_codegen(), "build", str(pk), "--arch", "90"], env=env,
                       capture_output=True, text=True, timeout=3600)
    assert b.returncode == 0, b.stdout[-3000:] + b.stderr[-3000:]
    assert "1 .so placed" in b.stdout, b.stdout[-2000:]
    v = subprocess.run([*bk.exps_codegen(), "verify", str(pk), "--arch", "90", "--rows", "1024"], env=env,
                       capture_output=True, text=True, timeout=3600)
    assert v.returncode == 0 and "bit-identical" in v.stdout, v.stdout[-3000:] + v.stderr[-3000:]
