"""Per-chunk launch bounds (codegen/build/bounds.py): which chunk kernels get a bounded
twin, which twins the launch table takes, and that the table, the twin compile and the .so agree.
The rules are restated here from the CUDA occupancy arithmetic (65,536 registers per SM, allocated
per thread in steps of 8, 256-thread blocks, at most 2,048 threads), not read from the code."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from codegen.build import actions, bounds, toolchain
from codegen.build import kernelcc
from codegen.build.cache import ObjectCache
from codegen.coverage import cover
from codegen.discover import discover
from codegen import emit
from codegen.emit import KernelSource, render, tu_kernels, tu_twins
from codegen.model import load_air
from codegen.plan import plan
from require import cuobjdump as cuobjdump_path, require

SAMPLE = Path(__file__).resolve().parent.parent / "provingkey-sample"


def _blocks(regs: int) -> int:
    per_thread = max(8, -(-regs // 8) * 8)
    return min(65536 // (per_thread * 256), 2048 // 256)


def _squeezable(regs: int, squeeze: float = 1.6) -> bool:
    """Whether a chunk of `regs` registers keeps more than 1 / squeeze of them under the bound one
    block above them (2 blocks: 128 registers, 3: 80)."""
    b = _blocks(regs) + 1
    return b <= 3 and regs < squeeze * {2: 128, 3: 80}[b]


def _cand(base: dict, w: dict) -> dict[int, int]:
    """{chunk: min blocks} of twin `w`'s chunks a bound could help (bounds.candidates, written out):
    below 3 blocks, no spill beyond a word, fewer than 1.6 times the bound's registers."""
    out = {}
    for c, s, _ in w["chunks"]:
        regs, stores = base[s]["sm_90"]["registers"], base[s]["sm_90"]["spill_stores"]
        if stores <= 8 and _squeezable(regs):
            out[c] = _blocks(regs) + 1
    return out


def _twin(*chunks: int) -> dict:
    return {"tu": "t.cu", "lib": 3, "chunks": [[c, f"s{c}", f"s{c}b"] for c in chunks]}


def _st(regs: int, stores: int = 0, entry: bool = True) -> dict:
    return {"registers": regs, "spill_stores": stores, "spill_loads": stores, "entry": entry}


@pytest.mark.parametrize("regs,want", [(32, None), (40, None), (57, None), (64, None), (65, None), (80, None),
                                       (81, 3), (96, 3), (126, 3), (127, 3), (128, None), (129, 2), (168, 2),
                                       (204, 2), (205, None), (255, None)])
def test_a_chunk_is_a_candidate_one_block_above_its_registers(regs: int, want) -> None:
    """One block per SM more than its registers allow, up to 3 (80 registers): a kernel already at
    3 or more blocks is left alone, and so is one that would keep less than 1 / 1.6 of its registers
    (bounds.MAX_SQUEEZE: 128 -> 80, 205 -> 128)."""
    got = bounds.candidates(_twin(0), {"s0": {"sm_90": _st(regs)}}).get(0)
    assert got == want
    if want is not None:
        assert want == _blocks(regs) + 1


def test_the_squeeze_limit_skips_only_twins_that_spilled_in_the_recorded_builds() -> None:
    """tests/data/twins.json: every bounded twin of a chunk that cold builds of the sample,
    ../shared/pk and the 3,000- and 8,000-op synthetic Qs compiled without the limit. The
    limit (bounds.MAX_SQUEEZE) leaves out 30 of the 99 chunk twins, each of which spilled more than
    TWIN_SPILL_BYTES (none was taken), and keeps all 30 that were taken; 1.55 would lose two."""
    import json
    rows = json.loads((SAMPLE.parent / "tests" / "data" / "twins.json").read_text())["twins"]
    chunked = [r for r in rows if r["regs"] > 80]
    assert len(chunked) == 99 and sum(r["taken"] for r in chunked) == 30
    for r in chunked:
        assert (0 in bounds.candidates(_twin(0), {"s0": {"sm_90": _st(r["regs"])}})) == \
            _squeezable(r["regs"], bounds.MAX_SQUEEZE)
    skipped = [r for r in chunked if not _squeezable(r["regs"], bounds.MAX_SQUEEZE)]
    assert len(skipped) == 30 and not any(r["taken"] for r in skipped)
    assert all(r["twin_spill_stores"] > bounds.TWIN_SPILL_BYTES for r in skipped)
    assert sum(r["taken"] for r in chunked if not _squeezable(r["regs"], 1.55)) == 2


