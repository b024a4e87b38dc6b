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
   the floor, speed-up over the interpreter, bit-identical; then the median share (#14: >= 60%);
3. with --q, the products bound (session 25): per small Q, the base-field products a second the
   kernel would run at #14's 70% of the floor (muls/row x NExt / (floor / 0.7)), as a share of the
   products an H200 could issue if it issued nothing else, at 11 SASS instructions a product (the
   leanest exact product here, gl_acc_mul, is 12: bench/sass_probe.cu's k_accmul; no accumulate,
   no reduction) on 132 SMs x 128 lanes x 1.98 GHz (the top SM clock; 1.94-1.97 under load in
   Nsight Compute) -- i.e. the share of every issue slot the products alone would take with every
   add, sum, reduction, load and store free -- and the same share at today's time;
4. with --exprs, the same per AIR for its trace-domain launches at #14's 60%, at 14 instructions an
   exact product (gl_mul, which they use, is 15); products = the expression's bytecode's, without
   the cubic inverse of an inverse launch, so this share is a floor of theirs.
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
# The products bound's H200: SMs, thread instructions issued per SM clock (4 schedulers x 32 lanes),
# the top SM clock, and SASS instructions a product: one fewer than the leanest exact product's
# (gl_acc_mul: 12 on sm_90, nvcc 13.0), so that the bound errs on the side of the target.
H200_SMS, ISSUE_LANES, SM_CLOCK_HZ, PRODUCT_INSTRUCTIONS = 132, 128, 1.98e9, 11
EXACT_PRODUCT_INSTRUCTIONS = 14      # the expressions' exact gl_mul is 15 (bench/sass_probe.cu's k_mul)
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


def issue_capacity(instructions: int) -> float:
    """Products a second an H200 issues of `instructions`-instruction products, issuing nothing else."""
    return H200_SMS * ISSUE_LANES * SM_CLOCK_HZ / instructions


def product_bound(run: dict, max_ops: int = MAX_OPS, target: float = Q_TARGET,
                  instructions: int = PRODUCT_INSTRUCTIONS) -> tuple[list[str], dict]:
    """Per Q of <= max_ops ops: the share of the H200's issue slots its base-field products alone
    would take at `target` of the copy floor (and at its time now), at `instructions` per product."""
    cap = issue_capacity(instructions)
    rows, need, now = [], [], []
    for r in run["results"]:
        gen = r.get("gen_ms")
        if gen is None or r.get("ops", 1 << 30) > max_ops or not r.get("muls_per_row"):
            continue
        products = r["muls_per_row"] * r["n_ext"]
        n = products / (r["floor_ms"] / target * 1e-3) / cap
        w = products / (gen * 1e-3) / cap
        need.append(n)
        now.append(w)
        rows.append([_short(r["rel"]), str(r["ops"]), str(r["muls_per_row"]), f"{r['floor_ms']:.3f}",
                     f"{r['floor_ms'] / target:.3f}", f"{n:.0%}", f"{gen:.3f}", f"{w:.0%}"])
    lines = table(["AIR", "ops", "products / row", "floor ms", f"time at {target:.0%} ms",
                    f"products' share of issue at {target:.0%}", "time now ms", "products' share now"],
                   rows).split("\n")
    summary = {"airs": len(rows), "median_need": statistics.median(need) if need else None,
               "max_need": max(need) if need else None, "median_now": statistics.median(now) if now else None}
    if need:
        lines += ["", f"At {target:.0%} of the copy floor the base-field products alone would take a median "
                  f"**{summary['median_need']:.0%}** (up to {summary['max_need']:.0%}) of every instruction an H200 "
                  f"can issue, at {instructions} instructions a product; today they take {summary['median_now']:.0%}."]
    return lines, summary


def x_product_bound(ex: dict, target: float = X_TARGET,
                    instructions: int = EXACT_PRODUCT_INSTRUCTIONS) -> tuple[list[str], dict]:
    """Per AIR, product_bound's share for its trace-domain launches together (their products at
    `target` of their floor), at `instructions` per exact product."""
    cap = issue_capacity(instructions)
    rows, need, now = [], [], []
    for r in ex["results"]:
        cases = [c for c in r.get("cases", []) if "gen_ms" in c and c.get("muls_per_row") is not None]
        if not cases:
            continue
        products = sum(c["muls_per_row"] for c in cases) * r["n"]
        floor, gen = sum(c["floor_ms"] for c in cases), sum(c["gen_ms"] for c in cases)
        need.append(products / (floor / target * 1e-3) / cap)
        now.append(products / (gen * 1e-3) / cap)
        rows.append([_short(r["rel"]), str(len(cases)), str(sum(c["muls_per_row"] for c in cases)), f"{floor:.3f}",
                     f"{need[-1]:.0%}", f"{gen:.3f}", f"{now[-1]:.0%}"])
    lines = table(["AIR", "launches", "products / row (sum)", "floor ms", f"products' share of issue at {target:.0%}",
                    "time now ms", "products' share now"], rows).split("\n")
    summary = {"airs": len(rows), "median_need": statistics.median(need) if need else None,
               "median_now": statistics.median(now) if now else None}
    if need:
        lines += ["", f"At {target:.0%} of the floor the trace-domain products alone would take a median "
                  f"**{summary['median_need']:.0%}** of every instruction an H200 can issue, at {instructions} "
                  f"instructions an exact product; today they take {summary['median_now']:.0%}."]
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
        run = json.loads(a.q.read_text())
        print("\n".join(q_table(run, anc, a.max_ops)[0]))
        print("\n" + "\n".join(product_bound(run, a.max_ops)[0]))
    if a.exprs:
        ex = json.loads(a.exprs.read_text())
        print(("\n" if a.q else "") + "\n".join(x_table(ex)[0]))
        print("\n" + "\n".join(x_product_bound(ex)[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
