#!/usr/bin/env python3
"""Q benchmark on one GPU: generated kernels (`<base>.exps.so`) vs a bytecode interpreter.

    python3 bench/run.py --pk provingkey-sample --pk /path/to/pk --rows 22 --out $OUT

For every AIR of every key whose `.exps.so` is in place (`exps-codegen build PK --arch 90` first,
or pass --build): NExt = 2^rows rows of random raw inputs generated on the GPU (uniform words, edge
values around p and 2^32, small integers, 0/1 selectors), laid out as the prover lays them; Q by the
generated kernel (`exps_launch` through ctypes) and by `bench/interp.cu` (a bytecode interpreter
designed like the prover's `computeExpression_`, on bytecode compiled like the `.bin` writer's);
outputs compared word for word on all NExt rows, and against the numpy oracle at 2^oracle-rows rows;
both timed with CUDA events (warm-ups, then the median of --reps runs). Device copy bandwidth is
measured once; floor = (distinct columns read once + 3 q columns) * 8 B * NExt / bandwidth.

Writes $OUT/bench.json (everything), $OUT/bench.md (a markdown table) and
$OUT/bench.png (bar chart, log scale), and prints the table last. Exit status 1 if any output
differs or any AIR failed.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
import traceback
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import bytecode as BC  # noqa: E402
from bench import interp_lib as IL  # noqa: E402

P = 0xFFFFFFFF00000001
EPS = 0xFFFFFFFF
#: the edge values of codegen.check.hostcheck.EDGE (a test keeps them equal)
EDGE = (0, 1, 2, 3, EPS - 1, EPS, EPS + 1, P - 2, P - 1, P, P + 1, P + 2, 1 << 63,
        (1 << 64) - 2, (1 << 64) - 1, 1 << 32, (1 << 32) - 2)
POISON = 0xDEC0DEDDEC0DEDDE
POISON2 = 0xBADC0FFEE0DDF00D
N_BLOCKS = 512          # grid of the interpreter (and of the generated kernels)
GEN_WAVE = 512 * 256    # rows per wave of the original generator's launcher (512-block cap)
AMPLE_WORDS = 1 << 29   # "ample" scratch: every row in one wave, or at most 4 GiB of it


def ample_scratch(slots: int, n_ext: int) -> int:
    """Scratch words given as "ample": the whole domain in one wave when it fits in AMPLE_WORDS,
    else as many rows as do (and never less than the original's 512-block wave)."""
    rows = min(n_ext, max(GEN_WAVE, AMPLE_WORDS // max(slots, 1)))
    return max(slots, 1) * rows


def prover_scratch(si: Json, ei: Json, starkinfo: Path) -> tuple[int | None, str]:
    """The scratch the GPU prover gives exps_launch (spec §5): the tmp1 + tmp3 + destVals region,
    (nTmp1 + 3 (nTmp3 + 2)) x nrowsPack 256 x maxNBlocks 512 (pil2-stark StarkInfo::
    setMemoryExpressions, when memory does not force smaller), nTmp1/nTmp3 from the AIR's .bin
    header, else from the bytecode of every expression."""
    bin_path = Path(str(starkinfo)[: -len(".starkinfo.json")] + ".bin")
    if bin_path.is_file():
        from codegen.check.binfile import read_bin
        b = read_bin(bin_path)
        t1, t3, src = b.max_tmp1, b.max_tmp3, ".bin"
    else:
        try:
            bcs, _, _ = BC.compile_bin(si, ei)
        except BC.BytecodeError:
            return None, "no bytecode"
        t1 = max((x.n_temp1 for x in bcs.values()), default=0)
        t3 = max((x.n_temp3 for x in bcs.values()), default=0)
        src = "bytecode"
    return (t1 + 3 * (t3 + 2)) * 256 * 512, src

Json = dict[str, Any]



def uniform_field(cp, rs, n: int, low: int = 0):
    """n uniform field elements (canonical words) on the device from CuPy RandomState `rs`: a 62-bit
    draw (from `low`) times 4 plus a 2-bit one, p subtracted where it reaches p. BENCH_INPUTS=uniform
    in this script, bench/exprs.py and bench/sweep.py."""
    w = rs.randint(low, 1 << 62, size=n, dtype=cp.int64).astype(cp.uint64) * cp.uint64(4) \
        + rs.randint(0, 4, size=n, dtype=cp.int64).astype(cp.uint64)
    w[w >= cp.uint64(0xFFFFFFFF00000001)] -= cp.uint64(0xFFFFFFFF00000001)
    return w

class Hooks:
    """Where the libraries come from; bench/cpu_emulation.py swaps these for host builds."""

    @staticmethod
    def has_kernel(placement) -> bool:
        """Only AIRs with a placed .exps.so are timed."""
        return placement.so_path.is_file()

    @staticmethod
    def gen_lib(air: "Air") -> Path:
        return air.so

    @staticmethod
    def before_lib(air: "Air", before_pk: Path) -> Path:
        """The .so of the same AIR in the --before copy of its key."""
        return before_pk / Path(air.so).relative_to(air.pk)

    @staticmethod
    def interp_lib(arch: str) -> tuple[Path, str]:
        return IL.build_gpu(IL.GPU_LIB, arch)

    @staticmethod
    def load_interp(path: Path) -> ctypes.CDLL:
        return IL.load_gpu(path)


HOOKS = Hooks()


# ===================================================================== pure helpers (CPU-testable)
@dataclass
class KernelInfo:
    """What the build dir says about an AIR's generated Q kernel."""

    chunks: int | None = None
    slots: int | None = None
    regs: list[int] = field(default_factory=list)
    source: str = ""            # "build dir" | "exps_min_scratch" | ""

    def chunks_slots(self) -> str:
        c = "?" if self.chunks is None else str(self.chunks)
        s = "?" if self.slots is None else str(self.slots)
        return f"{c}/{s}"

    def regs_text(self) -> str:
        if not self.regs:
            return "?"
        if len(set(self.regs)) == 1 and len(self.regs) > 4:
            return f"{self.regs[0]} x{len(self.regs)}"
        if len(self.regs) > 8:
            return f"{min(self.regs)}-{max(self.regs)} ({len(self.regs)} kernels)"
        return ",".join(map(str, self.regs))


def default_build_dir(pk: Path) -> Path | None:
    """Where `exps-codegen build PK` puts its build files when given no build dir
    (codegen.tasks.default_build_dir: `$EXPS_BUILD_ROOT` or `${XDG_CACHE_HOME:-~/.cache}/exps-codegen/builds`,
    then `<key name>-<12 hex>`); None where codegen.tasks cannot be imported (no doit)."""
    try:
        from codegen.tasks import default_build_dir as build_dir_of
    except ImportError:
        return None
    return build_dir_of(Path(pk).resolve())


def _read_json(p: Path) -> dict:
    try:
        d = json.loads(Path(p).read_text())
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError):
        return {}


def kernel_info(build_dir: Path | None, key: str, min_scratch: int | None) -> KernelInfo:
    """Chunks, scratch slots and registers per chunk kernel from the build dir's manifest.json and
    objs.json (ptxas reports); falls back to exps_min_scratch() (= slots * 256, 0 = one kernel)."""
    info = KernelInfo()
    if build_dir is not None:
        kd = Path(build_dir) / key
        man = _read_json(kd / "manifest.json")
        plan = man.get("plan") or {}
        if "chunks" in plan:
            info.chunks, info.slots, info.source = int(plan["chunks"]), int(plan["slots"]), "build dir"
        regs: dict[int, int] = {}
        objs = _read_json(kd / "objs.json")
        bounded = {str(c) for c in (objs.get("bounded") or {})}
        for field in ("reports", "twin_reports"):   # a chunk the build bounded runs its twin (`_kb`)
            for rep in (objs.get(field) or {}).values():
                for fn, per_arch in (rep or {}).items():
                    m = re.search(r"k[0-9a-f]{16}_q_c(\d+)_k(b?)(?=PK|$)", fn) or \
                        re.search(re.escape(key) + r"_q_c(\d+)_k(b?)(?=PK|$)", fn)
                    if m and bool(m[2]) == (field == "twin_reports") and (m[2] == "b") == (m[1] in bounded):
                        for st in per_arch.values():
                            regs[int(m[1])] = max(regs.get(int(m[1]), 0), int(st.get("registers", 0)))
        info.regs = [regs[c] for c in sorted(regs)]
        if regs:    # the compiled chunk kernels (the IR passes can make fewer than the manifest's plan)
            info.chunks = len(regs)
            if min_scratch is not None:
                info.slots = min_scratch // 256
    if info.chunks is None and min_scratch is not None:
        info.slots = min_scratch // 256
        info.chunks = 1 if min_scratch == 0 else None
        info.source = "exps_min_scratch"
    return info


def floor_ms(n_columns_read: int, n_ext: int, bandwidth_gbs: float) -> float:
    """Each distinct input column read once and the 3 q columns written once, at copy bandwidth."""
    return (n_columns_read + 3) * 8 * n_ext / (bandwidth_gbs * 1e9) * 1e3


def median_ms(samples: list[float]) -> float:
    return float(statistics.median(samples)) if samples else float("nan")


def fmt(x: float | None, nd: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:,.{nd}f}"


def pct(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.0f}%"


TABLE_HEAD = ["AIR", "ops", "chunks/slots", "regs", "generated ms", "interpreter ms", "interp/gen",
              "interp smem-tmp ms", "floor ms", "floor/gen", "ns/row", "muls/row", "Gmul/s",
              "bit-identical"]


def table_rows(results: list[dict]) -> list[list[str]]:
    out = []
    for r in results:
        if r.get("gen_ms") is None or r.get("interp_ms") is None:
            out.append([r["air"], str(r.get("ops", "-"))] + ["-"] * (len(TABLE_HEAD) - 3)
                       + [r.get("status", "?")])
            continue
        gen, itp = r["gen_ms"], r["interp_ms"]
        out.append([
            r["air"], str(r["ops"]), r["chunks_slots"], r["regs"], fmt(gen), fmt(itp),
            f"{itp / gen:.2f}x" if gen else "-",
            fmt(r.get("interp_smem_ms")) if r.get("interp_smem_ms") is not None else "=",
            fmt(r["floor_ms"]), pct(r["floor_ms"] / gen if gen else None),
            fmt(gen * 1e6 / r["n_ext"], 2), str(r["muls_per_row"]), f"{r['gmul_s']:.0f}",
            "yes" if r.get("identical") else "NO",
        ])
    return out


def launches(chunks: int | None, min_scratch: int, n_ext: int, scratch_elems: int | None = None,
             cap_blocks: int | None = None) -> int | None:
    """Kernel launches of one exps_launch at n_ext rows: 1 for a single kernel, chunks x waves
    otherwise; a wave is scratch_elems / (slots x 256) blocks of 256 rows (at most every row; with
    `cap_blocks`, at most that: the original's launcher capped it at 512). scratch_elems None: 512 blocks."""
    if chunks is None:
        chunks = 1 if min_scratch == 0 else None
    if chunks is None:
        return None
    if chunks == 1:
        return 1
    all_blocks = -(-n_ext // 256)
    if scratch_elems is None:
        grid = 512
    elif min_scratch:
        grid = max(1, scratch_elems // min_scratch)
    else:
        grid = all_blocks
    grid = min(grid, all_blocks, cap_blocks or all_blocks)
    return chunks * -(-n_ext // (grid * 256))


@contextlib.contextmanager
def no_topup():
    """The generated launcher without its scratch top-up (EXPS_SCRATCH_MB=0, read at every
    exps_launch), the caller's setting restored after."""
    old = os.environ.get("EXPS_SCRATCH_MB")
    os.environ["EXPS_SCRATCH_MB"] = "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["EXPS_SCRATCH_MB"]
        else:
            os.environ["EXPS_SCRATCH_MB"] = old


#: the chunked launcher's scratch top-up (templates/exps_runtime.cpp exps_topup)
TOPUP_BLOCKS, TOPUP_MB = 2048, 512


def _topup_mb(s: str) -> int:
    """EXPS_SCRATCH_MB as exps_runtime.cpp's exps_topup_bytes reads it: ASCII digits, the default
    when empty, not a number, or still growing past 2^24 before its last digit."""
    if not s:
        return TOPUP_MB
    v = 0
    for ch in s:
        if not "0" <= ch <= "9" or v > 1 << 24:
            return TOPUP_MB
        v = v * 10 + ord(ch) - ord("0")
    return v


def topup_scratch(min_scratch: int, n_ext: int, scratch_elems: int, mb: int | None = None) -> int:
    """The scratch elements a chunked launch of this tree runs with when given `scratch_elems`:
    its own wave of up to TOPUP_BLOCKS blocks (at most `mb` MiB) when the given holds fewer."""
    if mb is None:
        mb = _topup_mb(os.environ.get("EXPS_SCRATCH_MB", ""))
    if not min_scratch:
        return scratch_elems
    slots = min_scratch // 256
    given = scratch_elems // min_scratch
    want = min(-(-n_ext // 256), TOPUP_BLOCKS, (mb << 20) // (slots * 256 * 8))
    return scratch_elems if given >= want else want * min_scratch


BA_HEAD = ["AIR", "ops", "before chunks/slots", "after chunks/slots", "before regs", "after regs",
           "before ms", "after ms", "speed-up", "before Gmul/s", "after Gmul/s", "after floor/gen",
           "launches before/after", "prover scratch: before ms", "after ms", "after, no top-up ms", "speed-up",
           "launches before/after", "bit-identical"]


def _prover_cells(r: dict) -> list[str]:
    """Before / after ms, speed-up and launches with the scratch the prover gives (chunked only;
    "=" where both are single kernels, which take no scratch)."""
    bp, gp = r.get("before_prover_ms"), r.get("gen_prover_ms")
    if bp is None and gp is None:
        return ["="] * 5
    b, g = bp if bp is not None else r["before_ms"], gp if gp is not None else r["gen_ms"]
    gn = r.get("gen_prover_notopup_ms")
    return [fmt(b), fmt(g), fmt(gn) if gn is not None else "-", f"{b / g:.2f}x",
            f"{r.get('before_launches_prover') or r.get('before_launches', '?')}/"
            f"{r.get('launches_prover') or r.get('launches', '?')}"]


def before_after_rows(results: list[dict]) -> list[list[str]]:
    out = []
    for r in results:
        if r.get("before_ms") is None or r.get("gen_ms") is None:
            continue
        b, g = r["before_ms"], r["gen_ms"]
        out.append([r["air"], str(r["ops"]), r.get("before_chunks_slots", "?"), r["chunks_slots"],
                    r.get("before_regs", "?"), r["regs"], fmt(b), fmt(g), f"{b / g:.2f}x",
                    f"{r['before_gmul_s']:.0f}", f"{r['gmul_s']:.0f}", pct(r["floor_ms"] / g),
                    f"{r.get('before_launches', '?')}/{r.get('launches', '?')}", *_prover_cells(r),
                    "yes" if r.get("identical") else "NO"])
    return out


def before_after_report(results: list[dict]) -> str:
    rows = before_after_rows(results)
    if not rows:
        return ""
    sp = sorted(float(r[8][:-1]) for r in rows)
    best = max(rows, key=lambda r: float(r[8][:-1]))
    lines = ["| " + " | ".join(BA_HEAD) + " |", "| " + " | ".join("---" for _ in BA_HEAD) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", f"{len(rows)} AIRs, before vs after in the same run: median speed-up "
              f"{statistics.median(sp):.2f}x, largest {best[8]} ({best[0]}), smallest {sp[0]:.2f}x. "
              "bit-identical = after == before == interpreter on all NExt rows (and after == the numpy "
              "oracle at the oracle size)."]
    return "\n".join(lines) + "\n"


def markdown_table(results: list[dict]) -> str:
    rows = table_rows(results)
    lines = ["| " + " | ".join(TABLE_HEAD) + " |", "| " + " | ".join("---" for _ in TABLE_HEAD) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def plain_table(results: list[dict]) -> str:
    rows = [TABLE_HEAD] + table_rows(results)
    w = [max(len(r[i]) for r in rows) for i in range(len(TABLE_HEAD))]
    return "\n".join("  ".join(c.rjust(w[i]) if i else c.ljust(w[i]) for i, c in enumerate(r)) for r in rows)


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def markdown_report(meta: dict, results: list[dict]) -> str:
    ok = [r for r in results if r.get("status") == "ok"]
    ratio = geomean([r["interp_ms"] / r["gen_ms"] for r in ok])
    lines = [
        f"### Q kernels vs bytecode interpreter, {meta['device']} (NExt = 2^{meta['rows']})", "",
        f"Command: `{meta['command']}`  ",
        f"Device: {meta['device']}, driver {meta['driver']}, CUDA runtime {meta['cuda_runtime']}, "
        f"nvcc {meta['nvcc']}, CuPy {meta['cupy']}; {meta['date']}.  ",
        f"Copy bandwidth (D2D, bytes read + written): {meta['bandwidth_gbs']:,.0f} GB/s. "
        f"CUDA events, median of {meta['reps']} runs after {meta['warmup']} warm-ups, "
        f"{meta['n_input_sets_note']}.", "",
        markdown_table(results), "",
        f"{len(ok)} AIRs timed; interpreter / generated: geometric mean {ratio:.2f}x. "
        "Columns: ops = Q ops; chunks/slots and regs (registers per chunk kernel) of the generated "
        "kernel from its build dir; interpreter = `bench/interp.cu` (bytecode compiled like the `.bin` "
        "writer's, temps in per-block global scratch as the prover's `computeExpression_`, "
        f"{meta['interp_regs']} registers); interp smem-tmp = the same with temps in shared memory "
        "when they fit in 40 KB (later prover revisions; `=` where they do not fit); floor = (distinct "
        "columns read once + 3 q columns) x 8 B x NExt / copy bandwidth; floor/gen, ns/row and Gmul/s "
        "of the generated kernel; muls/row = base-field multiplications (3x3 = 6, 3x1 = 3, 1x1 = 1); "
        "bit-identical = generated and interpreter q equal word for word on all NExt rows (and both "
        "equal to the numpy oracle at "
        f"{'2^' + str(meta['oracle_rows']) if meta['oracle_rows'] else 'no'} rows).",
    ]
    return "\n".join(lines) + "\n"


# ========================================================================================== GPU
FILL_PREAMBLE = r"""
__device__ __forceinline__ unsigned long long bench_sm64(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__device__ __forceinline__ unsigned long long bench_edge(unsigned int k) {
    switch (k) {
%s
    default: return 0ull;
    }
}
"""
FILL_BODY = r"""
const unsigned long long h1 = bench_sm64(seed ^ ((unsigned long long)i * 0xD1B54A32D192ED03ull));
const unsigned long long h2 = bench_sm64(h1 ^ 0x5851F42D4C957F2Dull);
const unsigned long long h3 = bench_sm64(h2);
const unsigned int pick = (unsigned int)(h2 %% 100ull);
out = pick < 40 ? h1 : pick < 60 ? bench_edge((unsigned int)(h3 %% %dull))
    : pick < 80 ? (h3 %% 17ull) : (h3 & 1ull);
"""


class Gpu:
    """CuPy handles, the random-word kernel and timing helpers."""

    def __init__(self) -> None:
        try:
            import cupy as cp
        except ImportError as e:
            raise SystemExit(f"bench/run.py needs CuPy on a CUDA machine: {e}") from None
        self.cp = cp
        try:
            self.dev = cp.cuda.Device(0)
            self.dev.use()
            props = cp.cuda.runtime.getDeviceProperties(0)
        except cp.cuda.runtime.CUDARuntimeError as e:
            raise SystemExit(f"no usable CUDA device: {e}") from None
        self.name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        self.l2 = int(props.get("l2CacheSize", 50 << 20))
        self.cc = f"{props['major']}.{props['minor']}"
        cases = "\n".join(f"    case {k}: return {v}ull;" for k, v in enumerate(EDGE))
        self.fill_k = cp.ElementwiseKernel("uint64 seed", "uint64 out", FILL_BODY % len(EDGE),
                                           "bench_fill_raw_words", preamble=FILL_PREAMBLE % cases)

    def driver(self) -> str:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
            if out:
                return out.splitlines()[0]
        except (OSError, subprocess.TimeoutExpired):
            pass
        v = self.cp.cuda.runtime.driverGetVersion()
        return f"CUDA {v // 1000}.{v % 1000 // 10}"

    def runtime(self) -> str:
        v = self.cp.cuda.runtime.runtimeGetVersion()
        return f"{v // 1000}.{v % 1000 // 10}"

    def fill(self, arr, seed: int) -> None:
        if arr.size:
            self.fill_k(self.cp.uint64(seed & ((1 << 64) - 1)), arr)

    def free_bytes(self) -> int:
        self.cp.get_default_memory_pool().free_all_blocks()
        return int(self.cp.cuda.runtime.memGetInfo()[0])

    def sync(self) -> None:
        self.dev.synchronize()

    def time(self, launch, warmup: int, reps: int, n_sets: int = 1, synced: bool = False) -> list[float]:
        """Per-run milliseconds (CUDA events on the null stream around each launch). `synced`: the
        device is synchronized after every run (as a prover between AIRs), so a stream-ordered
        allocation inside the launch is paid each run, not kept in the pool from the last."""
        cp = self.cp
        for i in range(warmup):
            launch(i % n_sets)
        self.sync()
        evs = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
        for i, (a, b) in enumerate(evs):
            a.record()
            launch((warmup + i) % n_sets)
            b.record()
            if synced:
                b.synchronize()
                self.sync()
        evs[-1][1].synchronize()
        self.sync()
        return [float(cp.cuda.get_elapsed_time(a, b)) for a, b in evs]

    def copy_bandwidth(self, nbytes: int, reps: int = 10) -> dict:
        """D2D cudaMemcpy and an elementwise copy kernel; GB/s counts bytes read + written."""
        cp = self.cp
        n = nbytes // 8
        a = cp.empty(n, dtype=cp.uint64)
        b = cp.empty(n, dtype=cp.uint64)
        self.fill(a, 12345)

        def memcpy(_):
            b.data.copy_from_device_async(a.data, n * 8)

        def kernel(_):
            cp.copyto(b, a)

        t_mc = median_ms(self.time(memcpy, 2, reps))
        t_k = median_ms(self.time(kernel, 2, reps))
        ok = bool(cp.array_equal(a, b))
        gbs = lambda t: 2 * n * 8 / (t * 1e-3) / 1e9  # noqa: E731
        return {"bytes": n * 8, "memcpy_ms": t_mc, "kernel_ms": t_k, "memcpy_gbs": gbs(t_mc),
                "kernel_gbs": gbs(t_k), "gbs": max(gbs(t_mc), gbs(t_k)), "copy_ok": ok}


class GenLib:
    """A generated `.exps.so` (its own static CUDA runtime; same primary context)."""

    def __init__(self, path: Path):
        self.lib = ctypes.CDLL(str(path))
        u64, vp = ctypes.c_uint64, ctypes.c_void_p
        self.lib.exps_launch.argtypes = [vp, vp, vp, u64, u64, u64, u64, u64, u64, vp]
        self.lib.exps_launch.restype = None
        self.lib.exps_min_scratch.restype = ctypes.c_ulonglong
        self.min_scratch = int(self.lib.exps_min_scratch())

    def launch(self, steps: int, q: int, scratch: int, scratch_elems: int, n_ext: int,
               offs: tuple[int, int, int, int]) -> None:
        self.lib.exps_launch(steps, q, scratch, scratch_elems, n_ext, *offs, None)


class InputSet:
    """One set of Q inputs on the device: aux_trace, the const tree, scalars, a StepsParams."""

    def __init__(self, g: Gpu, lay: IL.QLayout, seed: int):
        cp = self.cp = g.cp
        self.aux = cp.empty(lay.aux_elems, dtype=cp.uint64)
        self.const = cp.empty(max(lay.n_const * lay.n_ext, 1), dtype=cp.uint64)
        self.scalars = {k: cp.empty(v, dtype=cp.uint64) for k, v in lay.scalar_sizes.items()}
        g.fill(self.aux, seed)
        g.fill(self.const, seed + 1)
        for i, (k, v) in enumerate(sorted(self.scalars.items())):
            g.fill(v, seed + 2 + i)
        if os.environ.get("BENCH_INPUTS") == "uniform":
            # what the prover's extended-domain inputs look like: every committed and fixed column
            # a low-degree extension, so uniform field elements whatever the trace held (0/1
            # selectors and small integers become random words on the coset); scalars random too.
            # The default mix (small integers and 0/1 on every column) makes Q small on many rows,
            # i.e. the value path's fallback on most warps: a representation test, not a workload.
            rs = cp.random.RandomState(seed + 77)
            for a in (self.aux, self.const, *self.scalars.values()):
                if a.size:
                    a[:] = uniform_field(cp, rs, a.size)
        if os.environ.get("BENCH_ZI") == "uniform" or os.environ.get("BENCH_INPUTS") == "uniform":
            # a real zerofier inverse: uniform field elements, never 0 (the default mix gives Q = 0 on
            # the ~14% of rows whose zi word is 0 or p: the value path's fallback on almost every warp)
            rs = cp.random.RandomState(seed + 99)
            hi = rs.randint(0, 1 << 32, size=lay.n_ext, dtype=cp.int64).astype(cp.uint64)
            lo = rs.randint(1, 1 << 32, size=lay.n_ext, dtype=cp.int64).astype(cp.uint64)
            self.aux[lay.off_zi: lay.off_zi + lay.n_ext] = (hi << cp.uint64(32)) | lo
        fields = {"aux_trace": int(self.aux.data.ptr), "trace": int(self.aux.data.ptr),
                  "pConstPolsExtendedTreeAddress": int(self.const.data.ptr),
                  "pConstPolsAddress": int(self.const.data.ptr)}
        fields.update({k: int(v.data.ptr) for k, v in self.scalars.items()})
        self.steps_arr = cp.asarray(np.array([fields.get(f, 0) for f in IL.STEP_FIELDS], dtype=np.uint64))
        self.steps = int(self.steps_arr.data.ptr)

    def host(self, lay: IL.QLayout):
        """(aux, const, scalars) as numpy arrays (small sizes only)."""
        cp = self.cp
        return (cp.asnumpy(self.aux), cp.asnumpy(self.const)[: lay.n_const * lay.n_ext],
                {k: cp.asnumpy(v) for k, v in self.scalars.items()})


class Interp:
    """libinterp.so bound to one bytecode on the device."""

    def __init__(self, g: Gpu, lib: ctypes.CDLL, si: Json, bc: BC.Bytecode):
        cp = g.cp
        self.g, self.lib, self.si, self.bc = g, lib, si, bc
        self.d_ops = cp.asarray(bc.ops_array())
        self.d_args = cp.asarray(bc.args_array())
        self.d_nums = cp.asarray(bc.numbers_array())
        self.openings = IL.openings_array(si)
        self.d_err = cp.zeros(1, dtype=cp.int32)

    def scratch_elems(self, n_ext: int) -> int:
        return int(self.lib.interp_scratch_per_block(n_ext, self.bc.n_temp1, self.bc.n_temp3)) * N_BLOCKS

    def config(self, n_ext: int, scratch_elems: int, flags: int) -> dict:
        out = (ctypes.c_ulonglong * 5)()
        rc = self.lib.interp_config(self.bc.n_ops, self.bc.n_temp1, self.bc.n_temp3, scratch_elems, n_ext,
                                    N_BLOCKS, self.si["nStages"], IL.n_custom(self.si), flags, out)
        if rc:
            raise RuntimeError(f"interp_config: {rc} ({IL.INTERP_ERRORS.get(rc, 'CUDA error')})")
        return dict(zip(("grid", "block", "staged", "tmp_shared", "smem_bytes"), map(int, out)))

    def launch(self, steps: int, q: int, scratch: int, scratch_elems: int, n_ext: int,
               offs: tuple[int, int, int, int], flags: int) -> None:
        rc = self.lib.interp_launch(steps, int(self.d_ops.data.ptr), int(self.d_args.data.ptr),
                                    int(self.d_nums.data.ptr), self.bc.n_ops, self.bc.n_temp1,
                                    self.bc.n_temp3, q, scratch, scratch_elems, n_ext, N_BLOCKS, *offs,
                                    self.si["nStages"], IL.n_custom(self.si), IL.blowup(self.si),
                                    self.openings.ctypes.data, len(self.openings), flags,
                                    int(self.d_err.data.ptr), None)
        if rc != 0:
            raise RuntimeError(f"interp_launch returned {rc} "
                               f"({IL.INTERP_ERRORS.get(rc, 'a cudaError_t')})")

    def errors(self) -> int:
        return int(self.d_err.get()[0])


# ===================================================================================== per AIR
@dataclass
class Air:
    pk: Path
    rel: str
    key: str
    starkinfo: Path
    expressions: Path
    so: Path

    @property
    def name(self) -> str:
        parts = self.rel.split("/")
        circuit = self.pk.name if self.pk.name != "provingKey" else self.pk.parent.name
        if "provingKey" in parts:                       # shared/pk/<circuit>/provingKey/...
            circuit = parts[parts.index("provingKey") - 1]
        return f"{circuit}/{Path(self.rel).name}"


def find_airs(pk: Path) -> tuple[list[Air], list[str]]:
    from codegen.discover import discover
    airs, notes, seen = [], [], {}
    for p in discover(pk):
        if not HOOKS.has_kernel(p):
            notes.append(f"{pk.name}/{p.rel}: no .exps.so (skipped by the build, or not built)")
            continue
        if p.key in seen:
            notes.append(f"{pk.name}/{p.rel}: same kernel as {seen[p.key]} (not timed twice)")
            continue
        seen[p.key] = p.rel
        airs.append(Air(pk, p.rel, p.key, p.starkinfo, p.expressions, p.so_path))
    return airs, notes


def rows_that_fit(g: Gpu, lay_of, rows: int, need_of, min_rows: int = 12) -> int:
    free = g.free_bytes()
    while rows > min_rows and need_of(lay_of(1 << rows)) > 0.8 * free:
        rows -= 1
    return rows


def oracle_check(g: Gpu, si: Json, ei: Json, bc: BC.Bytecode, gen: GenLib, itp: Interp, rows: int,
                 seed: int, info: KernelInfo, smem: bool) -> list[str]:
    """Generated and interpreter vs the numpy oracle at 2^rows rows."""
    from codegen.check import reference
    cp = g.cp
    n = 1 << rows
    lay = IL.QLayout.of(si, n)
    ins = InputSet(g, lay, seed)
    aux, const, sc = ins.host(lay)
    dd = reference.DomainData(
        n, {s: aux[lay.off_cm[s]: lay.off_cm[s] + c * n].reshape(c, n) for s, c in lay.cols.items()},
        const.reshape(-1, n) if lay.n_const else np.zeros((0, n), np.uint64),
        aux[lay.off_zi: lay.off_zi + n], sc["publicInputs"], sc["challenges"], sc["airValues"],
        sc["airgroupValues"], sc["proofValues"], sc["evals"])
    want = reference.eval_q(si, ei, dd)
    errs = []
    slots = max(info.slots or 0, gen.min_scratch // 256, 1)
    gscr = cp.empty(slots * GEN_WAVE, dtype=cp.uint64)
    iscr = cp.empty(max(itp.scratch_elems(n), 1), dtype=cp.uint64)
    runs = [("generated", lambda q: gen.launch(ins.steps, q, int(gscr.data.ptr), gscr.size, n,
                                               lay.offsets())),
            ("interpreter", lambda q: itp.launch(ins.steps, q, int(iscr.data.ptr), iscr.size, n,
                                                 lay.offsets(), 0))]
    if smem:
        runs.append(("interpreter smem-tmp", lambda q: itp.launch(ins.steps, q, int(iscr.data.ptr),
                                                                  iscr.size, n, lay.offsets(),
                                                                  IL.TMP_SHARED)))
    for name, run in runs:
        q = cp.full(3 * n, np.uint64(POISON), dtype=cp.uint64)
        run(int(q.data.ptr))
        g.sync()
        got = cp.asnumpy(q).reshape(3, n)
        if not np.array_equal(got, want):
            bad = np.argwhere(got != want)
            i = tuple(int(x) for x in bad[0])
            errs.append(f"{name} vs oracle at 2^{rows}: {len(bad)} words differ, first {i}: "
                        f"{int(got[i]):#x} != {int(want[i]):#x}")
    if itp.errors():
        errs.append(f"interpreter error bits {itp.errors()}")
    return errs


def bench_air(g: Gpu, ilib: ctypes.CDLL, air: Air, a, bandwidth: float, interp_regs: int | None) -> dict:
    cp = g.cp
    si = json.loads(air.starkinfo.read_text())
    ei = json.loads(air.expressions.read_text())
    res: dict[str, Any] = {"air": air.name, "rel": air.rel, "pk": str(air.pk), "key": air.key}
    try:
        bc = BC.q_bytecode(si, ei)
    except BC.BytecodeError as e:
        res["status"] = f"no bytecode: {e}"
        return res
    code = BC.prepared_code(si, BC.find_expression(ei, si["cExpId"]), True, "raise")
    serr = BC.slot_errors(code, bc)
    if serr:
        res["status"] = f"bad slot allocation: {serr[0]}"
        return res
    res.update({"ops": bc.n_ops, "muls_per_row": bc.muls_per_row(), "n_temp1": bc.n_temp1,
                "n_temp3": bc.n_temp3, "out_dim": bc.out_dim})
    bin_path = Path(str(air.starkinfo)[: -len(".starkinfo.json")] + ".bin")
    if bin_path.is_file():
        from codegen.check.binfile import read_bin
        be = read_bin(bin_path).expressions.get(si["cExpId"])
        same = be is not None and tuple(bc.ops) == be.op_kinds and tuple(bc.args) == be.args
        res["bin_match"] = bool(same)
    gen = GenLib(HOOKS.gen_lib(air))
    build_dir = a.build_dir_of.get(str(air.pk)) or default_build_dir(air.pk)
    info = kernel_info(build_dir if build_dir is not None and Path(build_dir).is_dir() else None, air.key,
                       gen.min_scratch)
    res.update({"chunks_slots": info.chunks_slots(), "regs": info.regs_text(), "gen_regs": info.regs,
                "kernel_info_from": info.source, "min_scratch": gen.min_scratch})
    itp = Interp(g, ilib, si, bc)
    cols = BC.distinct_columns(si, bc)
    gen_slots = max(info.slots or 0, gen.min_scratch // 256, 1)
    bgen, binfo = None, None
    before_pk = getattr(a, "before_of", {}).get(str(air.pk))
    if before_pk is not None:
        bso = HOOKS.before_lib(air, Path(before_pk))
        if bso.is_file():
            bgen = GenLib(bso)
            bdir = a.before_build_dir_of.get(str(air.pk))
            binfo = kernel_info(bdir if bdir and Path(bdir).is_dir() else None, air.key, bgen.min_scratch)
            gen_slots = max(gen_slots, binfo.slots or 0, bgen.min_scratch // 256)
            res.update({"before_so": str(bso), "before_chunks_slots": binfo.chunks_slots(),
                        "before_regs": binfo.regs_text(), "before_gen_regs": binfo.regs})
        else:
            res["before_so"] = f"absent: {bso}"

    # ---- oracle check at a small size
    errs: list[str] = []
    if a.oracle_rows:
        errs += oracle_check(g, si, ei, bc, gen, itp, a.oracle_rows, a.seed + 7, info, not a.no_smem)

    # ---- full size
    def need(lay: IL.QLayout) -> int:
        return (lay.input_bytes() + 2 * 3 * 8 * lay.n_ext + 8 * ample_scratch(gen_slots, lay.n_ext)
                + 8 * itp.scratch_elems(lay.n_ext))
    rows = rows_that_fit(g, lambda n: IL.QLayout.of(si, n), a.rows, need)
    n = 1 << rows
    lay = IL.QLayout.of(si, n)
    n_sets = 1
    if lay.input_bytes() < 2 * g.l2:
        n_sets = int(min(8, math.ceil(3 * g.l2 / max(lay.input_bytes(), 1))))
        while n_sets > 1 and n_sets * lay.input_bytes() + need(lay) > 0.8 * g.free_bytes():
            n_sets -= 1
    seed = a.seed * 1_000_003 + zlib.crc32(air.key.encode())
    sets = [InputSet(g, lay, seed + 101 * k) for k in range(n_sets)]
    q_gen = cp.full(3 * n, np.uint64(POISON), dtype=cp.uint64)
    q_int = cp.full(3 * n, np.uint64(POISON2), dtype=cp.uint64)
    gscr = cp.empty(ample_scratch(gen_slots, n), dtype=cp.uint64)
    iscr = cp.empty(max(itp.scratch_elems(n), 1), dtype=cp.uint64)
    offs = lay.offsets()
    p_elems, p_src = prover_scratch(si, ei, air.starkinfo)
    res.update({"ample_scratch": int(gscr.size), "prover_scratch": p_elems, "prover_scratch_from": p_src})
    res.update({"rows": rows, "n_ext": n, "input_sets": n_sets, "input_bytes": lay.input_bytes(),
                "columns_read": len(cols), "interp_config": itp.config(n, iscr.size, 0)})
    smem_cfg = itp.config(n, iscr.size, IL.TMP_SHARED)
    do_smem = not a.no_smem and smem_cfg["tmp_shared"]
    if do_smem:
        res["interp_smem_config"] = smem_cfg

    # scratch elements a generated kernel is given: `gscr` whole ("ample"), or the prover's (no more
    # than the buffer: beyond it the wave is every row anyway)
    p_use = min(p_elems, int(gscr.size)) if p_elems else None

    def run_gen(k: int, q=q_gen, elems: int | None = None, lib=gen) -> None:
        lib.launch(sets[k].steps, int(q.data.ptr), int(gscr.data.ptr), elems or gscr.size, n, offs)

    def run_int(k: int, q=q_int, flags: int = 0) -> None:
        itp.launch(sets[k].steps, int(q.data.ptr), int(iscr.data.ptr), iscr.size, n, offs, flags)

    def run_before(k: int, q=q_gen) -> None:
        run_gen(k, q, None, bgen)

    def run_gen_p(k: int, q=q_gen) -> None:
        run_gen(k, q, p_use)

    def run_before_p(k: int, q=q_gen) -> None:
        run_gen(k, q, p_use, bgen)

    chunked = (gen.min_scratch > 0 or (info.chunks or 1) > 1
               or (bgen is not None and (bgen.min_scratch > 0 or (binfo.chunks or 1) > 1)))

    run_gen(0)
    run_int(0)
    g.sync()
    identical = bool(cp.array_equal(q_gen, q_int))
    unwritten = (int(cp.count_nonzero(q_gen == np.uint64(POISON)))
                 + int(cp.count_nonzero(q_int == np.uint64(POISON2))))
    if not identical:
        diff = cp.nonzero(q_gen != q_int)[0]
        i = int(diff[0])
        errs.append(f"generated != interpreter on {int(diff.size)} of {3 * n} words, first at column "
                    f"{i // n} row {i % n}: {int(q_gen[i]):#x} vs {int(q_int[i]):#x}")
    if unwritten:
        errs.append(f"{unwritten} q words left unwritten (poison)")
    def differs(run, poison: int, ref) -> int:
        """Words where `run` (into a poisoned buffer) differs from `ref` (0: the same)."""
        q_x = cp.full(3 * n, np.uint64(poison), dtype=cp.uint64)
        run(q_x)
        g.sync()
        return int(cp.count_nonzero(q_x != ref))

    if bgen is not None and (bad := differs(lambda q: run_before(0, q), POISON2, q_gen)):
        errs.append(f"generated != before on {bad} of {3 * n} words")
        identical = False
    if p_use is not None and chunked and gen.min_scratch <= p_use and differs(lambda q: run_gen_p(0, q), POISON2,
                                                                              q_int):
        errs.append("generated with the prover's scratch != interpreter")
        identical = False
    if p_use is not None and chunked and gen.min_scratch <= p_use:
        with no_topup():
            if differs(lambda q: run_gen_p(0, q), POISON2, q_int):
                errs.append("generated with the prover's scratch, no top-up != interpreter")
                identical = False
    if do_smem and differs(lambda q: run_int(0, q, IL.TMP_SHARED), POISON, q_gen):
        errs.append("interpreter (smem temps) != generated")
        identical = False
    if itp.errors():
        errs.append(f"interpreter error bits {itp.errors()}")
        identical = False

    # ---- timing
    t_gen_a = g.time(run_gen, a.warmup, a.reps, n_sets)
    t_bef_a = g.time(run_before, a.warmup, a.reps, n_sets) if bgen is not None else []
    t_int = g.time(run_int, a.warmup, a.reps, n_sets)
    t_smem = g.time(lambda k: run_int(k, flags=IL.TMP_SHARED), a.warmup, a.reps, n_sets) if do_smem else []
    t_gen_b = g.time(run_gen, a.warmup, a.reps, n_sets)
    t_bef_b = g.time(run_before, a.warmup, a.reps, n_sets) if bgen is not None else []
    if p_use is not None and chunked:     # single kernels take no scratch: same as above
        fits = gen.min_scratch <= p_use
        # this tree's launcher tops the prover's scratch up (EXPS_SCRATCH_MB); timed synced, so the
        # allocation is paid every run; and without the top-up (EXPS_SCRATCH_MB=0): the prover's scratch alone
        t_gp = g.time(run_gen_p, a.warmup, a.reps, n_sets, synced=True) if fits else []
        with no_topup():
            t_gn = g.time(run_gen_p, a.warmup, a.reps, n_sets, synced=True) if fits else []
        t_bp = (g.time(run_before_p, a.warmup, a.reps, n_sets, synced=True)
                if bgen is not None and bgen.min_scratch <= p_use else [])
        res.update({"gen_prover_ms": median_ms(t_gp) if t_gp else None,
                    "gen_prover_notopup_ms": median_ms(t_gn) if t_gn else None,
                    "before_prover_ms": median_ms(t_bp) if t_bp else None,
                    "launches_prover": (launches(info.chunks, gen.min_scratch, n,
                                                 topup_scratch(gen.min_scratch, n, p_use)) if fits else None),
                    "launches_prover_notopup": launches(info.chunks, gen.min_scratch, n, p_use) if fits else None,
                    "before_launches_prover": (launches(binfo.chunks, bgen.min_scratch, n, p_use, 512)
                                               if t_bp else None)})
    gen_ms = median_ms(t_gen_a + t_gen_b)
    if bgen is not None:
        bms = median_ms(t_bef_a + t_bef_b)
        res.update({"before_ms": bms, "before_ms_runs": t_bef_a + t_bef_b,
                    "before_gmul_s": bc.muls_per_row() * n / (bms * 1e-3) / 1e9,
                    "before_launches": launches(binfo.chunks, bgen.min_scratch, n, int(gscr.size), 512)})
    m_a, m_b = median_ms(t_gen_a), median_ms(t_gen_b)
    res.update({
        "gen_ms": gen_ms, "gen_ms_runs": t_gen_a + t_gen_b,
        "gen_repeat_spread": abs(m_a - m_b) / max(min(m_a, m_b), 1e-9),
        "interp_ms": median_ms(t_int), "interp_ms_runs": t_int,
        "interp_smem_ms": median_ms(t_smem) if t_smem else None, "interp_smem_ms_runs": t_smem,
        "floor_ms": floor_ms(len(cols), n, bandwidth),
        "launches": launches(info.chunks, gen.min_scratch, n, int(gscr.size)),
        "gmul_s": bc.muls_per_row() * n / (gen_ms * 1e-3) / 1e9,
        "interp_gmul_s": bc.muls_per_row() * n / (median_ms(t_int) * 1e-3) / 1e9,
        "identical": identical and not errs, "errors": errs,
        "interp_regs": interp_regs,
    })
    res["status"] = "ok" if not errs else "MISMATCH"
    return res      # the device buffers are freed with this frame (Gpu.free_bytes empties the pool)


# ======================================================================================= main
def add_common_args(ap: argparse.ArgumentParser, rows: str, per: str, budget: str) -> None:
    """The options run.py and exprs.py share (`rows`: what 2^--rows counts; `per`: what one timed
    run times; `budget`: what --budget-s stops)."""
    ap.add_argument("--pk", action="append", required=True, help="provingKey directory (repeatable)")
    ap.add_argument("--rows", type=int, default=22, help=f"log2 {rows} (default 22; lowered if memory is short)")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"), help="output dir (default $OUT)")
    ap.add_argument("--reps", type=int, default=20, help=f"timed runs per {per} (median; default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    ap.add_argument("--oracle-rows", type=int, default=10,
                    help="log2 rows of the numpy-oracle check per AIR (0 = off; default 10)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--air", action="append", default=[], help="only AIRs whose path contains this")
    ap.add_argument("--bandwidth-mib", type=int, default=2048, help="copy size of the bandwidth test")
    ap.add_argument("--budget-s", type=float, default=450.0, help=f"{budget} after this many seconds (default 450)")


def check_common_args(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Validate the shared options; --pk becomes a list of resolved directories."""
    if a.rows < 8 or a.rows > 30:
        ap.error("--rows must be in [8, 30]")
    if a.reps < 1 or a.warmup < 0:
        ap.error("--reps >= 1 and --warmup >= 0")
    a.pk = [Path(p).resolve() for p in a.pk]
    for p in a.pk:
        if not p.is_dir():
            ap.error(f"--pk {p}: not a directory")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    add_common_args(ap, "NExt", "kernel", "stop timing new AIRs")
    ap.add_argument("--no-smem", action="store_true", help="skip the shared-memory-temps interpreter")
    ap.add_argument("--build", action="store_true", help="run `exps-codegen build PK --arch ARCH` first")
    ap.add_argument("--arch", default="90", help="GPU arch for --build and libinterp.so (default 90)")
    ap.add_argument("--build-dir", action="append", default=[],
                    help="build dir of the matching --pk (same order; default: the one `exps-codegen build PK` "
                         "uses, <$EXPS_BUILD_ROOT or ${XDG_CACHE_HOME:-~/.cache}/exps-codegen/builds>/"
                         "<key name>-<12 hex>)")
    ap.add_argument("--before", action="append", default=[],
                    help="the same key built by an earlier version (its .so placed there), matched to --pk "
                         "by order: timed on the same inputs in the same run, q compared word for word")
    ap.add_argument("--before-build-dir", action="append", default=[],
                    help="build dir of the matching --before (same order)")
    a = ap.parse_args(argv)
    check_common_args(ap, a)
    if len(a.build_dir) > len(a.pk):
        ap.error("more --build-dir than --pk")
    a.build_dir_of = {str(p): Path(d).resolve() for p, d in zip(a.pk, a.build_dir)}
    if len(a.before) > len(a.pk) or len(a.before_build_dir) > len(a.before):
        ap.error("more --before than --pk, or more --before-build-dir than --before")
    a.before_of = {str(p): Path(d).resolve() for p, d in zip(a.pk, a.before)}
    a.before_build_dir_of = {str(a.pk[i]): Path(d).resolve() for i, d in enumerate(a.before_build_dir)}
    return a


def nvcc_version() -> str:
    try:
        out = subprocess.run([IL.nvcc_path(), "--version"], capture_output=True, text=True, timeout=60).stdout
        m = re.search(r"release (\S+),", out)
        return m[1] if m else "?"
    except (IL.BuildError, OSError, subprocess.TimeoutExpired):
        return "absent"


def run_build(pk: Path, arch: str, build_dir: Path | None) -> None:
    argv = [sys.executable, "-m", "codegen.cli", "build", str(pk), "--arch", arch]
    if build_dir:
        argv += ["--build-dir", str(build_dir)]
    print(f"$ {shlex.join(argv)}", flush=True)
    p = subprocess.run(argv, cwd=REPO)
    if p.returncode != 0:
        raise SystemExit(f"exps-codegen build {pk} failed (rc {p.returncode})")


def write_png(path: Path, results: list[dict], meta: dict) -> str:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return f"bench.png not written (matplotlib: {e})"
    ok = [r for r in results if r.get("status") == "ok"]
    if not ok:
        return "bench.png not written (no AIR timed)"
    names = [r["air"] for r in ok]
    series = [("generated", [r["gen_ms"] for r in ok]), ("interpreter", [r["interp_ms"] for r in ok])]
    if any(r.get("interp_smem_ms") for r in ok):
        series.append(("interpreter, smem temps",
                       [r.get("interp_smem_ms") or float("nan") for r in ok]))
    series.append(("memory floor", [r["floor_ms"] for r in ok]))
    w = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(ok) + 2), 5.5))
    for i, (label, ys) in enumerate(series):
        xs = [k + (i - (len(series) - 1) / 2) * w for k in range(len(ok))]
        ax.bar(xs, ys, w, label=label)
    ax.set_yscale("log")
    ax.set_ylabel("ms (log scale)")
    ax.set_xticks(range(len(ok)))
    ax.set_xticklabels(names, rotation=70, ha="right", fontsize=7)
    ax.set_title(f"Q evaluation, NExt = 2^{meta['rows']}, {meta['device']}")
    ax.legend(fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return f"wrote {path}"


def main(argv: list[str] | None = None) -> int:
    cwd = os.getcwd()
    try:
        return _main(argv)
    finally:
        os.chdir(cwd)


def _main(argv: list[str] | None) -> int:
    a = parse_args(argv)
    t_start = time.monotonic()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(REPO)
    command = "python3 bench/run.py " + shlex.join(sys.argv[1:] if argv is None else argv)

    # 1. the interpreter library (nvcc) and, optionally, the generated kernels
    so, build_text = HOOKS.interp_lib(a.arch)
    interp_regs = IL.ptxas_registers(build_text)
    print(f"libinterp.so: {so} ({interp_regs} registers per ptxas)", flush=True)
    warn = [ln for ln in build_text.splitlines() if "warning" in ln.lower()]
    if warn:
        print("libinterp.so build warnings:\n  " + "\n  ".join(warn[:10]), flush=True)
    if a.build:
        for pk in a.pk:
            run_build(pk, a.arch, a.build_dir_of.get(str(pk)))

    g = Gpu()
    ilib = HOOKS.load_interp(so)
    meta: dict[str, Any] = {
        "command": command, "device": g.name, "compute_capability": g.cc, "driver": g.driver(),
        "cuda_runtime": g.runtime(), "cupy": g.cp.__version__, "nvcc": nvcc_version(),
        "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "rows": a.rows, "reps": a.reps, "warmup": a.warmup, "oracle_rows": a.oracle_rows,
        "interp_regs": interp_regs, "interp_blocks": N_BLOCKS, "l2_bytes": g.l2,
    }
    print(f"device: {g.name} (cc {g.cc}), driver {meta['driver']}, CUDA runtime {meta['cuda_runtime']}, "
          f"CuPy {meta['cupy']}", flush=True)

    # 2. copy bandwidth
    bw = g.copy_bandwidth(min(a.bandwidth_mib << 20, g.free_bytes() // 4))
    meta["bandwidth"] = bw
    meta["bandwidth_gbs"] = bw["gbs"]
    print(f"copy bandwidth: memcpy {bw['memcpy_gbs']:,.0f} GB/s, kernel {bw['kernel_gbs']:,.0f} GB/s "
          f"(read + written, {bw['bytes'] >> 20} MiB)", flush=True)

    # 3. AIRs
    results: list[dict] = []
    notes: list[str] = []
    airs: list[Air] = []
    for pk in a.pk:
        found, nts = find_airs(pk)
        notes += nts
        airs += [x for x in found if not a.air or any(s in f"{pk}/{x.rel}" for s in a.air)]
    if not airs:
        print("no AIR with a placed .exps.so: run `exps-codegen build PK --arch 90` first (or --build)",
              file=sys.stderr)
    fatal = None
    for i, air in enumerate(airs):
        if fatal or time.monotonic() - t_start > a.budget_s:
            results.append({"air": air.name, "rel": air.rel, "status":
                            "not run (" + (fatal or f"time budget {a.budget_s:.0f} s spent") + ")"})
            continue
        t0 = time.monotonic()
        try:
            r = bench_air(g, ilib, air, a, bw["gbs"], interp_regs)
        except Exception as e:  # noqa: BLE001 - report and go on (unless the context is gone)
            r = {"air": air.name, "rel": air.rel, "status": f"error: {type(e).__name__}: {e}"[:300],
                 "traceback": traceback.format_exc()}
            try:
                g.sync()
            except Exception as e2:  # noqa: BLE001 - a sticky error: every later call fails too
                fatal = f"CUDA context lost in {air.name}: {e2}"[:200]
        results.append(r)
        if r.get("status") == "ok":
            msg = (f"gen {r['gen_ms']:.3f} ms, interp {r['interp_ms']:.3f} ms "
                   f"({r['interp_ms'] / r['gen_ms']:.2f}x), NExt 2^{r['rows']}, bit-identical")
        else:
            msg = r.get("status", "?") + ("; " + "; ".join(r.get("errors", [])) if r.get("errors") else "")
        print(f"[{i + 1}/{len(airs)}] {air.name}: {msg} ({time.monotonic() - t0:.1f}s)", flush=True)

    # 4. reports
    meta["n_input_sets_note"] = ("one input set per AIR (inputs larger than L2)"
                                 if all(r.get("input_sets", 1) == 1 for r in results)
                                 else "input sets rotated where they fit in L2")
    meta["notes"] = notes
    meta["elapsed_s"] = time.monotonic() - t_start
    (out / "bench.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1, default=str) + "\n")
    md = markdown_report(meta, results)
    ba = before_after_report(results)
    if ba:
        md += "\n#### Before vs after\n\n" + ba
    (out / "bench.md").write_text(md)
    png = write_png(out / "bench.png", results, meta)
    for nt in notes:
        print("note:", nt)
    print(png)
    bad = [r for r in results if r.get("status") != "ok"]
    for r in bad:
        print(f"FAILED {r['air']}: {r.get('status')} {'; '.join(r.get('errors', []))}")
        if r.get("traceback"):
            print(r["traceback"])
    print(f"\n{md.splitlines()[0]}\n{command}\n{g.name}, driver {meta['driver']}, copy {bw['gbs']:,.0f} GB/s, "
          f"{meta['elapsed_s']:.0f} s\n")
    print(plain_table(results))
    if ba:
        print("\n" + ba)
    return 1 if bad or not results else 0


if __name__ == "__main__":
    sys.exit(main())
