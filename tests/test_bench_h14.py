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
