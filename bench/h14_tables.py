#!/usr/bin/env python3
"""Issue #14's must-show tables from one round's results, with the verdict lines (no GPU).

    python3 bench/h14_tables.py --q RUN.json [--exprs EXPRS.json] [--anchors ../shared/docs/anchors-h200.md]

RUN.json: `bench/run.py --out` (with `--before`, the before column and the same-run speed-up);
EXPRS.json: `bench/exprs.py --out`. Prints markdown:

1. every Q kernel of <= MAX_OPS ops (default 150): before / after ms, speed-up, the copy floor and
   after's share of it, the original generator's time on the same AIR (anchors-h200.md, same GPU
   model and NExt) and after's speed-up over it; then the median share of the floor (#14: >= 70%)
   and the AIRs slower than the original's (#14: none);
2. per AIR, the trace-domain expressions: launches, generated / interpreter / floor ms, share of
   the floor, speed-up over the interpreter, bit-identical; then the median share (#14: >= 60%).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.exprs_compare import table  # noqa: E402

MAX_OPS = 150
Q_TARGET, X_TARGET = 0.70, 0.60
ANCHORS = Path(__file__).resolve().parents[2] / "shared" / "docs" / "anchors-h200.md"


def anchors(path: Path) -> dict[str, float]:
    """{'lookup/Lookup0': ms} from the original generator's table (its first, unforced row per AIR)."""
    out: dict[str, float] = {}
    for ln in path.read_text().splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        if len(cells) < 5 or "/" not in cells[0] or "(" in cells[0]:
            continue
        try:
            out.setdefault(cells[0], float(cells[4]))
        except ValueError:
            continue
    return out


def _short(rel: str) -> str:
    """'lookup/Lookup/airs/Lookup0/air/Lookup0' -> 'lookup/Lookup0' (the anchors' names)."""
    parts = rel.split("/")
    return f"{parts[0]}/{parts[-1]}"


def q_table(run: dict, anc: dict[str, float], max_ops: int = MAX_OPS) -> tuple[list[str], dict]:
    rows, shares, slower, speedups = [], [], [], []
    for r in run["results"]:
        gen = r.get("gen_ms")
        if gen is None or r.get("ops", 1 << 30) > max_ops:
            continue
        name = _short(r["rel"])
        share = r["floor_ms"] / gen
        shares.append(share)
        before = r.get("before_ms")
        if before:
            speedups.append(before / gen)
        orig = anc.get(name)
        if orig is not None and gen > orig:
            slower.append(name)
        rows.append([name, str(r["ops"]), f"{before:.3f}" if before else "-", f"{gen:.3f}",
                     f"{before / gen:.2f}x" if before else "-", f"{r['floor_ms']:.3f}", f"{share:.0%}",
                     f"{orig:.3f}" if orig is not None else "-", f"{orig / gen:.2f}x" if orig is not None else "-"])
    lines = table(["AIR", "ops", "before ms", "after ms", "speed-up", "floor ms", "floor / after",
                    "the original's ms", "after vs the original"], rows).split("\n")
    summary = {"airs": len(rows), "median_share": statistics.median(shares) if shares else None,
               "median_speedup": statistics.median(speedups) if speedups else None, "slower_than_original": slower}
    if shares:
        ok = summary["median_share"] >= Q_TARGET and not slower
        lines += ["", f"{len(rows)} Q kernels of <= {max_ops} ops: median **{summary['median_share']:.0%}** of the "
                  f"copy floor (#14: >= {Q_TARGET:.0%}); slower than the original's: "
                  f"{', '.join(slower) if slower else 'none'}"
                  + (f"; median speed-up before -> after {summary['median_speedup']:.2f}x" if speedups else "")
                  + f". Must-show {'met' if ok else 'not met'}."]
    return lines, summary


def x_table(ex: dict) -> tuple[list[str], dict]:
    rows, shares = [], []
    for r in ex["results"]:
        if not r.get("launches_timed"):
            continue
        share = r["floor_over_gen"]
        shares.append(share)
        ident = all(c.get("identical") and c.get("oracle_ok", True) for c in r.get("cases", []) if "gen_ms" in c)
        rows.append([_short(r["rel"]), str(r["exprs_timed"]), str(r["launches_timed"]), f"{r['gen_ms']:.3f}",
                     f"{r['interp_ms']:.3f}", f"{r['floor_ms']:.3f}", f"{share:.0%}", f"{r['speedup']:.2f}x",
                     "yes" if ident and r.get("status") == "ok" else "**no**"])
    lines = table(["AIR", "expressions", "launches", "generated ms", "interpreter ms", "floor ms", "% of floor",
                    "vs interpreter", "bit-identical"], rows).split("\n")
    summary = {"airs": len(rows), "median_share": statistics.median(shares) if shares else None,
               "all_identical": all(r[-1] == "yes" for r in rows)}
    if shares:
        ok = summary["median_share"] >= X_TARGET and summary["all_identical"]
        lines += ["", f"{len(rows)} AIRs' trace-domain expressions: median **{summary['median_share']:.0%}** of the "
                  f"floor per AIR (#14: >= {X_TARGET:.0%}); bit-identical: "
                  f"{'all' if summary['all_identical'] else 'NOT all'}. Must-show {'met' if ok else 'not met'}."]
    return lines, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--q", type=Path, help="bench/run.py's JSON")
    ap.add_argument("--exprs", type=Path, help="bench/exprs.py's JSON")
    ap.add_argument("--anchors", type=Path, default=ANCHORS)
    ap.add_argument("--max-ops", type=int, default=MAX_OPS)
    a = ap.parse_args(argv)
    if not a.q and not a.exprs:
        ap.error("give --q, --exprs or both")
    if a.q:
        anc = anchors(a.anchors) if a.anchors.is_file() else {}
        if not anc:
            print(f"(no anchors read from {a.anchors}: the original's column is empty)", file=sys.stderr)
        print("\n".join(q_table(json.loads(a.q.read_text()), anc, a.max_ops)[0]))
    if a.exprs:
        print(("\n" if a.q else "") + "\n".join(x_table(json.loads(a.exprs.read_text()))[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
