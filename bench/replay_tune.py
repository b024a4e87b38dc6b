"""Replay the autotuner on a GPU sweep's recorded ptxas reports and compare its choice with the
sweep's fastest chunking (the tuner's choice is a function of the ptxas reports only).

    python3 bench/replay_tune.py bench/data/sweep-h200.json ../shared/pk provingkey-sample
"""
from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from codegen.build.autotune import tune  # noqa: E402
from codegen.coverage import cover  # noqa: E402
from codegen.model import load_air  # noqa: E402


def main() -> int:
    sweep, keys = sys.argv[1], sys.argv[2:]
    d = json.load(open(sweep))
    irs = {}
    for pk in keys:
        for p in sorted(glob.glob(f"{pk}/**/*.starkinfo.json", recursive=True)):
            si, ei = load_air(p, p.replace("starkinfo", "expressionsinfo"))
            cov = cover(si, ei)
            if cov.q:
                irs.setdefault(si.name, cov.q)
    print("| AIR | Q ops | probes (ops/chunk) | chosen | chosen ms | fastest | fastest ms | chosen/fastest |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    worst = 1.0
    for air in sorted({r["air"] for r in d["results"]}):
        rs = {r["ops_per_chunk"]: r for r in d["results"] if r["air"] == air}
        q = irs[air.split("/")[-1]]
        t = tune(q, lambda pl: (rs[pl.ops_per_chunk]["regs"], rs[pl.ops_per_chunk]["spills"]))
        best = min((r for r in rs.values() if not r["spills"]), key=lambda r: r["ms"])
        ch = rs[t.ops_per_chunk]
        worst = max(worst, ch["ms"] / best["ms"])
        name = lambda c: str(c) if c else "single"  # noqa: E731
        print(f"| {air} | {len(q.ops)} | {len(t.probes)} ({', '.join(name(p.ops_per_chunk) for p in t.probes)}) | "
              f"{name(t.ops_per_chunk)} | {ch['ms']:.3f} | {name(best['ops_per_chunk'])} | {best['ms']:.3f} | "
              f"{ch['ms'] / best['ms']:.3f} |")
    print(f"worst chosen/fastest: {worst:.3f}")
    return 0 if worst <= 1.10 else 1


if __name__ == "__main__":
    sys.exit(main())
