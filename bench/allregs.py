"""Registers of EVERY chunk kernel of a Q's plans (ptxas, sm_90, device code only), against what the
tuner sees: the `representatives` it compiles and `fill_unprobed`'s estimate for the rest. CPU only.

    python3 bench/allregs.py provingkey-sample Large 48 64 96 > bench/data/allregs-large.json

Writes JSON {ops per chunk: {n_chunks, regs, reps, spills}} (what tests/test_autotune.py replays)
and prints, per plan, the model's cost with the true registers and with the tuner's fill.
"""
from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.replay_tune import q_irs  # noqa: E402
from codegen.build import actions as X  # noqa: E402
from codegen.build import autotune as A  # noqa: E402
from codegen.build import toolchain  # noqa: E402
from codegen.build.cache import ObjectCache  # noqa: E402
from codegen.emit import KernelSource, render_probe  # noqa: E402


def main() -> int:
    key, air, sizes = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]]
    ir = q_irs([key])[air]
    plans, _ = A.candidate_plans(ir)
    opts = toolchain.CompileOptions((90,), extra_flags=X.HIDDEN, mode="cubin")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for c in sizes:
            ks = KernelSource("k", ir, plans[c], [], "0" * 64)
            pl = ks.plan
            sub = Path(tmp) / str(c)
            got = X.compile_tus(X.stage_sources(render_probe(ks, list(range(pl.n_chunks))), sub), sub / "obj",
                                opts, ObjectCache(), [])
            regs, spills = X.chunk_stats("k", pl, [r for _, r, _ in got.values()])
            reps = X.representatives(ks.q, pl)
            filled = X.fill_unprobed(ks.q, pl, regs, reps)
            out[c] = {"n_chunks": pl.n_chunks, "regs": regs, "reps": reps, "spills": spills}
            print(f"{air} {c}: {pl.n_chunks} chunks, registers mean {statistics.mean(regs):.0f} max {max(regs)}, "
                  f"filled mean {statistics.mean(filled):.0f}; cost true {A.cost(ks.q, pl, regs):.0f} "
                  f"filled {A.cost(ks.q, pl, filled):.0f}", file=sys.stderr)
    print(json.dumps({"air": air, "arch": 90, "plans": out}, indent=None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