def test_candidates_take_the_arch_with_most_registers_and_skip_spilling_kernels() -> None:
    rep = {"s0": {"sm_80": _st(70), "sm_90": _st(100)},          # 2 blocks on sm_90: bound 3
           "s1": {"sm_90": _st(100, stores=12)},                 # spills already: never bounded
           "s2": {"sm_90": _st(100, stores=8)},                  # ptxas's own trade of a word: still a candidate
           "s3": {"sm_90": _st(72)}}                             # 3 blocks: left alone
    assert bounds.candidates(_twin(0, 1, 2, 3, 4), rep) == {0: 3, 2: 3}   # (chunk 4: no report)


def test_a_twin_is_taken_where_it_spills_nothing_on_every_arch() -> None:
    base = {f"s{c}": {"sm_80": _st(100), "sm_90": _st(100)} for c in range(6)}
    twin = {"s0b": {"sm_80": _st(80), "sm_90": _st(80)},
            "s1b": {"sm_80": _st(80), "sm_90": _st(80, stores=16)},   # spills on one arch
            "s2b": {"sm_80": _st(80, stores=8), "sm_90": _st(80)},    # ptxas's trade: taken
            "s3b": {"sm_90": _st(80)},                                # missing an arch
            "s4b": {"sm_80": _st(80), "sm_90": _st(80, entry=False)},  # not an entry
            "s5b": {"sm_80": _st(80), "sm_90": _st(80)}}              # not a candidate
    cand = {0: 3, 1: 3, 2: 3, 3: 3, 4: 3}
    assert bounds.taken(_twin(0, 1, 2, 3, 4, 5), cand, twin, base) == [0, 2]
    assert bounds.twin_flags({5: 2, 0: 3}) == ("-DEXPS_TWIN", "-DEXPS_B_0=3", "-DEXPS_B_5=2")
    assert bounds.table_flags([4, 3], [7, 2]) == ("-DEXPS_TWIN_TU_3=1", "-DEXPS_TWIN_TU_4=1",
                                                  "-DEXPS_TWIN_C2=1", "-DEXPS_TWIN_C7=1")


def test_a_single_kernel_has_a_twin_only_where_its_tune_bounded_it() -> None:
    """A single Q kernel: no twin; bounded by its tune (`min_blocks`), its TU's one twin
    with that bound, the kernel itself emitted unbounded (the same TU text either way)."""
    [p] = [p for p in discover(SAMPLE) if p.base == "Tiny"]
    cov = cover(*load_air(p.starkinfo, p.expressions))
    ks = KernelSource(p.key, cov.q, plan(cov.q, 0), cov.exprs, "ab" * 32)
    assert tu_twins(ks) == []
    files = render(ks)
    assert "EXPS_TWIN" not in files[f"{p.key}_abi.cpp"]
    tb = KernelSource(p.key, cov.q, plan(cov.q, 0), cov.exprs, "ab" * 32, min_blocks=3)
    bounded = render(tb)
    [tu] = [n for n in files if n.endswith(".cu") and "_q0" in n]
    assert bounded[tu] == files[tu] and "__launch_bounds__(256, 3)" not in files[tu]
    sym, twin_sym = emit.q_symbols(tb, 0)
    assert tu_twins(tb) == [{"tu": tu, "lib": len(emit.device_tus(files)), "chunks": [[0, sym, twin_sym]], "blocks": 3}]
    abi = bounded[f"{p.key}_abi.cpp"]
    assert f'#if EXPS_TWIN_C0\n    {{{len(emit.device_tus(files))}, "{twin_sym}"' in abi


