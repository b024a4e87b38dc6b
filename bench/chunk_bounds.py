#!/usr/bin/env python3
"""Per-chunk launch bounds on a chunked Q (issue #13), an experiment, not part of the emitter: each
chunk kernel of the plan compiled as `__launch_bounds__(256, b)`, b one block per SM more than its
registers allow unbounded, kept where ptxas then stores nothing (else that chunk stays unbounded),
against the unbounded build of the same plan; both linked as bench/sweep.py links, timed on the GPU
at the launcher's 2,048-block top-up wave and at one wave of every row, q compared word for word.

    BENCH_INPUTS=uniform python3 bench/chunk_bounds.py --pk provingkey-sample --air Large --chunk 96 --out $OUT

Prints per chunk the registers unbounded / bounded and per build the times; writes OUT/<air>-<chunk>.json.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.sweep import launch_lib, q_inputs, timed_launch  # noqa: E402
from codegen.build import toolchain as tc  # noqa: E402
from codegen.build.actions import _q_kernel_stats, compile_kernel, compile_options, stage_sources  # noqa: E402
from codegen.build.autotune import MAX_MIN_BLOCKS, SPILL_SLACK_BYTES  # noqa: E402
from codegen.build.bounds import blocks  # noqa: E402
from codegen.build.cache import ObjectCache  # noqa: E402
from codegen.coverage import cover  # noqa: E402
from codegen.discover import discover, kernels  # noqa: E402
from codegen.emit import KernelSource, render, tu_kernels  # noqa: E402
from codegen.model import load_air  # noqa: E402
from codegen.plan import plan  # noqa: E402

ARCHS = [90]


def bounded(files: dict[str, str], bounds: dict[int, int]) -> dict[str, str]:
    """The TUs with chunk c's kernel as `__launch_bounds__(256, bounds[c])`."""
    out = {}
    for name, text in files.items():
        for c, b in bounds.items():
            text, n = re.subn(r"__launch_bounds__\(256\)\n(k[0-9a-f]{16}_q_c%d_k\()" % c,
                              r"__launch_bounds__(256, %d)\n\1" % b, text)
        out[name] = text
    return out


def build(files, ks, d: Path, cache) -> tuple[Path, list[int], list[int]]:
    src = stage_sources(files, d / "src")[0].parent
    got = compile_kernel(src, list(files), tu_kernels(ks), d / "obj", ARCHS, cache, None, jobs=16)
    n = ks.plan.n_chunks
    regs, stores = [0] * n, [0] * n
    for c, st in _q_kernel_stats(ks.plan, list(got["reports"].values())):
        regs[c] = max(regs[c], int(st.get("registers", 0)))
        stores[c] = max(stores[c], int(st.get("spill_stores", 0)))
    so = d / "k.so"
    tc.link_shared([Path(o) for o in got["objects"]], so, compile_options(ARCHS), launcher=[])
    return so, regs, stores


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pk", required=True)
    ap.add_argument("--air", required=True)
    ap.add_argument("--chunk", type=int, required=True)
    ap.add_argument("--rows", type=int, default=22)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default="/tmp/chunk_bounds")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    [(key, si, q)] = [(k, si, cover(si, ei).q) for k, ps in sorted(kernels(discover(a.pk)).items())
                      for si, ei in [load_air(ps[0].starkinfo, ps[0].expressions)] if si.name == a.air]
    ks = KernelSource(key, q, plan(q, a.chunk), [], "0" * 64)
    files = render(ks)
    work = Path(tempfile.mkdtemp(prefix="cb-"))
    cache = ObjectCache()
    base_so, regs, stores = build(files, ks, work / "base", cache)
    want = {c: blocks(r) + 1 for c, r in enumerate(regs) if blocks(r) < MAX_MIN_BLOCKS}
    _, bregs, bstores = build(bounded(files, want), ks, work / "try", cache)
    keep = {c: b for c, b in want.items() if bstores[c] <= SPILL_SLACK_BYTES}
    bound_so, fregs, fstores = build(bounded(files, keep), ks, work / "bound", cache)
    rows = [{"chunk": c, "regs": regs[c], "bound": keep.get(c, 0), "bounded_regs": fregs[c],
             "tried": want.get(c, 0), "tried_stores": bstores[c]} for c in range(len(regs))]
    for r in rows:
        print(f"chunk {r['chunk']:3d}: {r['regs']:3d} regs ({blocks(r['regs'])} blocks)"
              + (f" -> bound {r['bound']}: {r['bounded_regs']} regs" if r["bound"] else
                 f" (bound {r['tried']} stores {r['tried_stores']} B: kept unbounded)" if r["tried"] else ""))
    import cupy as cp
    n_ext = 1 << a.rows
    steps, off, off_zi, keep = q_inputs(cp, si, n_ext)
    qbuf = cp.zeros(3 * n_ext, dtype=cp.uint64)
    slots = max(ks.plan.total_slots, 1)
    scratch = cp.zeros(slots * n_ext, dtype=cp.uint64)

    def timed(so: Path, wave_blocks: int) -> tuple[float, bytes]:
        args = (int(steps.data.ptr), int(qbuf.data.ptr), int(scratch.data.ptr), slots * 256 * wave_blocks, n_ext,
                off[1], off[2], off.get(3, 0), off_zi, None)
        qbuf.fill(0)
        return timed_launch(cp, launch_lib(so), args, a.reps, lambda: cp.asnumpy(qbuf).tobytes())

    res = {"air": a.air, "chunk": a.chunk, "chunks": rows, "times": {}}
    for wave in (2048, n_ext // 256):
        (tb, qb), (tn, qn) = timed(base_so, wave), timed(bound_so, wave)
        res["times"][str(wave)] = {"unbounded_ms": tb, "bounded_ms": tn, "same_q": qb == qn}
        print(f"{a.air} {a.chunk} ops/chunk, waves of {wave} blocks: unbounded {tb:.3f} ms, "
              f"bounded {tn:.3f} ms ({tb / tn:.3f}x), q {'identical' if qb == qn else 'DIFFERS'}", flush=True)
    (out / f"{a.air}-{a.chunk}.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
