"""The GPU round scripts of bench/ (run on the device machine, never in CI): their syntax, and what
bench/ncu_small.sh hands Nsight Compute with and without NCU_PIPES (a stand-in `ncu` on PATH that
prints its arguments; no key is built, no GPU is touched)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "bench").glob("*.sh"))


def test_there_are_round_scripts() -> None:
    assert {"check_round.sh", "exprs_round.sh", "ncu_small.sh", "round_env.sh"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_round_script_parses(script: Path) -> None:
    r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _ncu_args(tmp_path: Path, pipes: bool) -> list[str]:
    """The arguments ncu_small.sh gives `ncu` for one AIR (KEYS empty: nothing is built)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ncu").write_text("#!/bin/sh\nprintf '%s\\n' \"$@\"\n")
    (fake / "ncu").chmod(0o755)
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "NCU_PIPES"}
    env.update(PATH=f"{fake}:{env['PATH']}", KEYS=" ", AIRS="U8Air")
    if pipes:
        env["NCU_PIPES"] = "1"
    r = subprocess.run(["bash", "bench/ncu_small.sh", str(out)], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return (out / "ncu-U8Air.txt").read_text().splitlines()


def test_ncu_small_sections_by_default(tmp_path: Path) -> None:
    args = _ncu_args(tmp_path, pipes=False)
    assert [args[i + 1] for i, a in enumerate(args) if a == "--section"] == [
        "SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "WarpStateStats", "SchedulerStats", "LaunchStats"]
    assert "--metrics" not in args
    assert args[args.index("-k") + 1] == "regex:_q_c0_k" and args[args.index("-c") + 1] == "1"
    assert args[args.index("--air") + 1] == "U8Air"


def test_ncu_small_pipes_asks_for_each_pipe_and_the_stalls(tmp_path: Path) -> None:
    args = _ncu_args(tmp_path, pipes=True)
    assert "--section" not in args
    metrics = args[args.index("--metrics") + 1].split(",")
    assert metrics == [
        "gpu__time_duration.sum", "smsp__issue_active.avg.pct_of_peak_sustained_active",
        r"regex:sm__pipe_(alu|fma|fmaheavy|fmalite)_cycles_active\.avg\.pct_of_peak_sustained_active",
        r"regex:sm__inst_executed_pipe_(alu|fma|fmaheavy|fmalite)\.avg\.pct_of_peak_sustained_active",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__warps_active.avg.pct_of_peak_sustained_active",
        "launch__registers_per_thread", r"regex:smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio"]
    assert args[args.index("-k") + 1] == "regex:_q_c0_k"


@pytest.mark.requires("nvcc")
def test_fp64_product_is_exact_on_the_host(tmp_path: Path) -> None:
    """bench/fp64_pipe.cu (session 25, issue #14: the FP64 pipe as a second multiplier): its
    gl_mul_f64, built by nvcc and run on the host without a GPU, is a * b mod p on 2^22 pairs (every
    pair of 25 edge words, small integers, uniform words) against __int128, and says it had no GPU."""
    exe = tmp_path / "f64"
    subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-std=c++17", "-DGL64_PARTIALLY_REDUCED", "-I", "templates",
                    "bench/fp64_pipe.cu", "-o", str(exe)], cwd=REPO, check=True, capture_output=True, timeout=300)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")          # the host check only, GPU or not
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        "host: gl_mul_f64 vs __int128 mod p: 4194304 pairs (625 edge pairs), 0 wrong",
        "no GPU: host check only"]
