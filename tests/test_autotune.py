"""Autotune: the search (fake compiler with known registers) and real nvcc probes."""
from __future__ import annotations

import itertools
import json
import math
import re
import shutil
from pathlib import Path

import pytest

from codegen.build import autotune as at
from codegen.build.actions import act_ir, act_tune, load_coverage
from codegen.coverage import cover
from codegen.emit import KernelSource
from codegen.ir import ir_from_json
from codegen.model import load_air
from codegen.plan import Plan, plan
from require import PK, requires

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "provingkey-sample" / "synth"
TINY = SAMPLE / "Basic/airs/Tiny/air/Tiny"
LARGE = SAMPLE / "Basic/airs/Large/air/Large"
MEDIUM = SAMPLE / "Basic/airs/Medium/air/Medium"
needs_nvcc = requires("nvcc")      # tests/require.py: skip, or fail under EXPS_REQUIRE


def q_of(base: Path):
    si, ei = load_air(f"{base}.starkinfo.json", f"{base}.expressionsinfo.json")
    return cover(si, ei).q


def test_occupancy_steps():
    # 65536 registers / SM, 256-thread blocks, allocation in steps of 8 registers per thread
    assert at.occupancy(64) == 0.5          # 4 blocks
    assert at.occupancy(72) == 0.375        # 3 blocks
    assert at.occupancy(128) == 0.25        # 2 blocks
    assert at.occupancy(255) == 0.125       # 1 block
    assert at.occupancy(32) == 1.0          # 8 blocks (thread limit)


def test_cost_prefers_occupancy_over_fewer_launches():
    q = q_of(MEDIUM)
    one, chunked = plan(q, 0), plan(q, 64)
    slow = at.cost(q, one, [255])
    fast = at.cost(q, chunked, [64] * chunked.n_chunks)
    assert fast < slow


def fake_compiler(regs_of, spill_above=255, log=None):
    """Registers per chunk from a function of the chunk's op count; spills above a bound."""
    def compile_plan(pl):
        regs = [min(255, regs_of(e - s)) for s, e in pl.chunks]
        if log is not None:
            log.append(pl.ops_per_chunk)
        return regs, sum(64 for s, e in pl.chunks if regs_of(e - s) > spill_above)
    return compile_plan


