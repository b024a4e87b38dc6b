#!/usr/bin/env python3
"""Launch overhead of two builds of the same AIRs on one GPU: the host time one call of
`exps_launch_expr` / `exps_launch` takes (the launcher's own cost: argument setup, kernel lookup,
cudaLaunchKernel) and the GPU time of the queued launches, with tiny row counts, so that the kernels
themselves cost almost nothing.

    python3 bench/launch_overhead.py --pk AFTER_PK --before BEFORE_PK [--air Name ...] --out OUT

Both builds should hold the same kernels (a change of the launcher, not of the device code): what
it measures is how a launch reaches the driver. The first call of a process also loads the kernels
(cudaLibraryLoadData + cudaLibraryGetKernel of every kernel), timed on its own as "first call".
Sides alternate (before, after, before, ...), 5 rounds, medians. Needs CuPy and a GPU.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from codegen.check.gpucheck import CupyMem  # noqa: E402
from codegen.check.hostcheck import _load, make_buffers  # noqa: E402
from codegen.discover import discover  # noqa: E402
from codegen.model import load_air  # noqa: E402


def _time_calls(cp, fn, calls: int) -> tuple[float, float]:
    """(host microseconds per call, GPU microseconds per call) of `calls` queued calls."""
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    cp.cuda.Device().synchronize()
    start.record()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t0) / calls * 1e6
    stop.record()
    stop.synchronize()
    return host, cp.cuda.get_elapsed_time(start, stop) * 1e3 / calls


def side(so: Path, si, mem, rows: int, calls: int) -> dict:
    lib = _load(so)
    buf = make_buffers(si, rows, rows, np.random.default_rng(1))
    steps = buf.bind(mem)
    exprs = [e for e in range(0, 4096) if lib.exps_expr_covered(e)][:8]
    dest = mem.put(np.zeros(3 * rows, dtype=np.uint64))
    scratch_elems = max(int(lib.exps_min_scratch()), 256) * 4          # waves of 4 blocks
    scratch = mem.put(np.zeros(scratch_elems, dtype=np.uint64))
    q = mem.put(np.zeros(3 * rows, dtype=np.uint64))

    def q_call():
        lib.exps_launch(steps, mem.ptr(q), mem.ptr(scratch), scratch_elems, rows, buf.off_ext[1], buf.off_ext[2],
                        buf.off_ext.get(3, 0), buf.off_zi, None)

    def x_call(e):
        return lambda: lib.exps_launch_expr(e, steps, mem.ptr(dest), rows, rows, buf.off_trace[1], buf.off_trace[2],
                                            buf.off_trace.get(3, 0), 0, 0, 0, 1, 1, 1, None)

    t0 = time.perf_counter()
    (x_call(exprs[0]) if exprs else q_call)()
    mem.sync()
    first = (time.perf_counter() - t0) * 1e6
    out = {"first_call_us": first, "q": _time_calls(mem.cp, q_call, calls)}
    if exprs:
        out["x"] = [_time_calls(mem.cp, x_call(e), calls) for e in exprs]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pk", required=True, help="the key built by this tree (.so placed)")
    ap.add_argument("--before", required=True, help="the same key built by the old tree")
    ap.add_argument("--air", action="append", default=[], help="only AIRs whose path contains this")
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="launch-out")
    a = ap.parse_args()
    mem = CupyMem()
    res = {}
    for p in discover(a.pk):
        if a.air and not any(x in p.rel for x in a.air):
            continue
        so_a, so_b = p.so_path, Path(a.before) / p.so_path.relative_to(a.pk)
        if not (so_a.exists() and so_b.exists()):
            continue
        si, _ = load_air(p.starkinfo, p.expressions)
        rounds = {"before": [], "after": []}
        for _ in range(a.rounds):
            for name, so in (("before", so_b), ("after", so_a)):
                rounds[name].append(side(so, si, mem, a.rows, a.calls))
        row = {}
        for name, rs in rounds.items():
            row[name] = {"first_call_us": rs[0]["first_call_us"],      # the process's first call of that .so
                         "q_host_us": statistics.median(r["q"][0] for r in rs),
                         "q_gpu_us": statistics.median(r["q"][1] for r in rs),
                         "x_host_us": statistics.median(statistics.median(h for h, _ in r["x"]) for r in rs)
                         if "x" in rs[0] else None,
                         "x_gpu_us": statistics.median(statistics.median(g for _, g in r["x"]) for r in rs)
                         if "x" in rs[0] else None}
        res[p.rel] = row
        b, f = row["before"], row["after"]
        fmt = lambda v: "-" if v is None else f"{v:.2f}"   # noqa: E731
        print(f"| {p.rel} | Q call host {fmt(b['q_host_us'])} -> {fmt(f['q_host_us'])} us, GPU {fmt(b['q_gpu_us'])} -> "
              f"{fmt(f['q_gpu_us'])} us | expr call host {fmt(b['x_host_us'])} -> {fmt(f['x_host_us'])} us, GPU "
              f"{fmt(b['x_gpu_us'])} -> {fmt(f['x_gpu_us'])} us | first call {b['first_call_us']:.0f} -> "
              f"{f['first_call_us']:.0f} us |", flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "launch.json").write_text(json.dumps({"rows": a.rows, "calls": a.calls, "airs": res}, indent=1))
    print(f"{len(res)} AIRs timed")
    return 0 if res else 1


if __name__ == "__main__":
    sys.exit(main())
