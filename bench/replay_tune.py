"""Replay the autotuner on a GPU sweep's recorded ptxas reports and compare its choice with the
sweep's fastest chunking (the tuner's choice is a function of the ptxas reports only).

    python3 bench/replay_tune.py tests/data/sweep-11waves-h200.json ../shared/pk/*/provingKey provingkey-sample
"""
from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from codegen.build.autotune import PRUNE_MARGIN, CostModel, TuneResult, tune  # noqa: E402
from codegen.coverage import cover  # noqa: E402
from codegen.ir import KernelIR  # noqa: E402
from codegen.model import load_air  # noqa: E402


def q_irs(keys) -> dict[str, KernelIR]:
    """AIR name -> its Q IR (before the passes), over every AIR of the keys (the first of a name)."""
    irs: dict[str, KernelIR] = {}
    for pk in keys:
        for p in sorted(glob.glob(f"{pk}/**/*.starkinfo.json", recursive=True)):
            si, ei = load_air(p, p.replace("starkinfo", "expressionsinfo"))
            cov = cover(si, ei)
            if cov.q:
                irs.setdefault(si.name, cov.q)
    return irs


def replay(sweep: dict, irs: dict[str, KernelIR], sample=None, m: CostModel = CostModel(),
           wave: str | None = None, margin: float = PRUNE_MARGIN) -> dict[str, tuple[TuneResult, dict, dict]]:
    """Per swept AIR: the tuner's result on the recorded registers (a chunking the sweep did not
    build counts as spilling), the sweep's row of its choice, and the sweep's fastest row.
    `sample(q, plan, regs)`: the registers a probe shows instead of the recorded ones (a build's
    sample of them, tests/test_autotune.py); `wave`: the chunked plans' times at that wave size
    (the rows returned carry it as "ms"); `margin`: the tune's (autotune.PRUNE_MARGIN)."""
    out = {}
    for air in sorted({r["air"] for r in sweep["results"]}):
        rs = {r["ops_per_chunk"]: (dict(r, ms=r["waves"][wave]) if wave and r["chunks"] > 1 else r)
              for r in sweep["results"] if r["air"] == air}
        q = irs[air.split("/")[-1]]

        def probe(pl, rs=rs, q=q):
            if pl.ops_per_chunk not in rs:
                return [256] * pl.n_chunks, 1
            r = rs[pl.ops_per_chunk]
            return (sample(q, pl, r["regs"]) if sample else r["regs"]), r["spills"]
        t = tune(q, probe, m=m, margin=margin)
        best = min((r for r in rs.values() if not r["spills"]), key=lambda r: r["ms"])
        out[air] = (t, rs[t.ops_per_chunk], best)
    return out


def main() -> int:
    sweep, keys = sys.argv[1], sys.argv[2:]
    irs = q_irs(keys)
    print("| AIR | Q ops | probes (ops/chunk) | chosen | chosen ms | fastest | fastest ms | chosen/fastest |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = 1.0
    for air, (t, ch, best) in replay(json.load(open(sweep)), irs).items():
        worst = max(worst, ch["ms"] / best["ms"])
        name = lambda c: str(c) if c else "single"  # noqa: E731
        print(f"| {air} | {len(irs[air.split('/')[-1]].ops)} | {len(t.probes)} "
              f"({', '.join(name(p.ops_per_chunk) for p in t.probes)}) | {name(t.ops_per_chunk)} | {ch['ms']:.3f} | "
              f"{name(best['ops_per_chunk'])} | {best['ms']:.3f} | {ch['ms'] / best['ms']:.3f} |")
    print(f"worst chosen/fastest: {worst:.3f}")
    return 0 if worst <= 1.10 else 1


if __name__ == "__main__":
    sys.exit(main())
