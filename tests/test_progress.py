"""A build that talks: heartbeats of long tasks, the counter under -n, tune on one
arch, strict JSON in every stage file, one build dir for doit and exps-codegen."""
from __future__ import annotations

import io
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import buildkit as bk
from codegen.build import actions as B
from codegen.build.autotune import Probe, TuneResult, tune_arch
from codegen.build.heartbeat import Heartbeat
from codegen.tasks import Settings, default_build_dir

needs_nvcc = pytest.mark.requires("nvcc")


class _Out(io.StringIO):
    """A stream that counts the lines written to it after `done` is set."""
    done = False
    late = 0

    def write(self, s: str) -> int:
        self.late += self.done
        return super().write(s)


def test_heartbeat_prints_status_and_elapsed() -> None:
    out = _Out()
    with Heartbeat("tune k", every=0.05, out=out) as hb:
        hb.status("probe 2 of at most 6 (chunk 128: 4 kernels)")
        deadline = time.monotonic() + 10          # a loaded machine may schedule the thread late
        while len(out.getvalue().splitlines()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    out.done = True
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3
    assert all(x.startswith("    ... tune k: probe 2 of at most 6 (chunk 128: 4 kernels), ") and
               x.endswith(" s elapsed") for x in lines)
    # stopped with the block: its thread ends (at once: no wait for the next beat) and writes
    # nothing after the block
    hb._thread.join(timeout=60)
    assert not hb._thread.is_alive() and out.late == 0


def test_tune_json_is_strict_json(tmp_path: Path) -> None:
    r = TuneResult(64, probes=[Probe(0, 1, 0, [255], 96, math.inf), Probe(64, 3, 2, [80, 80, 70], 0, 123.0)])
    B._write_json(tmp_path / "t.json", {"format": B.FORMAT, **r.to_json()})
    text = (tmp_path / "t.json").read_text()
    d = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert [p["cost"] for p in d["probes"]] == [None, 123.0]
    with pytest.raises(ValueError):
        B._write_json(tmp_path / "u.json", {"x": float("nan")})


def test_tune_arch() -> None:
    assert tune_arch([80, 86, 89, 90, 100, 120]) == 90
    assert tune_arch([80, 89]) == 89
    assert tune_arch([120]) == 120


def test_default_build_dir_is_safe_and_independent_of_cwd(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EXPS_BUILD_ROOT", str(tmp_path / "root"))
    pk = tmp_path / "k$(touch X) `id` 'q' ;x"
    d = default_build_dir(pk)
    assert d.parent == tmp_path / "root"
    assert all(c.isalnum() or c in "_.-" for c in d.name), d.name
    monkeypatch.chdir(tmp_path)
    assert Settings(pk=pk).build == d
    monkeypatch.chdir("/")
    assert Settings(pk=pk).build == d
    assert default_build_dir(tmp_path / "other") != d


@needs_nvcc
def test_tune_probes_one_arch_and_heartbeats(tmp_path: Path) -> None:
    """A build for two archs: autotune probes compile for sm_90 only (the chosen chunking is then
    compiled for both); a slow compile makes the tune task print its heartbeat."""
    kit = bk.new_kit(tmp_path / "k", airs=(bk.TINY,))
    slow = tmp_path / "slow.sh"
    slow.write_text(f"#!/bin/sh\nsleep 1\nexec {kit.launcher} \"$@\"\n")
    slow.chmod(0o755)
    argv = [sys.executable, "-m", "doit", "-f", str(bk.DODO), "-d", str(kit.root), f"pk={kit.pk}",
            f"build={kit.build}", "arch=80,90", f"launcher={slow}"]
    p = subprocess.run(argv, cwd=kit.root, env=kit.env(EXPS_HEARTBEAT_S="0.4"), capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    t = json.loads((kit.build / bk.TINY_KEY / "tune.json").read_text())
    assert t["arch"] == 90 and t["how"] == "probed" and len(t["probes"]) >= 1
    log = [x for x in kit.log.read_text().splitlines() if x.startswith("cc ")]
    probes = [x for x in log if " -cubin " in x]         # autotune: sm_90 device code, Q chunks only
    finals = [x for x in log if "sm_80" in x]            # cc: the kernel's device TUs, both archs
    hosts = [x for x in log if x not in probes and x not in finals]   # cc: the launcher
    assert len(probes) == len(t["probes"]) and all(
        "-arch=sm_90" in x and "sm_80" not in x and "_qprobe.cu" in x for x in probes), log
    assert sorted(x.split()[-3].rsplit("/", 1)[-1] for x in finals) == [    # its own, the generic inverse's
        f"{bk.TINY_KEY}_q0_x0.cu", "exps_xinv.cu"], log
    assert [x.split()[-3].rsplit("/", 1)[-1] for x in hosts] == ["exps_runtime.cpp"], log
    assert f"    ... tune {bk.TINY_KEY} (39 Q ops, sm_90): probe 1 of at most 6" in p.stderr, p.stderr
    assert bk.so_files(kit.pk) == {bk.TINY}


@needs_nvcc
def test_status_verify_clean_after_doit_need_no_flags(tmp_path: Path) -> None:
    """One build-dir convention: after `doit pk=K`, `exps-codegen status|verify|clean K` find it."""
    kit = bk.new_kit(tmp_path / "k", airs=(bk.TINY,))
    env = kit.env()
    argv = [sys.executable, "-m", "doit", "-f", str(bk.DODO), f"pk={kit.pk}", "arch=90", "chunk=0",
            f"launcher={kit.launcher}"]
    assert subprocess.run(argv, cwd=kit.root, env=env, capture_output=True, timeout=600).returncode == 0
    (build,) = (kit.root / "builds").iterdir()
    cli = bk.exps_codegen()
    st = subprocess.run([*cli, "status", str(kit.pk)], cwd="/", env=env, capture_output=True, text=True)
    assert st.returncode == 0 and st.stdout.splitlines()[0].split()[:2] == [bk.TINY, "current"], st.stdout
    assert f"(build dir {build})" in st.stdout
    v = subprocess.run([*cli, "verify", str(kit.pk), "--rows", "256"], cwd="/", env=env,
                       capture_output=True, text=True, timeout=600)
    assert v.returncode == 0 and "bit-identical" in v.stdout, v.stdout + v.stderr
    c = subprocess.run([*cli, "clean", str(kit.pk)], cwd="/", env=env, capture_output=True, text=True)
    assert c.returncode == 0
    assert c.stdout.splitlines() == [f"removed {kit.pk / (bk.TINY + '.exps.so')}", f"removed build dir {build}"]
    assert not build.exists() and bk.so_files(kit.pk) == set()
    c = subprocess.run([*cli, "clean", str(kit.pk)], cwd="/", env=env, capture_output=True, text=True)
    assert c.returncode == 0 and c.stdout == f"nothing to clean: no build dir {build}\n"


SHIM = """#!/bin/sh
echo "$(basename "$0") $*" >> {log}
exec {real} "$@"
"""


@pytest.mark.parametrize("args", [("list",), ("list", "--all")])
def test_doit_list_runs_no_tool(tmp_path: Path, args) -> None:
    """Task creators describe, they don't run tools: `doit list` loads the whole graph
    of the sample but runs no nvcc (version, arch list) and no nvidia-smi (the compiler identity
    is computed when doit checks a task, as `doit info` or a build does)."""
    log = tmp_path / "calls.log"
    shim = tmp_path / "bin"
    shim.mkdir()
    for tool in ("nvcc", "nvidia-smi", "ptxas", "g++"):
        real = shutil.which(tool) or "/bin/false"
        (shim / tool).write_text(SHIM.format(log=log, real=real))
        (shim / tool).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPS_") and k not in ("CUDA_HOME", "CUDA_PATH")}
    env.update({"PATH": f"{shim}:{env['PATH']}", "EXPS_BUILD_ROOT": str(tmp_path / "builds")})
    p = subprocess.run([sys.executable, "-m", "doit", "-f", str(bk.DODO), *args], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    names = {x.split()[0] for x in p.stdout.splitlines()}
    assert names >= ({"ir", "tune", "emit", "cc", "link"} if len(args) == 1 else
                     {"ir:basic_a0_0_b4_e50", "cc:basic_a0_2_b5_e5722", "link:synth/Basic/airs/Tiny/air/Tiny"}), names
    assert not log.exists(), log.read_text()
    assert not (tmp_path / "builds").exists()           # and nothing created
