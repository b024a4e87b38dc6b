"""Refit the autotuner's cost model (codegen/build/autotune.py `CostModel`) on a GPU sweep.

    python3 bench/fit_cost.py tests/data/sweep-11waves-h200.json provingkey-sample ../shared/pk/*/provingKey

The sweep (`bench/sweep.py --waves ...`) timed every chunking of every AIR at several wave sizes.
Each timing is modelled as
    ms = A * sum_c weight_c / eff(regs_c; OCC_SAT) + B * launches + C * chunks * rows + D * scratch words * rows
(the terms of `autotune.cost`, with the IR after the passes, as emitted) and A..D are fitted by
least squares on the relative error for each OCC_SAT on a grid. Prints the fit and the constants in
the model's units (one base-field multiplication per row = A).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from bench.replay_tune import q_irs  # noqa: E402
from codegen.build.autotune import CostModel, occupancy, op_weight  # noqa: E402
from codegen.emit import KernelSource  # noqa: E402
from codegen.plan import plan  # noqa: E402


def points(sweep: dict, keys: list[str]) -> list[dict]:
    irs = q_irs(keys)
    rows = 1 << sweep["rows"]
    m = CostModel()
    out = []
    for r in sweep["results"]:
        if r["spills"]:
            continue
        q = irs[r["air"].split("/")[-1]]
        ks = KernelSource("k", q, plan(q, r["ops_per_chunk"]), [], "0" * 64)
        pl, qq = ks.plan, ks.q
        w = [sum(op_weight(qq.ops[i], m) for i in range(s, e)) for s, e in pl.chunks]
        sw = sum(qq.ops[v].dim for ch in pl.loads for v in ch) + sum(qq.ops[v].dim for ch in pl.stores for v in ch)
        waves = {512: r["ms"]} if r["chunks"] == 1 else {int(k): v for k, v in r["waves"].items()}
        for wv, ms in waves.items():
            launches = 1 if r["chunks"] == 1 else r["chunks"] * math.ceil(rows / (256 * wv))
            out.append(dict(ms=ms, w=w, regs=r["regs"], chunks=r["chunks"], launches=launches, sw=sw, rows=rows))
    return out


def features(x: dict, occ_sat: float) -> list[float]:
    f1 = sum(wc / min(1.0, (occupancy(rg) / occ_sat) ** CostModel.OCC_EXP) for wc, rg in zip(x["w"], x["regs"]))
    return [f1 * x["rows"] * 1e-9, x["launches"], x["chunks"] * x["rows"] * 1e-9, x["sw"] * x["rows"] * 1e-9]


def main() -> int:
    sweep = json.load(open(sys.argv[1]))
    pts = points(sweep, sys.argv[2:])
    y = np.array([x["ms"] for x in pts])
    best = None
    for occ_sat in (0.125, 0.1875, 0.25, 0.3125, 0.375, 0.5):
        a = np.array([features(x, occ_sat) for x in pts])
        coef = np.linalg.lstsq(a / y[:, None], np.ones_like(y), rcond=None)[0]
        coef = np.clip(coef, 0, None)
        err = np.abs(a @ coef / y - 1)
        print(f"OCC_SAT {occ_sat}: A {coef[0]:.4f} ms/G mul-rows, B {coef[1] * 1e3:.2f} us/launch, "
              f"C {coef[2]:.3f}, D {coef[3]:.3f}; relative error mean {err.mean():.3f}, max {err.max():.3f}")
        if best is None or err.mean() < best[0]:
            best = (err.mean(), occ_sat, coef)
    _, occ_sat, (a_, b_, c_, d_) = best
    print(f"\n{len(pts)} timings; best OCC_SAT {occ_sat}: in multiplication units WORD {d_ / a_:.2f}, "
          f"CHUNK {c_ / a_:.2f}, LAUNCH {b_ / a_ * 1e9:.3g} ({b_ * 1e3:.1f} us); one multiplication "
          f"{a_ * 1e-9 * 1e-3 * 1e12:.2f} ps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
