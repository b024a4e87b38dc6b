"""Autotune search cost: our search vs the original's halving from 512 (same IR, same arch, same
run, each with a fresh object cache), plus the compile time of one TU.

    python3 bench/probes.py --air provingkey-sample/synth/Basic/airs/Large/air/Large --arch 90
"""
from __future__ import annotations

from typing import Callable
import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from codegen.build.autotune import Probe, TuneResult, tune  # noqa: E402
from codegen.ir import KernelIR  # noqa: E402
from codegen.plan import plan  # noqa: E402
from codegen.build.actions import stage_sources, chunk_stats, compile_options, compile_tus  # noqa: E402
from codegen.build.cache import ObjectCache  # noqa: E402
from codegen.emit import KernelSource, render_parts  # noqa: E402
from codegen.coverage import cover  # noqa: E402
from codegen.model import load_air  # noqa: E402



def halving_from_512(ir: KernelIR, compile_plan: Callable) -> TuneResult:
    """The original tool's search (for benchmarks): chunk 512, halve on every spill down to 64."""
    res = TuneResult()
    c = 512
    while c >= 64:
        opc = 0 if c >= len(ir.ops) else c
        pl = plan(ir, opc)
        regs, spills = compile_plan(pl)
        res.probes.append(Probe(opc, pl.n_chunks, pl.total_slots, regs, spills, 0.0))
        if not spills:
            res.ops_per_chunk = opc
            return res
        c //= 2
    res.skip = "still spills at CHUNK_MIN 64"
    return res

def run(search, q, archs, label):
    work = Path(tempfile.mkdtemp(prefix=f"probes-{label}-"))
    cache = ObjectCache(root=work / "cache")
    stats = {"tus": 0, "seconds": 0.0}

    def compile_plan(pl):
        files = {n: t for n, t in render_parts(KernelSource("k", q, pl, [], "0" * 64)).items() if "_q" in n[1:]}
        d = work / f"p{pl.ops_per_chunk}"
        t = time.monotonic()
        got = compile_tus(stage_sources(files, d), d / "obj", compile_options(archs), cache, [])
        stats["seconds"] += time.monotonic() - t
        stats["tus"] += sum(1 for _, _, hit in got.values() if not hit)
        return chunk_stats("k", pl, [r for _, r, _ in got.values()])

    t0 = time.monotonic()
    res = search(q, compile_plan)
    wall = time.monotonic() - t0
    probes = ", ".join(f"{p.ops_per_chunk or 'single'}:{max(p.regs)}r{'/spill' if p.spills else ''}"
                       for p in res.probes)
    print(f"{label:<10} probes {len(res.probes)}  nvcc TUs {stats['tus']}  wall {wall:6.1f}s  "
          f"-> {res.ops_per_chunk or 'single'} {res.skip}  [{probes}]", flush=True)
    return res, wall, stats


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--air", action="append", required=True, help="path/to/<base> (without suffix)")
    ap.add_argument("--arch", default="90")
    a = ap.parse_args()
    archs = [int(x) for x in a.arch.split(",")]
    for air in a.air:
        si, ei = load_air(air + ".starkinfo.json", air + ".expressionsinfo.json")
        q = cover(si, ei).q
        print(f"== {air} (Q {len(q.ops)} ops, arch {a.arch})")
        run(tune, q, archs, "ours")
        run(halving_from_512, q, archs, "halving")
    return 0


if __name__ == "__main__":
    sys.exit(main())