@pytest.mark.requires("nvcc", "binutils")
def test_cc_takes_exactly_the_twins_that_spill_nothing(tmp_path) -> None:
    """The sample's Medium at 96 ops per chunk (6 chunk kernels: chunks 0-4 in one TU, the last
    alone, the expressions in a TU of their own): cc compiles each TU, then the twin of each TU of
    chunk kernels with the candidates the emitted kernels' registers give; the table names a twin's
    kernel for exactly the candidates whose twin stores nothing, from the twin's slot, and the
    .so's fatbins hold those twins' kernels and nothing of a twin not taken. (At 64 ops per chunk,
    since bounds.MAX_SQUEEZE, every candidate's twin is taken; at 80 none is.)"""
    [p] = [p for p in discover(SAMPLE) if p.base == "Medium"]
    cov = cover(*load_air(p.starkinfo, p.expressions))
    ks = KernelSource(p.key, cov.q, plan(cov.q, 96), cov.exprs, "cd" * 32)
    files = render(ks)
    twins = tu_twins(ks)
    n = ks.plan.n_chunks
    assert n == 6 and [[c for c, _, _ in w["chunks"]] for w in twins] == [[0, 1, 2, 3, 4], [5]]
    assert [w["lib"] for w in twins] == [4, 5]      # after the 4 device TUs: q0, q1, x0, xinv
    src = tmp_path / "src"
    kernelcc.stage_sources(files, src)
    got = kernelcc.compile_kernel(src, list(files), tu_kernels(ks), tmp_path / "obj", [90],
                                 ObjectCache(tmp_path / "cache"), [], twins=twins)
    want_cand, want, lib_of = {}, {}, {}
    for i, w in enumerate(twins):
        base, twin_rep = got["reports"][w["tu"]], got["twin_reports"].get(w["tu"], {})
        cand = _cand(base, w)
        want_cand.update(cand)
        lib_of.update({c: i for c, _, _ in w["chunks"]})
        # the twin holds exactly the candidates, each within its bound's registers
        assert sorted(m for m, st in twin_rep.items() if st["sm_90"]["entry"]) == \
            sorted(tb for c, _, tb in w["chunks"] if c in cand)
        for c, _, tb in w["chunks"]:
            if c in cand:
                assert twin_rep[tb]["sm_90"]["registers"] <= 65536 // (256 * cand[c])
                if twin_rep[tb]["sm_90"]["spill_stores"] <= 8:
                    want[c] = cand[c]
    assert want_cand, "Medium's chunks are expected to leave room for a bound"
    assert got["bounded"] == want and want, "a twin taken and one not, on nvcc 13 at least"
    assert want != want_cand
    # the first TU's twin is that TU compiled from source with the bounds' defines: the same
    # report and, kernel for kernel, the same SASS as that compile made in another cache
    w = twins[0]
    cand0 = {c: b for c, b in want_cand.items() if lib_of[c] == 0}
    require("cuobjdump")
    by_src = kernelcc.compile_tus([src / w["tu"]], tmp_path / "srcobj", kernelcc.compile_options([90]),
                                 ObjectCache(tmp_path / "cache2"), [],
                                 extra_flags={w["tu"]: bounds.twin_flags(cand0)}, suffix="_twin")
    assert by_src[w["tu"]][1] == got["twin_reports"][w["tu"]]

    def sass(obj: str) -> dict[str, str]:
        out = subprocess.run([cuobjdump_path(), "-sass", obj], capture_output=True, text=True, check=True).stdout
        fns = re.split(r"\n\s*Function : ", out)[1:]
        return {f.split("\n", 1)[0].strip(): re.sub(r"/\*[0-9a-f]{4}\*/", "", f.split("\n", 1)[1]) for f in fns}
    twin_obj = tmp_path / "obj" / (Path(w["tu"]).stem + "_twin.o")
    a, b = sass(str(twin_obj)), sass(by_src[w["tu"]][0])
    assert sorted(a) == sorted(b) == sorted(tb for c, _, tb in w["chunks"] if c in cand0)
    assert a == b
    # the table as compiled: the preprocessed text names the twin's kernel for those chunks only
    taken = sorted({twins[lib_of[c]]["lib"] for c in want})
    flags = bounds.table_flags(taken, sorted(want))
    pre = subprocess.run(["g++", "-E", "-P", "-std=c++17", *flags, f"-I{src}", str(src / f"{p.key}_abi.cpp")],
                         capture_output=True, text=True, check=True).stdout
    q = re.findall(r'\{(\d+), "(_Z\d+k[0-9a-f]{16}_q_c(\d+)_kb?)PK11StepsParams', pre)
    assert [(int(lib), int(c), m.endswith("_kb")) for lib, m, c in q] == \
        [((twins[lib_of[c]]["lib"] if c in want else lib_of[c]), c, c in want) for c in range(n)]
    assert [f"f{lib}.fatbin" in pre for lib in (4, 5)] == [lib in taken for lib in (4, 5)]
    # and the .so holds the twins' kernels under the names the table looks up
    so = toolchain.link_shared([Path(o) for o in got["objects"]], tmp_path / "k.exps.so",
                               kernelcc.compile_options([90]), launcher=[])
    out = subprocess.run([cuobjdump_path(), "-sass", str(so)], capture_output=True, text=True, check=True).stdout
    names = re.findall(r"Function : (\S+)", out)
    assert sorted(m for m in names if m.endswith("_kbPK11StepsParamsPmS2_mmmmmmm9exps_offs")) == \
        sorted(tb for w in twins for c, _, tb in w["chunks"] if twins[lib_of[c]]["lib"] in taken and c in want_cand)


