"""Chunk-size sweep on the GPU: is the autotuner's choice within 10% of the fastest chunking?

For every AIR of the given keys: build the Q kernel (Q only, sm_90) at every candidate chunk size
of the autotuner (plus a single kernel), time each at NExt = 2^rows with CUDA events (3 warm-ups,
median of N), then run the real autotuner (its probes hit the same object cache) and report its
choice against the sweep's fastest. Also prints the raw data the cost model is calibrated on.

    python3 bench/sweep.py --pk provingkey-sample --pk .pk/*/provingKey --rows 22 --out $OUT

`--waves 132,264,512,...` also times every chunked kernel at each wave size (blocks of 256 rows per
wave, set through the scratch size the launcher is given), the data the launch shape and the cost
model are chosen on.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from codegen.build import toolchain as tc  # noqa: E402
from codegen.build.autotune import candidates, cost, tune  # noqa: E402
from codegen.build.kernelcc import stage_sources, compile_kernel, compile_options, compile_tus  # noqa: E402
from codegen.build.probes import chunk_stats  # noqa: E402
from codegen.build.cache import ObjectCache  # noqa: E402
from codegen.discover import discover, kernels  # noqa: E402
from codegen.emit import KernelSource, render, render_parts, tu_kernels  # noqa: E402
from codegen.check.hostcheck import STEP_FIELDS, ext_offsets  # noqa: E402
from bench.run import uniform_field  # noqa: E402
from codegen.coverage import cover  # noqa: E402
from codegen.model import load_air  # noqa: E402
from codegen.plan import plan  # noqa: E402

ARCHS = [90]


def build_so(key, q, opc, work: Path, cache):
    ks = KernelSource(key, q, plan(q, opc), [], "0" * 64)   # after the IR passes, re-planned
    pl = ks.plan
    d = work / f"{key}_{opc}"
    files = render(ks)
    stage_sources(files, d / "src")
    got = compile_kernel(d / "src", list(files), tu_kernels(ks), d / "obj", ARCHS, cache, None, jobs=1)
    regs, spills = chunk_stats(pl, list(got["reports"].values()))
    so = d / "k.so"
    tc.link_shared([Path(o) for o in got["objects"]], so, compile_options(ARCHS), launcher=[])
    variants = {}
    if pl.n_chunks == 1:       # A/B: the same single kernel in other launch shapes (macros of the template
        for name, define in VARIANTS.items():    # and of the launch table, exps_abi.h EXPS_SINGLE_SHAPE)
            gs = {n: define + "\n" + t for n, t in files.items()}
            got = compile_kernel(stage_sources(gs, d / f"src_{name}")[0].parent, list(gs), tu_kernels(ks),
                                 d / f"obj_{name}", ARCHS, cache, None, jobs=1)
            variants[name] = d / f"k_{name}.so"
            tc.link_shared([Path(o) for o in got["objects"]], variants[name], compile_options(ARCHS), launcher=[])
    return pl, regs, spills, so, ks.q, variants


#: single-kernel launch shapes timed beside the emitted one: the grid-stride form (<= 0.3) and
#: several rows per thread, a grid apart (the per-row code inlined R times: nvcc may interleave them)
VARIANTS = {"grid_stride": "#define EXPS_SINGLE_GRID_STRIDE 1", "rows2": "#define EXPS_SINGLE_ROWS 2",
            "rows4": "#define EXPS_SINGLE_ROWS 4"}


def gpu_words(cp, n, rng_seed):
    """Raw words on the device: uniform mixed with small ints and edge values; with
    BENCH_INPUTS=uniform (as bench/run.py) uniform nonzero field elements, what the prover's
    extended-domain columns and zerofier inverse are (the mix's p words in the zerofier give Q = 0
    on 1/8 of the rows: the value path's fallback on most warps)."""
    rs = cp.random.RandomState(rng_seed)
    if os.environ.get("BENCH_INPUTS") == "uniform":
        w = uniform_field(cp, rs, n, low=1)
        w[w == cp.uint64(0)] = cp.uint64(1)
        return w
    hi = rs.randint(0, 2**32, size=n, dtype=cp.uint64)
    lo = rs.randint(0, 2**32, size=n, dtype=cp.uint64)
    w = (hi << cp.uint64(32)) | lo
    sel = rs.randint(0, 8, size=n)
    w = cp.where(sel == 0, w & cp.uint64(0xF), w)
    w = cp.where(sel == 1, cp.uint64(0xFFFFFFFF00000001), w)
    return w


def q_inputs(cp, si, n_ext: int):
    """One AIR's Q inputs on the device at `n_ext` extended rows, words from `gpu_words`: the
    StepsParams array, the column offsets, the zerofier's, and the buffers it points into (keep
    them alive while the StepsParams is used)."""
    off, off_zi, pos = ext_offsets(si, n_ext)
    aux, cst, scal = gpu_words(cp, pos, 1), gpu_words(cp, max(si.n_constants, 1) * n_ext, 2), gpu_words(cp, 4096, 3)
    fields = {f: 0 for f in STEP_FIELDS}
    fields.update(aux_trace=int(aux.data.ptr), trace=int(aux.data.ptr),
                  pConstPolsExtendedTreeAddress=int(cst.data.ptr))
    for f in ("publicInputs", "challenges", "evals", "airValues", "airgroupValues", "proofValues"):
        fields[f] = int(scal.data.ptr)
    steps = cp.asarray(np.array([fields[f] for f in STEP_FIELDS], dtype=np.uint64))
    return steps, off, off_zi, (aux, cst, scal)


def launch_lib(so) -> ctypes.CDLL:
    """A `.so` loaded with exps_launch's argument types."""
    lib = ctypes.CDLL(str(so))
    u64, vp = ctypes.c_uint64, ctypes.c_void_p
    lib.exps_launch.argtypes = [vp, vp, vp, u64, u64, u64, u64, u64, u64, vp]
    return lib


def timed_launch(cp, lib, args: tuple, reps: int, after_warmup, warmup: int = 3):
    """`warmup` exps_launch(*args), then what after_warmup() returns (the device synchronized: q as
    the launches left it), then the median ms of `reps` launches (CUDA events, each synchronized)."""
    for _ in range(warmup):
        lib.exps_launch(*args)
    cp.cuda.Device().synchronize()
    got = after_warmup()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(reps):
        start.record()
        lib.exps_launch(*args)
        stop.record()
        stop.synchronize()
        ts.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(ts), got


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pk", action="append", required=True)
    ap.add_argument("--rows", type=int, default=22)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default="/tmp/sweep")
    ap.add_argument("--min-ops", type=int, default=0)
    ap.add_argument("--max-ops", type=int, default=1 << 30)
    ap.add_argument("--max-chunk", type=int, default=1 << 30,
                    help="for Q > 1000 ops, skip chunkings with more ops per kernel (ptxas is slow there)")
    ap.add_argument("--waves", default="512", help="comma list of wave sizes in blocks of 256 rows")
    ap.add_argument("--chunks", default="", help="comma list: only these ops per chunk (0 = single)")
    ap.add_argument("--air", action="append", default=[], help="only AIRs whose name contains this")
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop timing new AIRs after this")
    a = ap.parse_args()
    waves = [int(w) for w in a.waves.split(",") if w.strip()]
    only_chunks = {int(c) for c in a.chunks.split(",") if c.strip()}
    import cupy as cp
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="sweep-"))
    cache = ObjectCache()
    n_ext = 1 << a.rows
    airs = []
    for pk in a.pk:
        for key, ps in sorted(kernels(discover(pk)).items()):
            p = ps[0]
            try:
                si, ei = load_air(p.starkinfo, p.expressions)
            except Exception as e:  # noqa: BLE001
                print(f"skip {p.rel}: {e}")
                continue
            cov = cover(si, ei)
            if cov.air_skip or not a.min_ops <= cov.q_ops <= a.max_ops:
                continue
            name = f"{Path(pk).parts[-2] if Path(pk).name == 'provingKey' else Path(pk).name}/{si.name}"
            if a.air and not any(f in name for f in a.air):
                continue
            airs.append((name, key, si, cov.q))
    def allowed(n, c):
        if only_chunks and c not in only_chunks:
            return False
        return n <= 1000 or (c or n) <= a.max_chunk
    jobs = [(name, key, si, q, opc) for name, key, si, q in airs for opc in candidates(len(q.ops))
            if allowed(len(q.ops), opc)]
    t0 = time.monotonic()
    with ThreadPoolExecutor(os.cpu_count() or 4) as ex:
        built = list(ex.map(lambda j: build_so(j[1], j[3], j[4], work, cache), jobs))
    print(f"built {len(jobs)} kernels in {time.monotonic() - t0:.0f}s", flush=True)
    (out / "sweep_partial.txt").write_text("")
    results = []
    by_air: dict[str, list] = {}
    for j, b in zip(jobs, built):
        by_air.setdefault(j[0], []).append((j, b))
    for name, entries in by_air.items():
        if time.monotonic() - t0 > a.budget_s:
            print(f"budget spent: {name} and later AIRs not timed", flush=True)
            break
        si, q = entries[0][0][2], entries[0][0][3]
        steps, off, off_zi, keep = q_inputs(cp, si, n_ext)
        qbuf = cp.zeros(3 * n_ext, dtype=cp.uint64)
        wts = gpu_words(cp, 3 * n_ext, 4) | cp.uint64(1)
        max_slots = max(b[0].total_slots for _, b in entries)
        scratch = cp.zeros(max(max_slots, 1) * max(waves + [512]) * 256, dtype=cp.uint64)
        ref = None
        for (j, (pl, regs, spills, so, qk, variants)) in entries:
            lib = launch_lib(so)

            def timed(w, lib=lib):
                elems = max(pl.total_slots, 1) * 256 * w
                args = (int(steps.data.ptr), int(qbuf.data.ptr), int(scratch.data.ptr), elems, n_ext,
                        off[1], off[2], off.get(3, 0), off_zi, None)
                qbuf.fill(0)     # the hash: a weighted sum mod 2^64 on the device
                return timed_launch(cp, lib, args, a.reps, lambda: int(cp.sum(qbuf * wts)))
            ms, h = timed(512)
            if ref is None:
                ref = h
            same = h == ref
            by_wave = {}
            var_ms = {}
            for vname, vso in variants.items():
                var_ms[vname], hv = timed(512, launch_lib(vso))
                same = same and hv == ref
            if pl.n_chunks > 1:
                for w in waves:
                    by_wave[str(w)], hw = timed(w)
                    same = same and hw == ref
            r = {"air": name, "ops": len(q.ops), "ops_per_chunk": j[4], "opc_emitted": pl.ops_per_chunk,
                 "chunks": pl.n_chunks,
                 "slots": pl.total_slots, "regs": regs, "spills": spills, "ms": ms, "same_q": same,
                 "model_cost": cost(qk, pl, regs), "waves": by_wave, "ops_emitted": len(qk.ops),
                 "single_variants_ms": var_ms}
            results.append(r)
            print(f"{name:<40} opc {j[4]:>5} chunks {pl.n_chunks:>4} slots {pl.total_slots:>4} "
                  f"regs {max(regs):>3} spill {spills:>5} {ms:8.3f} ms"
                  f"{''.join(f' ({v} {t:.3f})' for v, t in var_ms.items())} {'' if same else 'Q DIFFERS'}", flush=True)
        del keep, qbuf, scratch, wts
        cp.get_default_memory_pool().free_all_blocks()
        (out / "sweep.json").write_text(json.dumps({"rows": a.rows, "results": results, "partial": True}))
    # the autotuner's own choice (its probe compiles hit the cache filled above)
    summary = []
    for name, key, si, q in airs:
        swept = {r["ops_per_chunk"]: r for r in results if r["air"] == name}

        def compile_plan(pl, key=key, q=q, swept=swept):
            if pl.ops_per_chunk not in swept:   # not built by the sweep: refuse (counts as a spill)
                return [256] * pl.n_chunks, 1
            d = work / f"tune_{key}_{pl.ops_per_chunk}"
            files = {n: t for n, t in render_parts(KernelSource(key, q, pl, [], "0" * 64)).items() if "_q" in n[len(key):]}
            got = compile_tus(stage_sources(files, d), d / "obj", compile_options(ARCHS), cache, None, jobs=1)
            return chunk_stats(pl, [r for _, r, _ in got.values()])
        tr = tune(q, compile_plan)
        rows = [r for r in results if r["air"] == name and not r["spills"]]
        best = min(rows, key=lambda r: r["ms"]) if rows else None
        chosen = next((r for r in rows if r["ops_per_chunk"] == tr.ops_per_chunk), None)
        s = {"air": name, "ops": len(q.ops), "probes": len(tr.probes), "chosen": tr.ops_per_chunk,
             "chosen_ms": chosen["ms"] if chosen else None, "best": best["ops_per_chunk"] if best else None,
             "best_ms": best["ms"] if best else None, "skip": tr.skip}
        s["ratio"] = (s["chosen_ms"] / s["best_ms"]) if chosen and best else None
        summary.append(s)
    (out / "sweep.json").write_text(json.dumps({"rows": a.rows, "results": results, "summary": summary}, indent=1))
    print("\n| AIR | Q ops | probes | chosen ops/chunk | chosen ms | fastest ops/chunk | fastest ms | chosen/fastest |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in summary:
        ratio = f"{s['ratio']:.3f}" if s["ratio"] else "-"
        print(f"| {s['air']} | {s['ops']} | {s['probes']} | {s['chosen'] or 'single'} | "
              f"{s['chosen_ms'] or float('nan'):.3f} | {s['best'] or 'single'} | {s['best_ms'] or float('nan'):.3f} | {ratio} |")
    bad = [s for s in summary if s["ratio"] and s["ratio"] > 1.10]
    print(f"{len(summary)} AIRs; {len(bad)} with the choice more than 10% slower than the sweep's fastest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
