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
    c = SP.hot_path(cub)["k_mul"]
    assert (c["fma"], c["alu"]) == (36, 16)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "p.cubin").write_bytes(cub.read_bytes())
    assert SP.compare_dirs(tmp_path / "a", tmp_path / "b") == []     # no Q / expression kernels in it
