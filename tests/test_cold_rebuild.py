"""A second cold build (empty build dir, same object cache) runs no nvcc at all: compiles and
links both come from the content-addressed cache."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from buildkit import SHARED1, SHARED2, SKIPPED, TINY, copy_key, exps_codegen
from require import requires

pytestmark = requires("nvcc")      # tests/require.py: skip, or fail under EXPS_REQUIRE


def _build(pk: Path, build: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*exps_codegen(), "build", str(pk), "--arch", "90", "--chunk", "0",
                           "--build-dir", str(build), "-j", "2"],
                          env=env, capture_output=True, text=True, timeout=900)


def test_second_cold_build_runs_no_nvcc(tmp_path):
    pk = copy_key(tmp_path / "pk", (TINY, SKIPPED, SHARED1, SHARED2))
    env = dict(os.environ, EXPS_CACHE_DIR=str(tmp_path / "cache"), EXPS_LINK_CACHE="1")
    first = _build(pk, tmp_path / "b1", env)
    assert first.returncode == 0, first.stdout + first.stderr
    sos = sorted(p.relative_to(pk).as_posix() for p in pk.rglob("*.exps.so"))
    assert sos == sorted([f"{SHARED1}.exps.so", f"{SHARED2}.exps.so", f"{TINY}.exps.so"])
    before = {s: (pk / s).read_bytes() for s in sos}
    for s in sos:
        (pk / s).unlink()
    # empty build dir, same cache, and any nvcc run (compile or link) is an error
    second = _build(pk, tmp_path / "b2", dict(env, EXPS_ASSERT_NO_COMPILE="1"))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "EXPS_ASSERT_NO_COMPILE" not in second.stdout + second.stderr
    after = {s: (pk / s).read_bytes() for s in sos}
    assert after == before           # byte-identical libraries from the cache
    assert not (pk / f"{SKIPPED}.exps.so").exists()
