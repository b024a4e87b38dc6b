"""bench/h14_tables.py: issue #14's must-show tables and verdicts from a round's JSON (no GPU)."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import h14_tables as H  # noqa: E402

DATA = REPO / "bench" / "data"
ANCHORS_TEXT = """\
| AIR | ops | chunks/slots | regs | time ms | floor ms | floor/time |
| --- | --- | --- | --- | --- | --- | --- |
| intermediate_sums/Intermediates | 468 | 1/0 | 255 | 37.375 | 1.587 | 4% |
| intermediate_sums/Intermediates (forced 64-op chunks) | 468 | 8/18 | 72 | 13.146 | 1.587 | 12% |
| fibonacci-square/U8Air | 16 | 1/0 | 40 | 0.320 | 0.103 | 32% |
| lookup/Lookup0 | 68 | 1/0 | 72 | 1.016 | 0.206 | 20% |
"""


def _run(*airs: tuple[str, int, float, float, float | None]) -> dict:
    return {"results": [{"rel": rel, "ops": ops, "gen_ms": gen, "floor_ms": floor, "before_ms": before}
                        for rel, ops, gen, floor, before in airs]}


def test_anchors_take_each_airs_unforced_row(tmp_path: Path) -> None:
    p = tmp_path / "a.md"
    p.write_text(ANCHORS_TEXT)
    assert H.anchors(p) == {"intermediate_sums/Intermediates": 37.375, "fibonacci-square/U8Air": 0.32,
                            "lookup/Lookup0": 1.016}


@pytest.mark.requires("pk")
def test_the_real_anchors_name_36_airs() -> None:
    a = H.anchors(H.ANCHORS)
    assert len(a) == 36
    assert a["intermediate_sums/Intermediates"] == 37.375 and a["range_check/RangeCheck4"] == 1.929


def test_session_18s_round_gives_its_published_figures(tmp_path: Path) -> None:
    """The stored run of docs/BENCHMARKS.md "Kernel speed I ... 0.19.1 -> 0.20.0": 35 small Qs at a
    median 40% of the floor, none slower than the original's (against the three anchors here: U8Air
    0.179 ms vs 0.320, Lookup0 0.484 vs 1.016)."""
    p = tmp_path / "a.md"
    p.write_text(ANCHORS_TEXT)
    lines, s = H.q_table(json.loads((DATA / "q-final-h200-s18.json").read_text()), H.anchors(p))
    assert s["airs"] == 35 and round(s["median_share"], 4) == 0.4022 and s["slower_than_original"] == []
    assert round(s["median_speedup"], 4) == 1.0118
    row = next(x for x in lines if x.startswith("| fibonacci-square/U8Air |"))
    assert row == "| fibonacci-square/U8Air | 16 | 0.186 | 0.179 | 1.04x | 0.102 | 57% | 0.320 | 1.79x |"
    assert lines[-1].endswith("Must-show not met.") and "median **40%**" in lines[-1]


def test_verdicts() -> None:
    anc = {"a/X": 1.0, "b/Y": 1.0}
    met = _run(("a/A/airs/X/air/X", 16, 0.5, 0.36, 0.6), ("b/B/airs/Y/air/Y", 150, 0.9, 0.72, None),
               ("c/C/airs/Z/air/Z", 151, 9.0, 0.1, None))          # > 150 ops: not in the table
    lines, s = H.q_table(met, anc)
    assert s["airs"] == 2 and s["median_share"] == pytest.approx(0.76) and s["slower_than_original"] == []
    assert lines[-1].endswith("Must-show met.")
    slow = copy.deepcopy(met)
    slow["results"][1]["gen_ms"] = 1.01                             # 71% of the floor, slower than 1.0
    lines, s = H.q_table(slow, anc)
    assert s["slower_than_original"] == ["b/Y"] and lines[-1].endswith("Must-show not met.")


def test_trace_domain_table_and_median() -> None:
    lines, s = H.x_table(json.loads((DATA / "exprs-h200-s14.json").read_text()))
    assert s["airs"] == 14 and round(s["median_share"], 4) == 0.3337 and s["all_identical"]
    assert "| connection/ConnectionNew | 55 | 95 | 17.290 | 48.495 | 5.366 | 31% | 2.80x | yes |" in lines
    ex = json.loads((DATA / "exprs-h200-s14.json").read_text())
    ex["results"][0]["cases"][0]["identical"] = False
    lines, s = H.x_table(ex)
    assert not s["all_identical"] and "**no**" in lines[2] and lines[-1].endswith("Must-show not met.")


def test_products_bound_arithmetic() -> None:
    """1,520,640,000 products in the 1 ms that 70% of a 0.7 ms floor allows are half of what an H200
    issues of 11-instruction products (132 x 128 x 1.98e9 / 11 = 3.04128e12 a second); at 2 ms, a
    quarter. A Q of more than 150 ops, or without a products count, is left out."""
    run = {"results": [{"rel": "a/A/airs/X/air/X", "ops": 10, "gen_ms": 2.0, "floor_ms": 0.7, "muls_per_row": 1,
                        "n_ext": 1_520_640_000},
                       {"rel": "b/B/airs/Y/air/Y", "ops": 151, "gen_ms": 1.0, "floor_ms": 1.0, "muls_per_row": 1,
                        "n_ext": 1},
                       {"rel": "c/C/airs/Z/air/Z", "ops": 5, "gen_ms": 1.0, "floor_ms": 1.0, "n_ext": 1}]}
    lines, s = H.product_bound(run)
    assert s["airs"] == 1 and s["median_need"] == pytest.approx(0.5) and s["median_now"] == pytest.approx(0.25)
    assert lines[2] == "| a/X | 10 | 1 | 0.700 | 1.000 | 50% | 2.000 | 25% |"
    assert H.product_bound(run, instructions=22)[1]["median_need"] == pytest.approx(1.0)


def test_products_bound_of_session_18s_round() -> None:
    """docs/BENCHMARKS.md "Session 25": at 70% of the floor the products alone would take a median 50%
    of the H200's issue slots (Connection1 97%), against 28% at the kernels' time."""
    lines, s = H.product_bound(json.loads((DATA / "q-final-h200-s18.json").read_text()))
    assert s["airs"] == 35 and round(s["median_need"], 4) == 0.5015 and round(s["max_need"], 4) == 0.9731
    assert round(s["median_now"], 4) == 0.2797
    assert "| fibonacci-square/U8Air | 16 | 30 | 0.102 | 0.146 | 28% | 0.179 | 23% |" in lines
    assert "| connection/Connection1 | 96 | 190 | 0.188 | 0.269 | 97% | 0.564 | 46% |" in lines
    assert "median **50%** (up to 97%)" in lines[-1]


def test_trace_domain_products_bound(tmp_path: Path, capsys) -> None:
    """docs/BENCHMARKS.md "Session 25": the trace-domain products at 60% of the floor would take a
    median 34% of the H200's issue slots at 14 instructions an exact product (Intermediates 72%); the
    CLI prints both bounds after the must-show tables."""
    ex = json.loads((DATA / "exprs-h200-s14.json").read_text())
    lines, s = H.x_product_bound(ex)
    assert s["airs"] == 14 and round(s["median_need"], 4) == 0.3386 and round(s["median_now"], 4) == 0.1893
    assert "| intermediate_sums/Intermediates | 112 | 5670 | 8.250 | 72% | 37.105 | 27% |" in lines
    anc = tmp_path / "a.md"
    anc.write_text(ANCHORS_TEXT)
    assert H.main(["--q", str(DATA / "q-final-h200-s18.json"), "--exprs", str(DATA / "exprs-h200-s14.json"),
                   "--anchors", str(anc)]) == 0
    out = capsys.readouterr().out
    assert "products alone would take a median **50%** (up to 97%)" in out
    assert "trace-domain products alone would take a median **34%**" in out


def test_cli_needs_an_input(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        H.main([])
    assert e.value.code == 2
    assert "give --q, --exprs or both" in capsys.readouterr().err


# ------------------------------------------------------------- bench/sass_pipes.py dirs (pre-screen)
from bench import sass_pipes as SP  # noqa: E402


def test_kinds_of_kernels() -> None:
    assert SP.kind_of("_Z24kc310a444476c34a5_q_c0_kPK11StepsParams") == "Q chunk"
    assert SP.kind_of("_Z25k108d51a589aa5bb8_x_e2_kPK11StepsParams") == "expression _k"
    assert SP.kind_of("_Z26k108d51a589aa5bb8_x_e12_kiPK11StepsParams") == "expression _ki"
    assert SP.kind_of("_Z13exps_x_inv_kPK11StepsParams") is None


@pytest.mark.requires("nvcc", "cuobjdump")
def test_hot_path_counts_a_probe_and_stops_at_the_exit(tmp_path: Path) -> None:
    """k_mul of bench/sass_probe.cu (gl_mul between two loads and a store): gl_mul's 3 IMAD.WIDE +
    2 IMAD.HI (4 cycles each) and 2 IMAD (2 each) = 24 FMA-pipe cycles, and the 3 address IMAD.WIDEs
    = 12; its 8 ALU instructions = 16 (templates/gen_common.cuh's count, nvcc 13.0)."""
    cub = tmp_path / "a" / "p.cubin"
    cub.parent.mkdir()
    SP.compile_cubin(REPO / "bench" / "sass_probe.cu", cub, [], "90")
    hot = SP.hot_path(cub)
    c = hot["k_mul"]
    assert (c["fma"], c["alu"]) == (36, 16)
    # the probe's own 13 (4 LDC, S2R, ULDC, 3 address IMAD.WIDE, 2 LDG, STG, EXIT): gl_mul is 15;
    # gl_acc_mul 12 (+ the xor k_accmul stores), above the 11 that h14_tables' products bound takes
    assert c["issue"] - 13 == 15 and hot["k_accmul"]["issue"] - 13 - 1 == 12 > H.PRODUCT_INSTRUCTIONS
    assert (hot["k_mul3"]["issue"], hot["k_mul3v"]["issue"]) == (252, 221)   # exact 3x3 vs the value form
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "p.cubin").write_bytes(cub.read_bytes())
    assert SP.compare_dirs(tmp_path / "a", tmp_path / "b") == []     # no Q / expression kernels in it


@pytest.mark.requires("nvcc", "cuobjdump")
def test_fp64_product_counts(tmp_path: Path) -> None:
    """docs/BENCHMARKS.md "Session 25": the FP64 pipe's exact product (bench/fp64_pipe.cu's f64_one)
    is 15 FP64 instructions and 74 integer ones beside int_one's 24 (gl_mul and the same frame)."""
    cub = tmp_path / "f.cubin"
    SP.compile_cubin(REPO / "bench" / "fp64_pipe.cu", cub, [], "90")
    c = SP.pipes(cub, True)
    f64 = next(v for k, v in c.items() if "f64_one" in k)
    i64 = next(v for k, v in c.items() if "int_one" in k)
    assert (f64["fp64"], f64["alu"] + f64["fma"]) == (15, 74)
    assert (i64["fp64"], i64["alu"] + i64["fma"]) == (0, 24)
    assert "  15 FP64" in SP.fmt(f64) and "FP64" not in SP.fmt(i64)