def test_search_finds_model_optimum_with_few_probes():
    q = q_of(MEDIUM)
    compile_plan = fake_compiler(lambda n: 30 + n // 2)
    log: list[int] = []
    res = at.tune(q, fake_compiler(lambda n: 30 + n // 2, log=log))
    # the exhaustive optimum of the same model over every candidate
    costs = {c: at.cost(q, plan(q, c), compile_plan(plan(q, c))[0]) for c in at.candidates(len(q.ops))}
    spills = {c for c in costs if compile_plan(plan(q, c))[1]}
    best = min((c for c in costs if c not in spills), key=lambda c: costs[c])
    assert res.skip == ""
    assert res.ops_per_chunk == best
    assert 1 <= len(res.probes) <= 6 < len(costs)
    assert log == [p.ops_per_chunk for p in res.probes]


def test_search_stops_when_no_untried_plan_can_win():
    """The search stops once every untried candidate's cost at full occupancy
    (`floor_cost`, a lower bound of its cost at any registers) is no better than the best measured.
    Tiny (39 ops) at 40 registers: the single kernel costs W + CHUNK, the 2-chunk plan at least
    W + 2 CHUNK: one probe."""
    q = q_of(TINY)
    log: list[int] = []
    res = at.tune(q, fake_compiler(lambda n: 40, log=log))
    assert log == [0] and res.ops_per_chunk == 0 and [p.ops_per_chunk for p in res.probes] == [0]
    two = plan(q, 32)
    assert at.floor_cost(q, two) >= res.probes[0].cost
    assert all(at.floor_cost(q, two) <= at.cost(q, two, [r] * two.n_chunks) for r in (1, 40, 64, 72, 128, 255))
    # below SINGLE_ONLY_BELOW ops the single kernel is kept unless it spills (the model's 2-chunk
    # plans ran 0.78x-0.94x on the H200, tests/data/sweep-11waves-h200.json): at 255 registers still one compile; a spill
    # sends the search on, to the 2-chunk plan
    assert len(q.ops) < at.SINGLE_ONLY_BELOW
    log.clear()
    res = at.tune(q, fake_compiler(lambda n: 255 if n > 32 else 40, log=log))
    assert log == [0] and res.ops_per_chunk == 0
    log.clear()
    res = at.tune(q, fake_compiler(lambda n: 300 if n > 32 else 40, log=log))
    assert log == [0, 32] and res.ops_per_chunk == 32


@pytest.mark.parametrize("base", [TINY, MEDIUM, LARGE])
@pytest.mark.parametrize("regs_of", [lambda n: 40, lambda n: 30 + n // 2, lambda n: 24 + n // 3,
                                     lambda n: 60 + n // 4, lambda n: 400 if n > 100 else 50 + n // 3])
def test_stopping_early_never_changes_the_choice(monkeypatch, base, regs_of):
    """With margin 0 the early stops only drop compiles that could not change the outcome (the
    search's end, and a neighbour that cannot beat the best even at full occupancy): the same
    choice as the search without them, from a subset of its probes, the first the same. With
    PRUNE_MARGIN (plans that could gain at most that fraction are not compiled) the choice costs at
    most 1 / (1 - PRUNE_MARGIN) of it, from no more probes than margin 0."""
    q = q_of(base)
    short: list[int] = []
    res = at.tune(q, fake_compiler(regs_of, log=short), margin=0.0)
    pruned: list[int] = []
    res_m = at.tune(q, fake_compiler(regs_of, log=pruned))
    monkeypatch.setattr(at, "floor_cost", lambda *a, **k: -math.inf)
    full: list[int] = []
    ref = at.tune(q, fake_compiler(regs_of, log=full))
    assert (res.ops_per_chunk, res.skip) == (ref.ops_per_chunk, ref.skip)
    assert short[0] == full[0] and set(short) <= set(full) and len(short) <= len(full)
    assert res_m.skip == ref.skip and pruned[0] == full[0] and len(pruned) <= len(short)
    if not ref.skip:
        chosen = {p.ops_per_chunk: p.cost for p in res_m.probes}[res_m.ops_per_chunk]
        exact = {p.ops_per_chunk: p.cost for p in ref.probes}[ref.ops_per_chunk]
        assert chosen <= exact / (1 - at.PRUNE_MARGIN)


def test_the_margin_prunes_plans_that_could_gain_less():
    """A plan whose cost at full occupancy is within PRUNE_MARGIN below the best measured is not
    compiled; one that could beat the best by more is. The sample's Medium at 70 + n / 2
    registers: the exact search compiles 64 ops per chunk, which the margin leaves out, and both
    choose 96."""
    q = q_of(MEDIUM)
    pl = plan(q, 64)
    f = at.floor_cost(q, pl)
    assert at.cannot_win(q, pl, f) and at.cannot_win(q, pl, f / (1 - at.PRUNE_MARGIN))
    assert not at.cannot_win(q, pl, f / (1 - at.PRUNE_MARGIN) * 1.001)
    assert at.cannot_win(q, pl, f, margin=0.0) and not at.cannot_win(q, pl, f * 1.001, margin=0.0)
    exact: list[int] = []
    pruned: list[int] = []
    a = at.tune(q, fake_compiler(lambda n: 70 + n // 2, log=exact), margin=0.0)
    b = at.tune(q, fake_compiler(lambda n: 70 + n // 2, log=pruned))
    assert a.ops_per_chunk == b.ops_per_chunk == 96
    assert exact == [96, 64, 128] and pruned == [96, 128]
    # each left out could not beat the best by more than the margin (the best when it was left
    # out, no less than the final one); margin 0 compiled it: it could have beaten the best then
    best = min(p.cost for p in b.probes if not p.spills)
    for c in set(exact) - set(pruned):
        assert at.floor_cost(q, plan(q, c)) >= best * (1 - at.PRUNE_MARGIN)


def test_first_probe_is_tunes_first_compile():
    """`first_probe` names the plan tune() compiles first, and says when the estimate expects it to
    end the search (a build then compiles it as its final object: actions.act_tune)."""
    for base, regs_of in ((TINY, lambda n: 40), (MEDIUM, lambda n: 30 + n // 2)):
        q = q_of(base)
        log: list[int] = []
        at.tune(q, fake_compiler(regs_of, log=log))
        plans, _ = at.candidate_plans(q)
        assert at.first_probe(q, plans)[0] == log[0]
    assert at.first_probe(q_of(TINY), at.candidate_plans(q_of(TINY))[0]) == (0, True)
    assert at.first_probe(q_of(MEDIUM), at.candidate_plans(q_of(MEDIUM))[0])[1] is False


def test_spilling_everywhere_but_the_floor_walks_down():
    q = q_of(MEDIUM)
    # cuts move by up to k // 8 (plan.cuts): a chunk of the floor plan has at most FLOOR + 2 (FLOOR // 8) ops
    floor_max = at.FLOOR + 2 * (at.FLOOR // 8)
    assert max(e - s for s, e in plan(q, at.FLOOR).chunks) <= floor_max < min(
        max(e - s for s, e in plan(q, c).chunks) for c in at.candidates(len(q.ops)) if c != at.FLOOR)
    res = at.tune(q, fake_compiler(lambda n: 400 if n > floor_max else 60, spill_above=255))
    assert res.ops_per_chunk == at.FLOOR
    assert all(p.spills for p in res.probes[:-1]) and not res.probes[-1].spills


def test_floor_spills_skips_with_reason():
    q = q_of(MEDIUM)
    res = at.tune(q, fake_compiler(lambda n: 400))
    assert res.ops_per_chunk == 0 and "still spills" in res.skip


def test_slots_cap_skips():
    q = q_of(MEDIUM)
    # the single kernel spills, every chunking needs more than one scratch slot
    res = at.tune(q, fake_compiler(lambda n: 400 if n == len(q.ops) else 60), slots_cap=1)
    assert res.ops_per_chunk == 0
    assert "still spills" in res.skip and "SLOTS_CAP 1" in res.skip


def test_no_single_kernel_for_a_huge_q():
    """Above MAX_SINGLE_OPS ops one kernel is never tried (nvcc time grows faster than
    linearly), even when every chunking spills."""
    assert 0 in at.candidates(at.MAX_SINGLE_OPS) and 0 not in at.candidates(at.MAX_SINGLE_OPS + 1)
    q = q_of(LARGE)
    seen = []

    def comp(pl):
        seen.append(pl.ops_per_chunk)
        return [300] * pl.n_chunks, 64          # everything spills
    res = at.tune(q, comp)
    assert 0 not in seen and at.FLOOR in seen and res.skip.startswith("still spills")


def test_small_air_single_kernel_candidates():
    q = q_of(TINY)
    assert len(q.ops) < 64
    assert len(q.ops) == 39
    assert at.candidates(len(q.ops)) == [0, 32]


@needs_nvcc
def test_small_air_gets_a_kernel_with_real_nvcc(tmp_path, monkeypatch):
    """The original skipped every AIR under 64 ops ("still spills at CHUNK_MIN"); we do not."""
    monkeypatch.setenv("EXPS_CACHE_DIR", str(tmp_path / "cache"))
    ir_json, tune_json = tmp_path / "ir.json", tmp_path / "tune.json"
    act_ir("tiny", f"{TINY}.starkinfo.json", f"{TINY}.expressionsinfo.json", str(ir_json), [])
    act_tune("tiny", str(ir_json), str(tune_json), str(tmp_path / "probe"), [90], None, launcher=[])
    t = json.loads(tune_json.read_text())
    assert t["skip"] == ""
    assert t["ops_per_chunk"] == 0          # one kernel: 39 ops fit easily
    assert t["probes"] and all(p["spills"] == 0 for p in t["probes"])
    assert 20 < max(t["probes"][0]["regs"]) < 128


def _counting_launcher(tmp_path: Path) -> tuple[Path, Path]:
    """A compiler launcher that logs every command line it runs (to the returned log), then runs it."""
    log = tmp_path / "calls.log"
    launcher = tmp_path / "count.sh"
    launcher.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec "$@"\n')
    launcher.chmod(0o755)
    return launcher, log


def _tuned_as_cc(tmp_path: Path, monkeypatch, key: str, base: Path) -> tuple:
    """act_ir and act_tune of AIR `base` as `build` runs them for kernel `key` with sm_90 the one
    target and the kernel's settings (a probe may then compile cc's own TU), through a counting
    launcher. Returns (launcher, its log, ir.json, tune.json, manifest path, the content ir.json
    records, settings)."""
    monkeypatch.setenv("EXPS_CACHE_DIR", str(tmp_path / "cache"))
    launcher, log = _counting_launcher(tmp_path)
    ir_json, tune_json, man = tmp_path / "ir.json", tmp_path / "tune.json", tmp_path / "k" / "manifest.json"
    settings = {"cap": 0, "expr_cap": 0, "slots_cap": 1 << 20}
    act_ir(key, f"{base}.starkinfo.json", f"{base}.expressionsinfo.json", str(ir_json), [])
    content = json.loads(ir_json.read_text())["content"]
    assert act_tune(key, str(ir_json), str(tune_json), str(tmp_path / "probe"), [90], None,
                    launcher=[str(launcher)], settings=settings)
    return launcher, log, ir_json, tune_json, man, content, settings


@needs_nvcc
def test_one_target_arch_runs_no_cubin_compile(tmp_path, monkeypatch):
    """With the tune arch the only target every probe compiles as cc does
    (`-c -fatbin`), so tune never asks the device prelude about `-cubin`: on a cold cache that
    question alone was two nvcc runs (the prelude's probe TU with and without it). With a second
    target arch the probes are `-cubin` and it is asked (once per process and cache)."""
    from codegen.build import prelude
    monkeypatch.setenv("EXPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(prelude, "_decided", {})
    launcher, log = _counting_launcher(tmp_path)
    monkeypatch.setenv("EXPS_LAUNCHER", str(launcher))      # the prelude's compiles log there too
    ir_json, tune_json = tmp_path / "ir.json", tmp_path / "tune.json"
    act_ir("tiny", f"{TINY}.starkinfo.json", f"{TINY}.expressionsinfo.json", str(ir_json), [])
    assert act_tune("tiny", str(ir_json), str(tune_json), str(tmp_path / "probe"), [90], None,
                    launcher=[str(launcher)])
    runs = log.read_text().splitlines()
    assert len(runs) == 3 and all(" -c -fatbin " in r for r in runs)   # the prelude's 2, the probe
    assert not [r for r in runs if " -cubin " in r]
    log.unlink()
    assert act_tune("tiny", str(ir_json), str(tune_json), str(tmp_path / "probe"), [80, 90], None,
                    launcher=[str(launcher)])
    runs = log.read_text().splitlines()
    assert len(runs) == 3 and all(" -cubin " in r for r in runs)        # the prelude's 2, the probe


@needs_nvcc
def test_small_kernel_first_probe_is_its_final_compile(tmp_path, monkeypatch):
    """Tiny (39 Q ops, 2 expressions) is one device TU of its own and the estimate expects
    its single kernel to end the search: tune compiles that TU exactly as cc will (`-c -fatbin`,
    sm_90, the kernel's real source hash) and nothing else; cc's device TU is then an object cache
    hit: cc runs only the host compiles of the launch table and the generic launcher, and the
    generic inverse kernel's TU (`exps_xinv.cu`, the same for every kernel: this cache is cold)."""
    from codegen.build.actions import act_cc, act_emit
    launcher, log, ir_json, tune_json, man, content, settings = _tuned_as_cc(tmp_path, monkeypatch, "tiny", TINY)
    t = json.loads(tune_json.read_text())
    assert t["ops_per_chunk"] == 0 and [p["ops_per_chunk"] for p in t["probes"]] == [0]
    [probe] = log.read_text().splitlines()
    assert " -c -fatbin " in probe and "code=sm_90" in probe and probe.split()[-3].endswith("/tiny_q0_x0.cu")
    assert act_emit("tiny", str(ir_json), str(tune_json), str(man.parent / "src"), str(man), settings)
    assert json.loads(man.read_text())["files"].keys() == {"tiny_q0_x0.cu", "exps_xinv.cu", "tiny_abi.cpp"}
    assert act_cc("tiny", str(man), str(tmp_path / "k" / "obj"), str(tmp_path / "k" / "objs.json"), [90], [], [],
                  launcher=[str(launcher)])
    assert json.loads((tmp_path / "k" / "objs.json").read_text())["hits"] == 1
    cc = log.read_text().splitlines()[1:]     # cc compiled no device TU of Tiny's own: the generic inverse
    assert sorted(x.split()[-3].rsplit("/", 1)[-1] for x in cc) == [  # kernel's, the launcher (and the
        "exps_runtime.cpp", "exps_xinv.cu"]                           # table, never via a launcher)
    # no settings to hash: the probe of the single kernel compiles its chunk (`-c -fatbin`, the one
    # target) in a probe TU of its own; emit keeps the kernel one TU
    log.unlink()
    assert act_tune("tiny", str(ir_json), str(tune_json), str(tmp_path / "probe"), [90], None,
                    launcher=[str(launcher)])
    [probe] = log.read_text().splitlines()
    assert " -c -fatbin " in probe and "code=sm_90" in probe and probe.split()[-3].endswith("/tiny_qprobe.cu")
    t = json.loads(tune_json.read_text())
    assert "probed" not in t and t["ops_per_chunk"] == 0
    assert act_emit("tiny", str(ir_json), str(tune_json), str(man.parent / "src"), str(man), settings)
    assert json.loads(man.read_text())["files"].keys() == {"tiny_q0_x0.cu", "exps_xinv.cu", "tiny_abi.cpp"}
    # another target arch list: probes are device code only, for the tune arch (test_progress.py)
    log.unlink()
    assert act_tune("tiny", str(ir_json), str(tune_json), str(tmp_path / "probe"), [80, 90], None,
                    launcher=[str(launcher)], settings=settings)
    [probe] = log.read_text().splitlines()
    assert " -cubin " in probe and probe.split()[-3].endswith("/tiny_qprobe.cu")


@needs_nvcc
def test_a_plan_probed_whole_is_ccs_own_compile(tmp_path, monkeypatch):
    """The sample's Medium (6 chunk kernels at its choice, every chunk probed): its probes compile
    the Q TUs exactly as cc does, so cc takes the winner's TUs and their twins from the cache and
    compiles only the expressions' TU and the generic inverse kernel's."""
    from codegen.build.actions import act_cc, act_emit
    launcher, log, ir_json, tune_json, man, content, settings = _tuned_as_cc(
        tmp_path, monkeypatch, "m", SAMPLE / "Basic/airs/Medium/air/Medium")
    t = json.loads(tune_json.read_text())
    assert t["ops_per_chunk"] == 96 and "96" not in t["sampled"]
    assert act_emit("m", str(ir_json), str(tune_json), str(man.parent / "src"), str(man), settings)
    files = json.loads(man.read_text())["files"]
    assert sorted(files) == ["exps_xinv.cu", "m_abi.cpp", "m_q0.cu", "m_q1.cu", "m_x0.cu"]
    log.unlink()
    assert act_cc("m", str(man), str(tmp_path / "k" / "obj"), str(tmp_path / "k" / "objs.json"), [90], [],
                  [], launcher=[str(launcher)])
    cc = sorted(x.split()[-3].rsplit("/", 1)[-1] for x in log.read_text().splitlines())
    assert cc == ["exps_runtime.cpp", "exps_xinv.cu", "m_x0.cu"], cc
    assert json.loads((tmp_path / "k" / "objs.json").read_text())["hits"] == 2     # m_q0.cu, m_q1.cu


def test_probe_literals_keep_the_shape_and_ignore_the_values() -> None:
    """Stand-ins of each literal's class (its zero, all-ones and nonzero halves kept), 0, 1 and p - 1
    as they are, equal literals equal and distinct ones distinct; an edit of a literal Q has once,
    to a value of its class that Q has nowhere, changes no stand-in; an edit to a value Q has
    elsewhere makes the two equal, as they are."""
    from codegen.ir import KernelIR, Leaf, Op, Val
    P = at.GL_P

    def q(*lits):
        ops = [Op("add", "11", Leaf("cm", 1, stage=1), Leaf("cm", 1, stage=1, col=1), 1)]
        ops += [Op("mul", "11", Val(i, 1), Leaf("number", 1, value=v), 1) for i, v in enumerate(lits)]
        return KernelIR(0, True, tuple(ops))

    def stand(ir):
        return [op.b.value for op in ir.ops[1:]]
    lits = (7, 7, 1 << 40, (5 << 32) | 9, P + 3, 0, 1, P - 1, 1 << 40)
    got = stand(at.probe_literals(q(*lits)))
    assert got[5:8] == [0, 1, P - 1]                                      # kept
    assert got[0] == got[1] and got[2] == got[8] and len({got[0], got[2], got[3], got[4]}) == 4
    assert [at._literal_class(v)[0] for v in got[:5]] == [at._literal_class(v)[0] for v in lits[:5]]
    assert all(g != v for g, v in zip(got[:5], lits[:5]))
    edited = stand(at.probe_literals(q(7, 7, 1 << 40, (5 << 32) | 10, P + 3, 0, 1, P - 1, 1 << 40)))
    assert edited == got
    merged = stand(at.probe_literals(q(7, 7, 1 << 40, 7, P + 3, 0, 1, P - 1, 1 << 40)))
    assert merged[3] == merged[0] != got[3]


def bk_bump(d: Path, base: str) -> None:
    """Change a literal of Q that it has only once (not 0, 1 or p - 1) to a value of its class
    that Q has nowhere: a constant of the circuit edited."""
    si = json.loads((d / f"{base}.starkinfo.json").read_text())
    ei_path = d / f"{base}.expressionsinfo.json"
    ei = json.loads(ei_path.read_text())
    q = next(e for e in ei["expressionsCode"] if e["expId"] == si["cExpId"])
    nums = [s for op in q["code"] for s in op["src"] if s["type"] == "number"]
    values = [int(s["value"]) for s in nums]
    src = next(s for s, v in zip(nums, values) if v not in at._KEPT_LITERALS and values.count(v) == 1)
    old = new = int(src["value"])
    while new == old or new in values or at._literal_class(new)[0] != at._literal_class(old)[0]:
        new += 1
    src["value"] = str(new)
    ei_path.write_text(json.dumps(ei))


@needs_nvcc
@pytest.mark.slow
def test_autotune_large_sample_air_with_real_nvcc(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPS_CACHE_DIR", str(tmp_path / "cache"))
    ir_json, tune_json = tmp_path / "ir.json", tmp_path / "tune.json"
    act_ir("large", f"{LARGE}.starkinfo.json", f"{LARGE}.expressionsinfo.json", str(ir_json), [])
    act_tune("large", str(ir_json), str(tune_json), str(tmp_path / "probe"), [90], None, launcher=[])
    t = json.loads(tune_json.read_text())
    assert t["skip"] == ""
    assert 0 < t["ops_per_chunk"] <= 512      # 5,394 ops never fit one no-spill kernel
    chosen = next(p for p in t["probes"] if p["ops_per_chunk"] == t["ops_per_chunk"])
    assert chosen["spills"] == 0 and max(chosen["regs"]) <= 255
    assert len(t["probes"]) <= 6


# ------------------------------------------------------------------ representative probes
def test_representative_chunks_and_filled_registers() -> None:
    """A plan of many chunks is probed through PROBE_SAMPLE evenly spaced chunks (the first and the
    last among them) and the one of the highest estimated registers; the others get the probed
    chunks' registers handed out by estimate rank, exactly the measured values, lowest to highest."""
    from codegen.build.probes import PROBE_SAMPLE, fill_unprobed, representatives
    from codegen.build.autotune import estimated_regs
    from codegen.ir import KernelIR, Leaf, Op, Val
    ops = [Op("mul", "11", Leaf("cm", 1, stage=1, col=0), Leaf("cm", 1, stage=1, col=1), 1)]
    for i in range(1, 200):
        ops.append(Op("add" if i % 3 else "mul", "11", Val(i - 1, 1), Leaf("cm", 1, stage=1, col=i % 7), 1))
    ir = KernelIR(1, True, tuple(ops))
    small = plan(ir, 64)                      # 4 chunks: all compiled
    assert representatives(ir, small) == [0, 1, 2, 3]
    assert representatives(ir, plan(ir, 26)) == list(range(PROBE_SAMPLE + 2))     # 8 chunks: all
    big = plan(ir, 16)                        # 13 chunks: 0, 2, 5, 7, 10, 12 and the top estimate
    assert big.n_chunks == 13 and PROBE_SAMPLE == 6
    est = estimated_regs(ir, big)
    top = max(range(13), key=lambda c: (est[c], -c))
    reps = representatives(ir, big)
    assert reps == sorted({0, 2, 5, 7, 10, 12, top})
    measured = [0] * 13
    for k, c in enumerate(reps):
        measured[c] = 60 + 20 * k             # 60, 80, 100, ... in chunk order
    filled = fill_unprobed(ir, big, measured, reps)
    assert [filled[c] for c in reps] == [measured[c] for c in reps]
    rest = sorted((c for c in range(13) if c not in reps), key=lambda c: (est[c], c))
    vals = sorted(measured[c] for c in reps)
    assert [filled[c] for c in rest] == [vals[j * len(vals) // len(rest)] for j in range(len(rest))]
    assert sorted(set(filled)) == vals        # only measured counts, each of them used
    assert all(filled[a] <= filled[b] for a, b in zip(rest, rest[1:]))   # by estimate rank
    assert fill_unprobed(ir, small, [40, 41, 42, 43], [0, 1, 2, 3]) == [40, 41, 42, 43]


def _sampler(reps=None, fill=None):
    """A replay's `sample(q, plan, regs)` (bench/replay_tune.py): the registers a build's probe of
    the plan shows, those of the chunks `reps(q, plan)` names (default probes.representatives) and
    `fill`'s for the rest (default probes.fill_unprobed)."""
    from codegen.build.probes import fill_unprobed, representatives
    reps, fill = reps or representatives, fill or fill_unprobed

    def sample(q, pl, regs):
        ks = KernelSource("k", q, pl, [], "0" * 64)
        assert ks.plan.n_chunks == len(regs), "the planner changed since the sweep"
        got = reps(ks.q, ks.plan)
        return fill(ks.q, ks.plan, [g if i in got else 0 for i, g in enumerate(regs)], got)
    return sample


def _replay_with_sampling(sweep: dict, irs: dict, reps, fill, m: at.CostModel = at.CostModel()) -> dict:
    """Per AIR of an H200 sweep (every chunk kernel's ptxas registers recorded): the tuner's choice
    when each probe sees only the registers of `reps(q, plan)` and `fill` makes up the rest, and
    that choice's time over the sweep's fastest (chunked plans at the launcher's 2048-block waves)."""
    from bench.replay_tune import replay
    return {air.split("/")[-1]: (t.ops_per_chunk, chosen["ms"] / best["ms"])
            for air, (t, chosen, best) in replay(sweep, irs, _sampler(reps, fill), m, wave="2048").items()}


def _evenly_spaced_and_top(k: int):
    """probes.representatives with k evenly spaced chunks instead of PROBE_SAMPLE."""
    def reps(q, pl):
        n = pl.n_chunks
        if n <= k + 2:
            return list(range(n))
        est = at.estimated_regs(q, pl)
        return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)} | {min(range(n), key=lambda c: (-est[c], c))})
    return reps


@requires("pk")
@pytest.mark.parametrize("sweep_file", ["sweep-11waves-h200.json", "sweep-3waves-h200.json", "sweep-5airs-h200.json",
                                        "sweep-2048-h200.json"])
def test_sampled_registers_choose_as_every_chunks_registers_would(sweep_file: str) -> None:
    """The four H200 sweeps that recorded every chunk kernel's registers (19,
    19, 5 and 19 AIRs): the tuner that sees only the `representatives`' registers (PROBE_SAMPLE = 6
    evenly spaced chunks and the top estimate) and `fill_unprobed`'s for the rest chooses, on every
    AIR, the chunking it chooses knowing every chunk's registers. With 3 evenly spaced chunks
    it does not on two of the sweeps: the sample's Large at 96 instead of 128 (sweep-2048-h200)
    and ConnectionNew at 128 instead of 96 (sweep-5airs-h200; there also Large at 64 instead of 96
    without PRUNE_MARGIN); with 5, on sweep-11waves-h200."""
    from bench.replay_tune import q_irs, replay
    from codegen.build.probes import PROBE_SAMPLE, representatives
    assert PROBE_SAMPLE == 6
    sweep = json.loads((ROOT / "tests" / "data" / sweep_file).read_text())
    irs = q_irs([ROOT / "provingkey-sample", *sorted(PK.glob("*/provingKey"))])
    every = {air: t.ops_per_chunk for air, (t, _, _) in replay(sweep, irs).items()}

    def sampled(reps):
        return {air: t.ops_per_chunk for air, (t, _, _) in replay(sweep, irs, _sampler(reps)).items()}
    assert len(every) in (5, 19)
    assert sampled(representatives) == every
    three = sampled(_evenly_spaced_and_top(3))
    missed = {"sweep-5airs-h200.json": {"connection/ConnectionNew": (128, 96)},
              "sweep-2048-h200.json": {"provingkey-sample/Large": (96, 128)}}
    assert {a: (three[a], every[a]) for a in every if three[a] != every[a]} == missed.get(sweep_file, {})
    five = sampled(_evenly_spaced_and_top(5))
    assert (five == every) == (sweep_file != "sweep-11waves-h200.json")


#: per recorded sweep: probes of every AIR's tune with margin 0 and with PRUNE_MARGIN (the build's
#: representatives sampled), and what margin 0.08 chooses differently (AIR: (exact, 0.08))
#: per sweep: the AIRs whose choice a margin of 0.08 changes, {AIR: (exact choice, 0.08's)}
MARGIN_SWEEPS = {"sweep-11waves-h200.json": {"SpecifiedRanges": (128, 96)},
                 "sweep-3waves-h200.json": {"SpecifiedRanges": (192, 0)},
                 "sweep-5airs-h200.json": {"SpecifiedRanges": (192, 0)},
                 "sweep-2048-h200.json": {"SpecifiedRanges": (192, 96)}}


@requires("pk")
@pytest.mark.parametrize("sweep_file", sorted(MARGIN_SWEEPS))
def test_the_prune_margin_keeps_every_choice_on_the_recorded_sweeps(sweep_file: str) -> None:
    """PRUNE_MARGIN = 0.05 (a plan that could beat the best by at most 5% at full
    occupancy is not compiled) chooses on every AIR of the four H200 sweeps what the exact search
    (margin 0) chooses, from fewer probes (4-14%); 0.06 or more takes SpecifiedRanges at 96 ops per
    chunk or as one kernel instead (1.03x-1.85x slower on the sweeps)."""
    from bench.replay_tune import q_irs, replay
    assert at.PRUNE_MARGIN == 0.05
    sweep = json.loads((ROOT / "tests" / "data" / sweep_file).read_text())
    irs = q_irs([ROOT / "provingkey-sample", *sorted(PK.glob("*/provingKey"))])

    def run(margin: float) -> dict[str, tuple[int, int]]:
        got = replay(sweep, irs, _sampler(), wave="2048" if "2048" in sweep_file else None, margin=margin)
        return {air.split("/")[-1]: (t.ops_per_chunk, len(t.probes)) for air, (t, _, _) in got.items()}
    exact, pruned, coarse = run(0.0), run(at.PRUNE_MARGIN), run(0.08)
    changed = MARGIN_SWEEPS[sweep_file]
    assert {a: c for a, (c, _) in pruned.items()} == {a: c for a, (c, _) in exact.items()}
    assert all(pruned[a][1] <= exact[a][1] for a in exact)
    assert sum(n for _, n in pruned.values()) < sum(n for _, n in exact.values())     # the margin saves probes
    assert {a: (exact[a][0], coarse[a][0]) for a in exact if coarse[a][0] != exact[a][0]} == changed


def test_the_tuner_takes_the_fastest_chunking_of_mid_size_synthetic_qs(tmp_path) -> None:
    """tests/data/sweep-midsize-h200.json: the synthetic Qs of 3,000 and 8,000 ops (`synth
    --large-ops`, 2,996 and 7,999 after the passes) built at every chunking up to 384 ops per chunk
    and timed on the H200 at 2^22 rows with uniform inputs (`SYNTH_OPS="3000 8000" KEYS=" "
    MAX_CHUNK=384 bash bench/gpu_round.sh OUT sweep`). Replayed as a build probes (the representatives' registers), with PRUNE_MARGIN as with margin 0, the tuner
    takes the fastest plan that does not spill (at the launcher's 2,048-block waves): 128 ops per
    chunk (26.37 ms; 192 27.34, 96 spills 24 B) from three probes (four while both neighbours of a
    probe were compiled at once: 256 too) and 192 (53.48 ms; 128 spills 24 B, 96 54.41) from three."""
    from bench.replay_tune import q_irs, replay
    from codegen.sample.synth import main as synth_main
    sweep = json.loads((ROOT / "tests" / "data" / "sweep-midsize-h200.json").read_text())
    for n, chosen in ((3000, 128), (8000, 192)):
        assert synth_main([str(tmp_path / f"k{n}"), "--large-ops", str(n)]) == 0
        irs = q_irs([tmp_path / f"k{n}"])
        one = {"results": [r for r in sweep["results"] if r["air"] == f"k{n}/Bench"]}
        assert len(one["results"]) == 8
        for margin in (0.0, at.PRUNE_MARGIN):
            [(t, row, best)] = replay(one, irs, _sampler(), wave="2048", margin=margin).values()
            assert t.ops_per_chunk == chosen == best["ops_per_chunk"] and row is best
            tried = [p.ops_per_chunk for p in t.probes]      # a few probes, each plan once
            assert chosen in tried and len(set(tried)) == len(tried) <= 4


@requires("pk")
def test_sampled_registers_choose_well_on_the_2048_wave_sweep() -> None:
    """tests/data/sweep-2048-h200.json: every chunking of every AIR of >= 60 Q ops of the sample and
    ../shared/pk at emitter 0.18.3, timed on the H200 at 2^22 rows (chunked plans at the
    launcher's 2048-block waves) with every chunk kernel's ptxas registers. Replayed through the
    tuner with only the representatives' registers known, as a build sees them: the fastest on the
    sample's Large (128 ops per chunk), within 8.5% on every AIR, 0.5% on average, and
    SpecifiedRanges in 2 chunks (its fastest). A sample of 3 evenly spaced chunks and the top
    estimate takes 96 for Large, 1.044x slower. A tuner that samples the three highest estimates and
    the last chunk, scales every other estimate by their median ratio and weighs WORD 0.41 and
    CHUNK 0.21 takes 64-op chunks for Large, 1.17x slower than the fastest."""
    import statistics
    from bench.replay_tune import q_irs
    from codegen.build.probes import fill_unprobed, representatives
    sweep = json.loads((ROOT / "tests" / "data" / "sweep-2048-h200.json").read_text())
    irs = q_irs([ROOT / "provingkey-sample", *sorted(PK.glob("*/provingKey"))])
    got = _replay_with_sampling(sweep, irs, representatives, fill_unprobed)
    assert len(got) == 19
    assert got["Large"][0] == 128 and got["Large"][1] == 1.0, got
    assert max(r for _, r in got.values()) <= 1.085, got
    assert statistics.mean(r for _, r in got.values()) <= 1.0045, got
    assert got["SpecifiedRanges"][1] == 1.0, got          # 2 chunks (at 128 or 192 ops: the same plan)
    three = _replay_with_sampling(sweep, irs, _evenly_spaced_and_top(3), fill_unprobed)
    assert three["Large"][0] == 96 and three["Large"][1] == pytest.approx(1.044, abs=0.005), three

    def old_reps(q, pl):
        if pl.n_chunks <= 6:
            return list(range(pl.n_chunks))
        est = at.estimated_regs(q, pl)
        return sorted(set(sorted(range(pl.n_chunks), key=lambda c: (-est[c], c))[:3]) | {pl.n_chunks - 1})

    def old_fill(q, pl, regs, probed):
        est = at.estimated_regs(q, pl)
        k = statistics.median(regs[c] / est[c] for c in probed if est[c] > 0)
        return [regs[c] if c in probed else min(at.MAX_REGS, round(est[c] * k)) for c in range(pl.n_chunks)]
    large = {"results": [r for r in sweep["results"] if r["air"].endswith("/Large")]}
    old = _replay_with_sampling(large, irs, old_reps, old_fill, at.CostModel(WORD=0.41, CHUNK=0.21))
    assert old["Large"][0] == 64 and old["Large"][1] > 1.15, old      # that tuner as a whole


@requires("nvcc")
def test_large_plans_probe_device_code_of_representatives_only(tmp_path) -> None:
    """The sample's Large (5,394 Q ops): every probe of a plan of more than PROBE_SAMPLE + 2
    chunks compiles one TU of PROBE_SAMPLE chunk kernels (for sm_90, the only target: as cc
    compiles, `-c -fatbin`, with stand-ins for its literals); tune.json records which. Each
    probe's chunks that could take a launch bound are compiled once more as the bounded twin cc
    would make (`with_twins`), and the probe counts a twin's registers where it spills nothing:
    Large then takes 128 ops per chunk (605 G on the H200, 1.08x its 96), without the twins
    (`chunk_bounds` off) 96."""
    import os
    from codegen.build.probes import PROBE_SAMPLE
    rel = ROOT / "provingkey-sample/synth/Basic/airs/Large/air/Large"
    launcher, log = _counting_launcher(tmp_path)
    os.environ["EXPS_CACHE_DIR"] = str(tmp_path / "cache")
    try:
        act_ir("k", str(rel) + ".starkinfo.json", str(rel) + ".expressionsinfo.json", str(tmp_path / "ir.json"),
               [], remove_stale=False)
        assert act_tune("k", str(tmp_path / "ir.json"), str(tmp_path / "tune.json"), str(tmp_path / "w"), [90],
                        None, launcher=[str(launcher)])
        assert act_tune("k", str(tmp_path / "ir.json"), str(tmp_path / "tune0.json"), str(tmp_path / "w0"), [90],
                        None, launcher=[str(launcher)], chunk_bounds=False)
    finally:
        os.environ.pop("EXPS_CACHE_DIR")
    t = json.loads((tmp_path / "tune.json").read_text())
    assert t["ops_per_chunk"] == 128
    t0 = json.loads((tmp_path / "tune0.json").read_text())
    assert t0["ops_per_chunk"] == 96
    every = log.read_text().splitlines()
    calls = [c for c in every if "-DEXPS_TWIN" not in c]
    twins = [c for c in every if "-DEXPS_TWIN" in c]
    # one compile per plan probed by either tune (the second's probes of the first's plans: cache hits)
    assert len(calls) == len({p["ops_per_chunk"] for p in t["probes"] + t0["probes"]}) >= 2
    assert 1 <= len(twins) <= len(t["probes"]) and all("-o k_qprobe_twin.o" in c for c in twins), twins
    assert all(" -c -fatbin " in c and "arch=compute_90,code=sm_90" in c and "k_qprobe.cu" in c
               for c in every), every
    assert set(t["sampled"]) == {str(p["ops_per_chunk"]) for p in t["probes"]}
    assert all(PROBE_SAMPLE <= len(v) <= PROBE_SAMPLE + 1 and v[0] == 0 for v in t["sampled"].values())
    assert t["ops_per_chunk"] in {p["ops_per_chunk"] for p in t["probes"] if p["spills"] == 0}
    assert "probed" not in t
    # its probes hold stand-ins for the literals, no literal of the key's but 0, 1 and p - 1 ...
    real = {int(a.value) for op in load_coverage(str(tmp_path / "ir.json"))[1].q.ops for a in op.args()
            if getattr(a, "kind", "") == "number"}
    texts = [p.read_text() for p in (tmp_path / "w").rglob("k_qprobe.cu")]
    assert all(not ({int(v) for v in re.findall(r"\b(\d+)ull\b", x)} & (real - set(at._KEPT_LITERALS)))
               for x in texts)
    # ... so after an edit of one of its constants every probe is an object-cache hit and the
    # choice is the same; a cold tune of the edited key (an empty cache) chooses the same too
    key = tmp_path / "edited"
    shutil.copytree(rel.parent, key)
    bk_bump(key, "Large")
    os.environ["EXPS_CACHE_DIR"] = str(tmp_path / "cache")
    try:
        act_ir("k", str(key / "Large.starkinfo.json"), str(key / "Large.expressionsinfo.json"),
               str(tmp_path / "ir2.json"), [], remove_stale=False)
        assert json.loads((tmp_path / "ir2.json").read_text())["content"] != \
            json.loads((tmp_path / "ir.json").read_text())["content"]
        assert act_tune("k", str(tmp_path / "ir2.json"), str(tmp_path / "tune2.json"), str(tmp_path / "w2"), [90],
                        None, launcher=[str(launcher)])
        assert not log.exists() or log.read_text() == "\n".join(every) + "\n"     # nothing compiled
        os.environ["EXPS_CACHE_DIR"] = str(tmp_path / "cold-cache")
        assert act_tune("k", str(tmp_path / "ir2.json"), str(tmp_path / "tune3.json"), str(tmp_path / "w3"), [90],
                        None, launcher=[])
    finally:
        os.environ.pop("EXPS_CACHE_DIR")
    for n in ("tune2.json", "tune3.json"):
        t2 = json.loads((tmp_path / n).read_text())
        assert (t2["ops_per_chunk"], t2["min_blocks"], t2["probes"]) == (t["ops_per_chunk"], t["min_blocks"], t["probes"])


def _report(**stores_loads: tuple[int, int]) -> dict:
    """A ptxas report (toolchain.parse_report's shape) of Q chunk kernels named by chunk index."""
    return {f"_Z24k{'0' * 16}_q_c{c[1:]}_kPK11StepsParams": {"90": {"registers": 64, "spill_stores": st,
                                                                   "spill_loads": ld}}
            for c, (st, ld) in stores_loads.items()}


def test_chunk_stats_counts_spills_above_the_slack_only():
    """A Q kernel that stores at most SPILL_SLACK_BYTES (8) counts as not spilling; one that stores
    more counts with all its stores and loads; the kernels of other names never count."""
    from codegen.build.probes import chunk_stats
    assert at.SPILL_SLACK_BYTES == 8
    pl = plan(q_of(TINY), 16)
    assert pl.n_chunks >= 3
    assert chunk_stats(pl, [_report(c0=(4, 4), c1=(8, 16))]) == ([64, 64] + [0] * (pl.n_chunks - 2), 0)
    assert chunk_stats(pl, [_report(c0=(4, 4), c1=(12, 20))])[1] == 32
    assert chunk_stats(pl, [_report(c0=(9, 9)), _report(c2=(0, 0))])[1] == 18
    other = {"_Z9exps_x_inv_kPK11StepsParams": {"90": {"registers": 40, "spill_stores": 100, "spill_loads": 100}}}
    assert chunk_stats(pl, [other]) == ([0] * pl.n_chunks, 0)


@needs_nvcc
def test_a_spill_within_the_slack_is_no_spill(tmp_path, monkeypatch):
    """ptxas trades a word or two of spill for one more block per SM (such a kernel, 80 registers
    and 4 B of spill, 1.21x faster as one kernel than the chunks a strict rule cut it into: the
    figures at autotune.SPILL_SLACK_BYTES). With nvcc 13 at sm_90 RangeCheckMix's single kernel is 122
    registers, and bounded to 3 blocks per SM ptxas fits 80 storing 8 B. Within the slack the bound
    is taken; with no slack the same bounded probe spills and the kernel stays unbounded."""
    from codegen.build import probes
    monkeypatch.setenv("EXPS_CACHE_DIR", str(tmp_path / "cache"))
    ir_json = tmp_path / "ir.json"
    act_ir("m", f"{RCMIX}.starkinfo.json", f"{RCMIX}.expressionsinfo.json", str(ir_json), [])

    def tuned(slack: int, name: str) -> dict:
        monkeypatch.setattr(probes, "SPILL_SLACK_BYTES", slack)
        out = tmp_path / name
        assert act_tune("m", str(ir_json), str(out), str(tmp_path / f"probe-{name}"), [90], None)
        return json.loads(out.read_text())

    strict, slack = tuned(0, "strict.json"), tuned(8, "slack.json")
    [b0] = [p for p in strict["probes"] if p["min_blocks"] == 3]
    [b8] = [p for p in slack["probes"] if p["min_blocks"] == 3]
    assert b0["spills"] > 0 and b0["cost"] is None and b0["regs"] == b8["regs"] == [80], strict
    assert b8["spills"] == 0 and b8["cost"] is not None, slack
    assert (strict["ops_per_chunk"], strict["min_blocks"]) == (0, 0), strict
    assert (slack["ops_per_chunk"], slack["min_blocks"]) == (0, 3), slack
    assert max(strict["probes"][0]["regs"]) > 80


# ------------------------------------------------------------------ the single kernel's launch bound
def _single(regs: int, spills: int = 0) -> at.TuneResult:
    return at.TuneResult(0, probes=[at.Probe(0, 1, 0, [regs], spills, math.inf if spills else 1.0)])


@pytest.mark.parametrize("regs, slack, tried", [
    (100, 0, True), (81, 0, True), (128, 0, True),     # 2 blocks per SM: try 3
    (80, 4, True), (80, 8, True),                      # 3 blocks with ptxas's own spill of a word
    (80, 0, False), (79, 4, False), (48, 0, False),    # 3 blocks already / the bound only costs
])
def test_the_single_kernel_is_bounded_where_it_can_gain(regs, slack, tried):
    """autotune.bound_single compiles the chosen single kernel once more as
    `__launch_bounds__(256, 3)` only above 80 registers, or at 80 with a spill within the slack
    (MultiRangeCheck2); it takes the bound when that compile does not spill."""
    ir = q_of(TINY)
    calls = []

    def bounded(b: int) -> tuple[list[int], int]:
        calls.append(b)
        return [80], 0

    res = _single(regs)
    p = at.bound_single(ir, res, bounded, slack)
    assert calls == ([3] if tried else [])
    assert res.min_blocks == (3 if tried else 0)
    assert (p is not None) == tried and len(res.probes) == 1 + tried
    if tried:
        assert (p.ops_per_chunk, p.regs, p.spills, p.min_blocks) == (0, [80], 0, 3)
        assert p.cost == at.cost(ir, plan(ir, 0), [80]) and res.to_json()["min_blocks"] == 3


def test_a_bound_that_spills_is_not_taken_and_chunked_plans_are_never_bounded():
    ir = q_of(TINY)
    res = _single(104)
    p = at.bound_single(ir, res, lambda b: ([80], 32))
    assert res.min_blocks == 0 and p.spills == 32 and p.cost == math.inf and res.probes[-1] is p
    assert res.to_json()["probes"][-1]["cost"] is None and res.to_json()["min_blocks"] == 0

    def never(b: int):
        raise AssertionError("compiled")

    chunked = at.TuneResult(48, probes=[at.Probe(48, 2, 3, [100, 100], 0, 1.0), at.Probe(0, 1, 0, [120], 0, 2.0)])
    assert at.bound_single(ir, chunked, never) is None and chunked.min_blocks == 0
    skipped = _single(100)
    skipped.skip = "no"
    assert at.bound_single(ir, skipped, never) is None
    estimated = at.TuneResult(0, probes=[at.Probe(0, 1, 0, [100], 0, 1.0, estimated=True)], how="estimated")
    assert at.bound_single(ir, estimated, never) is None


def test_slack_stores_counts_the_spills_chunk_stats_forgives():
    from codegen.build.probes import slack_stores
    pl = plan(q_of(TINY), 16)
    assert slack_stores(pl, [_report(c0=(4, 4), c1=(8, 16))]) == 12
    assert slack_stores(pl, [_report(c0=(0, 0), c1=(12, 20))]) == 0
    other = {"_Z9exps_x_inv_kPK11StepsParams": {"90": {"registers": 40, "spill_stores": 4, "spill_loads": 4}}}
    assert slack_stores(pl, [other]) == 0


L3 = PK / "lookup/provingKey/lookup/Lookup/airs/Lookup3/air/Lookup3"
L2_12 = PK / "lookup/provingKey/lookup/Lookup/airs/Lookup2_12/air/Lookup2_12"
RCMIX = PK / "range_check/provingKey/range_check/RangeCheckMix/airs/RangeCheckMix/air/RangeCheckMix"
RC4 = PK / "range_check/provingKey/range_check/RangeCheck4/airs/RangeCheck4/air/RangeCheck4"


@needs_nvcc
@requires("pk")
@pytest.mark.parametrize("base, bound", [(L3, 3), (L2_12, 3), (RC4, 0)], ids=["Lookup3", "Lookup2_12", "RC4"])
def test_the_tune_bounds_a_single_kernel_with_real_nvcc(tmp_path, monkeypatch, base, bound):
    """nvcc 13, sm_90: Lookup3's single kernel is 84 registers (2 blocks of 256 per
    SM), bounded to 3 blocks 80 and no spill; Lookup2_12's is 80 with 24 B spilled (ptxas's own
    trade for 3 blocks: the tune compiles it bounded at once, 80 and none, and no chunking's floor
    comes near it); RangeCheck4's is 102,
    bounded it spills and keeps its kernel. The bound is the twin of the kernel's TU, which cc
    compiles from source; the kernel as emitted is unbounded, the same text as the tune's first
    probe."""
    from codegen.build.actions import act_cc, act_emit
    launcher, log, ir_json, tune_json, man, content, settings = _tuned_as_cc(tmp_path, monkeypatch, "m", base)
    t = json.loads(tune_json.read_text())
    assert t["ops_per_chunk"] == 0 and t["min_blocks"] == bound, t
    natural, bounded = t["probes"][0], t["probes"][-1]
    assert (natural["ops_per_chunk"], natural["min_blocks"], bounded["ops_per_chunk"], bounded["min_blocks"]) == (0, 0, 0, 3)
    assert [p["min_blocks"] for p in t["probes"]].count(3) == 1
    assert max(natural["regs"]) >= 80 and max(bounded["regs"]) <= 80
    assert (bounded["spills"] == 0) == (bound == 3)
    # Lookup2_12: unbounded, ptxas fits 3 blocks with 24 B spilled; bounded it does not
    # spill, and is compiled at once (not after a 64-op chunking of cost 253 that the bounded
    # kernel's 205 must beat; every chunking's floor_cost is >= 247)
    assert (natural["spills"] > 0) == (base == L2_12)
    assert [(p["ops_per_chunk"], p["min_blocks"]) for p in t["probes"]] == [(0, 0), (0, 3)]
    if base == L2_12:
        q = ir_from_json(json.loads(ir_json.read_text())["q"])
        assert min(at.floor_cost(q, pl) for c, pl in at.candidate_plans(q)[0].items() if c) > bounded["cost"]
    n_tune = len(log.read_text().splitlines())
    assert act_emit("m", str(ir_json), str(tune_json), str(man.parent / "src"), str(man), settings)
    m = json.loads(man.read_text())
    assert m["min_blocks"] == bound
    [q_tu] = [n for n in m["files"] if n.startswith("m_q0")]
    lines = (man.parent / "src" / q_tu).read_text().splitlines()
    [k] = [i for i, ln in enumerate(lines) if re.match(r"k[0-9a-f]{16}_q_c0_k\(", ln)]
    assert lines[k - 1] == "__global__ void __launch_bounds__(256)"
    assert [ln for ln in lines if "__launch_bounds__(256, " in ln] == ["__global__ void __launch_bounds__(256, EXPS_B_0)"]
    assert [(w["tu"], w.get("blocks")) for w in m["twins"]] == ([(q_tu, 3)] if bound else [])
    # cc: the TU and its twin are the tune's compiles (object-cache hits), the twin taken where bound
    assert act_cc("m", str(man), str(tmp_path / "obj"), str(tmp_path / "objs.json"), [90], [], [],
                  launcher=[str(launcher)])
    objs = json.loads((tmp_path / "objs.json").read_text())
    assert objs["bounded"] == ({"0": 3} if bound else {})
    cc = log.read_text().splitlines()[n_tune:]
    assert not [x for x in cc if "/m_q0" in x], cc      # the TU and its twin: the tune's compiles


@needs_nvcc
@requires("pk")
def test_a_bounded_single_kernel_is_its_tus_twin_and_cc_compiles_nothing(tmp_path, monkeypatch):
    """Without a compiler launcher: the tune's bounded probe of Lookup3's single kernel is the twin
    cc makes of the kernel's TU; cc then takes the TU and its twin from the object cache (no
    compile), and the table launches the twin."""
    from codegen.build.actions import act_cc, act_emit
    monkeypatch.setenv("EXPS_CACHE_DIR", str(tmp_path / "cache"))
    ir_json, tune_json, man = tmp_path / "ir.json", tmp_path / "tune.json", tmp_path / "k" / "manifest.json"
    settings = {"cap": 0, "expr_cap": 0, "slots_cap": 1 << 20}
    act_ir("m", f"{L3}.starkinfo.json", f"{L3}.expressionsinfo.json", str(ir_json), [])
    assert act_tune("m", str(ir_json), str(tune_json), str(tmp_path / "probe"), [90], None,
                    settings=settings)
    assert json.loads(tune_json.read_text())["min_blocks"] == 3
    assert act_emit("m", str(ir_json), str(tune_json), str(man.parent / "src"), str(man), settings)
    m = json.loads(man.read_text())
    [q_tu] = [n for n in m["files"] if n.startswith("m_q0")]
    assert act_cc("m", str(man), str(tmp_path / "obj"), str(tmp_path / "objs.json"), [90], [], [])
    objs = json.loads((tmp_path / "objs.json").read_text())
    assert objs["bounded"] == {"0": 3}
    assert objs["hits"] == 1        # its TU, the tune's (the generic inverse kernel's: cc's first)
    [twin] = [v for n, v in objs["twin_reports"][q_tu].items() if re.search(r"_q_c0_kbPK", n)]
    assert [int(st["registers"]) <= 80 and st["entry"] for st in twin.values()] == [True]


@pytest.mark.parametrize("field, bad", [("min_blocks", "3); int evil("), ("min_blocks", -1), ("min_blocks", 9),
                                        ("min_blocks", 2.5), ("min_blocks", True), ("min_blocks", None),
                                        ("ops_per_chunk", "64"), ("ops_per_chunk", -1), ("ops_per_chunk", None)])
def test_a_tune_json_emit_cannot_take_is_removed_with_the_kernels_so(tmp_path, field, bad):
    """`min_blocks` reaches the kernel's text: emit takes only a whole number of blocks an SM can
    hold (0-8), and a whole number of ops per chunk, and names the file and the field otherwise.
    It removes that tune.json, so that the next build tunes again, and the kernel's `.so` files
    (a failed AIR leaves no `.so` behind); `doit emit` (no .so paths) leaves the provingKey alone."""
    from codegen.build.actions import act_emit
    ir_json, tune_json, man = tmp_path / "ir.json", tmp_path / "tune.json", tmp_path / "k" / "manifest.json"
    act_ir("tiny", f"{TINY}.starkinfo.json", f"{TINY}.expressionsinfo.json", str(ir_json), [])
    want = "not a whole number from 0 to 8" if field == "min_blocks" else "not a whole number of ops"
    for so_paths in ([str(tmp_path / "Tiny.exps.so")], None):
        so = tmp_path / "Tiny.exps.so"
        so.write_bytes(b"\x7fELF")
        tune = {"format": 1, "key": "tiny", "ops_per_chunk": 0, "min_blocks": 0, "skip": "", "probes": []}
        tune_json.write_text(json.dumps({**tune, field: bad}))
        with pytest.raises(RuntimeError, match=rf"tune\.json: '{field}' is .*{want}: removed it"):
            act_emit("tiny", str(ir_json), str(tune_json), str(man.parent / "src"), str(man),
                     {"cap": 0, "expr_cap": 0, "slots_cap": 1 << 20}, so_paths)
        assert not tune_json.exists() and so.exists() == (so_paths is None)
        assert not (man.parent / "src").exists() or not any((man.parent / "src").iterdir())


def _chunked_after_a_spilling_single(regs: int, single_spill: int, chunk_cost: float) -> at.TuneResult:
    return at.TuneResult(32, probes=[at.Probe(0, 1, 0, [regs], single_spill, math.inf),
                                     at.Probe(32, 2, 9, [40, 48], 0, chunk_cost)])


@pytest.mark.parametrize("n_ops, regs, spill, chunk_cost, bounded_spill, taken", [
    (39, 80, 28, 1e9, 0, True),       # under SINGLE_ONLY_BELOW: one kernel when one does not spill
    (39, 80, 28, 1e9, 16, False),     # the bound spills too: the chunks stay
    (39, 72, 28, 1e9, 0, None),       # spilled below 80 registers: not ptxas fitting 3 blocks
    (39, 80, 0, 1e9, 0, None),        # (a single kernel with no spill that lost to chunks)
    (100, 80, 28, 1e9, 0, True),      # a larger Q: the bounded kernel the cheaper by the model
    (100, 80, 28, 1.0, 0, False),     # ... or not
])
def test_a_single_kernel_that_spilled_is_bounded_where_chunks_were_chosen(n_ops, regs, spill, chunk_cost,
                                                                           bounded_spill, taken):
    """bound_single, second case: the unbounded single kernel spilled at
    >= 80 registers (ptxas fitting 3 blocks by itself) and the tune cut the Q; the bounded kernel
    replaces the chunks when it does not spill and the Q is small or the model ranks it first."""
    ir = q_of(TINY) if n_ops == 39 else q_of(SAMPLE / "Rec/airs/Shared/recursive1/Shared")
    assert (len(ir.ops) < at.SINGLE_ONLY_BELOW) == (n_ops == 39)
    calls = []
    res = _chunked_after_a_spilling_single(regs, spill, chunk_cost)

    def bounded(b: int) -> tuple[list[int], int]:
        calls.append(b)
        return [80], bounded_spill
    p = at.bound_single(ir, res, bounded)
    assert calls == ([] if taken is None else [3]) and (p is None) == (taken is None)
    assert (res.ops_per_chunk, res.min_blocks) == ((0, 3) if taken else (32, 0))


@pytest.mark.parametrize("base", [TINY, MEDIUM, SAMPLE / "Rec/airs/Shared/recursive1/Shared"], ids=["Tiny", "Medium", "Shared"])
@pytest.mark.parametrize("margin", [0.0, at.PRUNE_MARGIN])
def test_the_bounded_single_kernel_first_chooses_as_after_the_search_from_fewer_compiles(base, margin):
    """tune(compile_bounded=...) compiles the single kernel bounded as soon as its probe
    spills at >= 80 registers, and a bounded kernel that does not spill is a candidate from then
    on. Against the search without it followed by bound_single (which compiled the same bounded
    kernel in the same cases, after the search), over single kernels that spill 0, 8 or 24 B,
    chunk registers rising with their ops at several rates, bounded kernels of 64-80 registers that
    spill or not: every choice the same (chunking, bound, skip), never a compile more, and fewer
    where the bounded kernel leaves the chunkings behind."""
    q = q_of(base)
    n = len(q.ops)
    saved = 0
    for a, b, single_spill, bregs, bspill in itertools.product([20, 40, 60], [2, 4], [0, 8, 24], [64, 80], [0, 16]):
        def compile_plan(pl: Plan, log: list) -> tuple[list[int], int]:
            log.append(pl.ops_per_chunk)
            if pl.ops_per_chunk == 0:
                return [max(80, a + n // b)], single_spill + (64 if a + n // b > 255 else 0)
            regs = [min(255, a + (e - s) // b) for s, e in pl.chunks]
            return regs, sum(64 for r in regs if r >= 255)

        def bounded(blocks: int, log: list) -> tuple[list[int], int]:
            log.append(("bounded", blocks))
            return [bregs], bspill
        after: list = []
        res = at.tune(q, lambda pl: compile_plan(pl, after), margin=margin)
        at.bound_single(q, res, lambda x: bounded(x, after))
        first: list = []
        res_b = at.tune(q, lambda pl: compile_plan(pl, first), margin=margin, compile_bounded=lambda x: bounded(x, first))
        assert at.bound_single(q, res_b, lambda x: bounded(x, first)) is None or not single_spill
        case = (a, b, single_spill, bregs, bspill)
        assert (res_b.ops_per_chunk, res_b.min_blocks, res_b.skip) == (res.ops_per_chunk, res.min_blocks, res.skip), case
        assert len(first) <= len(after) and first.count(("bounded", 3)) <= 1, (case, first, after)
        saved += len(after) - len(first)
    # compiles saved over the 72 cases (Medium's first probe is a chunking, whose search the
    # bounded kernel, tried when the search gets to the single kernel, leaves as it was)
    assert saved == {"Tiny": 24, "Medium": 0, "Shared": 40}[base.name], saved