@pytest.mark.requires("nvcc")
def test_a_bounded_single_kernels_twin(tmp_path) -> None:
    """A single kernel its tune bounded: cc compiles its TU's twin from source with the tune's
    bound (the template's `_kb` form of the single kernel under EXPS_TWIN); the bound is taken
    and the twin holds the bounded kernel only."""
    [p] = [p for p in discover(SAMPLE) if p.base == "Tiny"]
    cov = cover(*load_air(p.starkinfo, p.expressions))
    ks = KernelSource(p.key, cov.q, plan(cov.q, 0), cov.exprs, "ef" * 32, min_blocks=3)
    files = render(ks)
    [w] = twins = tu_twins(ks)
    src = tmp_path / "src"
    kernelcc.stage_sources(files, src)
    got = kernelcc.compile_kernel(src, list(files), tu_kernels(ks), tmp_path / "obj", [90],
                                 ObjectCache(tmp_path / "cache"), [], twins=twins)
    assert got["bounded"] == {0: 3}
    entries = {n: st["sm_90"] for n, st in got["twin_reports"][w["tu"]].items() if st["sm_90"]["entry"]}
    assert list(entries) == [w["chunks"][0][2]] and entries[w["chunks"][0][2]]["registers"] <= 80


def test_chunk_bounds_off_emits_no_twins_and_reruns_emit(tmp_path) -> None:
    """`chunk_bounds=0` / `--no-chunk-bounds`: the emit task gets it (and its up-to-date check keys
    it, so switching reruns emit and, through the manifest, cc) and writes no twins to the manifest."""
    from codegen.tasks import Settings, exps_tasks
    tasks = {s: [t for t in exps_tasks(Settings(pk=SAMPLE, build=tmp_path / "b", chunk_bounds=s, arch="90"))
                 if t.get("basename") == "exps-emit" and "e624" in (t.get("name") or "")] for s in (True, False)}
    [on], [off] = tasks[True], tasks[False]
    assert on["actions"][0][1][-1] is True and off["actions"][0][1][-1] is False
    assert on["uptodate"][0].config["chunk_bounds"] is True and off["uptodate"][0].config["chunk_bounds"] is False
    # the action itself, on the sample's Medium at a fixed chunking
    [p] = [p for p in discover(SAMPLE) if p.base == "Medium"]
    ir, tune = tmp_path / "ir.json", tmp_path / "tune.json"
    assert actions.act_ir(p.key, str(p.starkinfo), str(p.expressions), str(ir), [])
    assert actions.act_tune(p.key, str(ir), str(tune), str(tmp_path / "probe"), [], 80)
    for flag, n in ((True, 2), (False, 0)):     # (two TUs of chunk kernels: one twin each)
        man = tmp_path / f"manifest-{flag}.json"
        assert actions.act_emit(p.key, str(ir), str(tune), str(tmp_path / "src"), str(man), {}, None, flag)
        assert len(actions.read_json(man)["twins"]) == n
    # a single kernel its tune bounded keeps its twin: that bound is the tune's decision, not cc's
    [t] = [p for p in discover(SAMPLE) if p.base == "Tiny"]
    assert actions.act_ir(t.key, str(t.starkinfo), str(t.expressions), str(ir), [])
    tune.write_text(json.dumps({"format": 1, "key": t.key, "ops_per_chunk": 0, "min_blocks": 3, "skip": "",
                                "probes": []}))
    for flag in (True, False):
        man = tmp_path / f"manifest-tiny-{flag}.json"
        assert actions.act_emit(t.key, str(ir), str(tune), str(tmp_path / "src-tiny"), str(man), {}, None, flag)
        assert [w.get("blocks") for w in actions.read_json(man)["twins"]] == [3]


@pytest.mark.parametrize("bad", [
    {"tu": "../../etc/passwd", "lib": 2, "chunks": [[0, "s0", "s0b"]]},      # not a device TU of the kernel
    {"tu": "k_q0.cu", "lib": "2; rm -rf /", "chunks": [[0, "s0", "s0b"]]},   # a slot that is not a number
    {"tu": "k_q0.cu", "lib": 2, "chunks": [["0 -DX=1", "s0", "s0b"]]},      # a chunk that is not a number
    {"tu": "k_q0.cu", "lib": 2, "chunks": [[-1, "s0", "s0b"]]},
    {"tu": "k_q0.cu", "lib": 2},
    "k_q0.cu",
])
def test_a_broken_manifest_twin_is_refused_before_any_compile(tmp_path, bad) -> None:
    """What cc reads from the manifest's `twins` becomes a path and -D flags: anything but a device
    TU of the kernel with whole chunk numbers is an error naming the manifest, nothing compiled."""
    with pytest.raises(kernelcc.KernelNameError, match=r"manifest.json: 'twins' entry .* rerun the build"):
        kernelcc.compile_twins(tmp_path / "src", [bad], {"k_q0.cu": {}}, tmp_path / "obj",
                              toolchain.CompileOptions((90,), mode="fatbin"), ObjectCache(tmp_path / "cache"), [])
    assert not (tmp_path / "obj").exists()
