"""The shell tools of bench/ (run on the GPU machine or a maintainer's host, never in CI): their
syntax, and what bench/gpu_round.sh hands each tool in every phase, with stand-ins for python3,
nvcc and nvidia-smi on PATH that log their arguments (no key is built, no GPU is touched); and the
SASS counts of the field ops that bench/sass_pipes.py prints and templates/gen_common.cuh quotes."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "bench").glob("*.sh"))


def test_the_shell_tools() -> None:
    assert [p.name for p in SCRIPTS] == ["build_cost.sh", "gpu_round.sh", "nvcc_log.sh"]


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_shell_tool_parses(script: Path) -> None:
    r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


#: the stand-in: one line per call ("tool cwd flags=NVCC_APPEND_FLAGS,CUDA_FORCE_PTX_JIT arg ..."); a build makes its
#: --build-dir, python3 -m codegen.sample.synth its key directory
FAKE = r"""#!/bin/bash
echo "$(basename "$0") $PWD flags=${NVCC_APPEND_FLAGS:-},${CUDA_FORCE_PTX_JIT:-} $*" >> "$FAKE_LOG"
if [ "$(basename "$0")" = python3 ] && [ "$1 $2 $3" = "-m codegen.cli build" ]; then
  while [ $# -gt 0 ]; do [ "$1" = --build-dir ] && mkdir -p "$2"; shift; done
  exit 0
fi
if [ "$(basename "$0")" = python3 ] && [ "$1 $2" = "-m codegen.sample.synth" ]; then mkdir -p "$3"; fi
exit 0
"""


def _round(tmp_path: Path, *phases: str, old: bool = True, **env: str) -> tuple[list[list[str]], str]:
    """gpu_round.sh run from a copy of bench/ with two keys (`k0`, `k1`); returns python3's logged
    calls (cwd, the two variables, then the arguments) and the summary."""
    root = tmp_path / "repo"
    (root / "bench").mkdir(parents=True)
    shutil.copy(REPO / "bench" / "gpu_round.sh", root / "bench")
    for k in ("k0", "k1"):
        (root / "keys" / k).mkdir(parents=True)
    if old:
        (root / ".old").mkdir()
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in ("python3", "nvcc", "nvidia-smi"):
        (fake / tool).write_text(FAKE)
        (fake / tool).chmod(0o755)
    log = tmp_path / "calls.log"
    e = {k: v for k, v in os.environ.items() if k not in ("BENCH_INPUTS", "CHUNK", "AIRS", "SYNTH_OPS")}
    e.update(PATH=f"{fake}:{e['PATH']}", FAKE_LOG=str(log), KEYS="keys/k0 keys/k1",
             ROUND_TMP=str(tmp_path / "w"), **env)
    r = subprocess.run(["bash", "bench/gpu_round.sh", str(tmp_path / "out"), *phases], cwd=root, env=e,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    calls = [ln.split(" ") for ln in log.read_text().splitlines()]
    return [c[1:] for c in calls if c[0] == "python3"], (tmp_path / "out" / "summary.txt").read_text()


def _build_dirs(calls: list[list[str]]) -> list[tuple[str, str]]:
    return sorted((c[0], c[c.index("--build-dir") + 1]) for c in calls if c[2:5] == ["-m", "codegen.cli", "build"])


def test_default_round_builds_both_sides_checks_and_times(tmp_path: Path) -> None:
    calls, summary = _round(tmp_path)
    w, root = tmp_path / "w", tmp_path / "repo"
    assert _build_dirs(calls) == sorted([(str(root), f"{w}/after/0/b"), (str(root), f"{w}/after/1/b"),
                                         (str(root / ".old"), f"{w}/before/0/b"),
                                         (str(root / ".old"), f"{w}/before/1/b")])
    checks = [c[c.index("--build-dir") + 1] for c in calls if c[2:5] == ["-m", "codegen.cli", "gpucheck"]]
    assert sorted(checks) == [f"{w}/after/0/b", f"{w}/after/1/b"]
    run = next(c[3:] for c in calls if c[2] == "bench/run.py")
    assert run[:8] == ["--pk", f"{w}/after/0/pk", "--build-dir", f"{w}/after/0/b",
                       "--pk", f"{w}/after/1/pk", "--build-dir", f"{w}/after/1/b"]
    assert run[8:16] == ["--before", f"{w}/before/0/pk", "--before-build-dir", f"{w}/before/0/b",
                         "--before", f"{w}/before/1/pk", "--before-build-dir", f"{w}/before/1/b"]
    assert run[run.index("--out") + 1] == str(tmp_path / "out" / "q") and "--air" not in run
    assert "phases: build gpucheck q; BENCH_INPUTS=uniform" in summary


def test_keys_without_a_before_build_come_after_those_with_one(tmp_path: Path) -> None:
    calls, _ = _round(tmp_path, "build", "q", BEFORE_RE="k1$", AIRS="Large Tiny", CHUNK="64")
    w = tmp_path / "w"
    assert [d for _, d in _build_dirs(calls)] == [f"{w}/after/0/b", f"{w}/after/1/b", f"{w}/before/1/b"]
    builds = [c for c in calls if c[2:5] == ["-m", "codegen.cli", "build"]]
    assert all(c[c.index("--chunk") + 1] == "64" and int(c[c.index("-j") + 1]) >= 2 for c in builds)
    assert {c[1] for c in builds} == {"flags=,"}
    run = next(c[3:] for c in calls if c[2] == "bench/run.py")
    assert run[:8] == ["--pk", f"{w}/after/1/pk", "--build-dir", f"{w}/after/1/b",
                       "--pk", f"{w}/after/0/pk", "--build-dir", f"{w}/after/0/b"]
    assert run[8:12] == ["--before", f"{w}/before/1/pk", "--before-build-dir", f"{w}/before/1/b"]
    assert [run[i + 1] for i, a in enumerate(run) if a == "--air"] == ["Large", "Tiny"]


def test_no_old_tree_no_before_side(tmp_path: Path) -> None:
    calls, _ = _round(tmp_path, "build", "q", "exprs", old=False)
    w = tmp_path / "w"
    assert [d for _, d in _build_dirs(calls)] == [f"{w}/after/0/b", f"{w}/after/1/b"]
    run = next(c[3:] for c in calls if c[2] == "bench/run.py")
    assert "--before" not in run
    exprs = [c[3:] for c in calls if c[2] == "bench/exprs.py"]
    assert len(exprs) == 1 and exprs[0][exprs[0].index("--out") + 1] == str(tmp_path / "out" / "exprs-after")
    assert not any(c[2] == "bench/exprs_compare.py" for c in calls)


def test_the_other_phases(tmp_path: Path) -> None:
    calls, summary = _round(tmp_path, "build", "jit", "exact", "exprs", "fieldops", "sweep",
                            SYNTH_OPS="3000", MAX_CHUNK="384")
    w = tmp_path / "w"
    assert ["-m", "codegen.sample.synth", f"{w}/synth/k3000", "--large-ops", "3000"] in [c[2:] for c in calls]
    exact = [c for c in calls if c[2:5] == ["-m", "codegen.cli", "build"] and "/exact/" in c[-1]]
    assert sorted(c[c.index("--build-dir") + 1] for c in exact) == [f"{w}/exact/{i}/b" for i in range(3)]
    assert {c[1] for c in exact} == {"flags=-DEXPS_FORCE_EXACT,"}
    checked = sorted((c[1], c[c.index("--build-dir") + 1]) for c in calls if c[2:5] == ["-m", "codegen.cli", "gpucheck"])
    assert checked == sorted([("flags=,1", f"{w}/after/{i}/b") for i in range(3)]        # jit
                             + [("flags=,", f"{w}/exact/{i}/b") for i in range(3)])
    tools = [c[2] for c in calls if c[2].startswith("bench/")]
    assert tools == ["bench/exprs.py", "bench/exprs.py", "bench/fieldops.py", "bench/sweep.py"]
    sweep = next(c[3:] for c in calls if c[2] == "bench/sweep.py")
    assert [sweep[i + 1] for i, a in enumerate(sweep) if a == "--pk"] == ["keys/k0", "keys/k1", f"{w}/synth/k3000"]
    assert sweep[sweep.index("--max-chunk") + 1] == "384" and sweep[sweep.index("--waves") + 1] == "2048"
    assert re.search(r"gpucheck exact keys/k0: ", summary)


def test_an_unknown_phase_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="unknown phase ncu"):
        _round(tmp_path, "ncu")


@pytest.mark.requires("nvcc", "cuobjdump")
def test_sass_counts_of_the_field_ops(tmp_path: Path) -> None:
    """bench/sass_probe.cu through `sass_pipes.py probe` (sm_90, loads, stores and address arithmetic
    left out): gl_add 14, gl_sub 10, gl_mul 15 (8 ALU, 7 FMA-pipe of which 5 IMAD.WIDE / IMAD.HI),
    the exact 3x3 product 231 with 30 wide multiplies, the value path's 3x3 form with its canon 201,
    gl_acc_mul 12 (+ the xor its probe stores)."""
    r = subprocess.run([sys.executable, "bench/sass_pipes.py", "probe"], cwd=REPO, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    got = {ln.split()[0]: [int(x) for x in re.findall(r"(\d+) (?:total|ALU|FMA)", ln)] for ln in r.stdout.splitlines()}
    assert got == {"k_accmul": [13, 6, 7, 5], "k_add": [14, 9, 5, 0], "k_mul": [15, 8, 7, 5],
                   "k_mul3": [231, 119, 112, 30], "k_mul3v": [201, 107, 94, 30], "k_sub": [10, 7, 3, 0]}
