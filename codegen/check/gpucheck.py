"""GPU check: the placed `.so` files, called through ctypes exactly as the prover calls them, on
device buffers laid out as the prover lays them, compared word for word with the numpy oracle.

The checks are hostcheck's (Q with ample and tight scratch so the wave loop runs many waves; every
covered expression in every store mode and dest shape; poisoned outputs), run through a CuPy
memory backend instead of host memory. Needs CuPy (`pip install -e .[gpu]`) and a GPU.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from codegen.build.actions import read_json
from codegen.discover import discover, kernels
from codegen.check.hostcheck import STEP_FIELDS, _load, check_kernel, default_ops_per_chunk
from codegen.emit import KernelSource
from codegen.coverage import cover
from codegen.model import ModelError, load_air, load_json
from codegen.plan import plan


class CupyMem:
    """Device memory backend (CuPy); the `.so`'s own static CUDA runtime shares the context."""

    name = "cuda"

    def __init__(self):
        import cupy
        self.cp = cupy

    def put(self, a: np.ndarray):
        return self.cp.asarray(np.ascontiguousarray(a, dtype=np.uint64))

    def ptr(self, h) -> int:
        return int(h.data.ptr) if h.size else 0

    def get(self, h) -> np.ndarray:
        return self.cp.asnumpy(h)

    def steps(self, fields: dict[str, int]):
        arr = np.array([fields.get(f, 0) for f in STEP_FIELDS], dtype=np.uint64)
        d = self.cp.asarray(arr)
        return int(d.data.ptr), d

    def sync(self) -> None:
        self.cp.cuda.Device().synchronize()


def gpu_rows(q_ops: int) -> tuple[int, int, int]:
    """(min extended rows, min trace rows, max rows): many waves with tight scratch."""
    return (1 << 15 if q_ops > 2000 else 1 << 16), 1 << 12, 1 << 16


def main(s, seed: int = 7) -> int:
    mem = CupyMem()
    name = mem.cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"GPU: {name}")
    bad = checked = words = exprs = 0
    for key, ps in sorted(kernels(discover(s.pk)).items()):
        for p in ps:
            if not p.so_path.exists():
                print(f"{p.rel}: no .so (skipped or not built)")
                continue
            t0 = time.monotonic()
            try:
                si, ei = load_air(p.starkinfo, p.expressions)
            except ModelError as e:
                print(f"{p.rel}: has a .so but bad input: {e}")
                bad += 1
                continue
            cov = cover(si, ei, cap=s.cap)
            tune = read_json(Path(s.build) / key / "tune.json") or {}
            opc = tune.get("ops_per_chunk")
            if opc is None:
                opc = s.chunk if s.chunk is not None else default_ops_per_chunk(cov.q_ops)
            ks = KernelSource(key, cov.q, plan(cov.q, opc), list(cov.exprs))
            lib = _load(p.so_path)
            if lib.exps_min_scratch() != ks.plan.min_scratch:
                print(f"{p.rel}: exps_min_scratch {lib.exps_min_scratch()} != plan {ks.plan.min_scratch}"
                      " (build dir out of date?)")
                bad += 1
                continue
            lo_ext, lo, hi = gpu_rows(cov.q_ops)
            r = check_kernel(si, load_json(p.starkinfo), load_json(p.expressions), ks, lib, seed=seed,
                             min_rows_ext=lo_ext, min_rows=lo, max_rows=hi, mem=mem)
            n = r.q_words + r.expr_words
            words += n
            exprs += len(ks.exprs)
            checked += 1
            status = "bit-identical" if r.ok else "MISMATCH " + "; ".join(r.mismatches[:3])
            bad += not r.ok
            after = f" ({len(ks.q.ops)} after passes)" if len(ks.q.ops) != cov.q_ops else ""
            print(f"{p.rel}: Q {cov.q_ops} ops{after} / {ks.plan.n_chunks} chunks / {ks.plan.total_slots} slots, "
                  f"{len(ks.exprs)} exprs ({r.expr_checks} launches), {n} words: {status} "
                  f"({time.monotonic() - t0:.1f}s)")
            sys.stdout.flush()
    print(f"gpucheck: {checked} AIRs, {exprs} covered expressions, {words} words compared, {bad} failing")
    return 1 if bad or not checked else 0
