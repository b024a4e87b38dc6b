#!/usr/bin/env python3
"""GPU check and register-only micro-benchmark of the field ops of `templates/gen_common.cuh`.

    python3 bench/fieldops.py --out $OUT            # on the GPU machine (nvcc, a GPU, numpy)

Builds bench/fieldops.cu twice into one library (bench/fieldops.cu says why):
  cur   the header's device forms (carry chains, behind __CUDA_ARCH__),
  port  the same header with -DEXPS_PORTABLE: the portable C forms the host check runs, on the GPU.
A change of a device form is checked here before any kernel runs it; to compare a candidate form
with the header's, build it as a third namespace the same way (FO_NS and its -I / -D flags).

Check: every op (gl_add, gl_sub, gl_mul, gl_neg, gl3_mul, gl3_mul31, gl3_add, gl3_sub; gl_inv on
--n-inv) on --n (default 2^24) operand pairs, of which the first are every ordered pair of EDGE
(and, for the extension ops, every pair placed at every pair of components), the rest a mix of
uniform words, edge values and their neighbours, small integers, 0/1 and words with a 0 / 1 / EPS
low half; every variant compared word for word with the numpy oracle (codegen/check/gl64.py).

Bench: each op in registers (bench_k in fieldops.cu), --reps timed launches of SMs x 8 blocks x
256 threads, median; base-field multiplications per second (3x3 = 6, 3x1 = 3) or adds/subs per
second. Writes $OUT/fieldops.json and fieldops.md; prints the tables. Exit 1 on any mismatch.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from codegen.check import gl64  # noqa: E402

P = 0xFFFFFFFF00000001
EPS = 0xFFFFFFFF
M64 = (1 << 64) - 1
#: edge values: 0/1/small, EPS and 2^32 neighbours, p neighbours, 2^63, 2^64 - k, half-word patterns
EDGE = tuple(sorted({
    0, 1, 2, 3, 4, 5, 7, 8, 255, 256, 65535, 65536,
    EPS - 2, EPS - 1, EPS, EPS + 1, EPS + 2, (1 << 32) + 1, 2 * EPS, 1 << 33, (1 << 33) + 1,
    (1 << 63) - 1, 1 << 63, (1 << 63) + 1,
    P - EPS, P - 3, P - 2, P - 1, P, P + 1, P + 2, P + 3, (2 * P) & M64,
    M64 - 2, M64 - 1, M64,
    0x00000001FFFFFFFF, 0x80000000FFFFFFFF, 0xFFFFFFFF7FFFFFFF, 0x80000000, 0xFFFFFFFE00000000,
    0x7FFFFFFF80000000, 0xFFFFFFFEFFFFFFFE,
}))
OPS = {"add": 0, "sub": 1, "mul": 2, "neg": 3, "mul33": 4, "mul31": 5, "add33": 6, "sub33": 7, "inv": 8,
       "muladd33": 10}
DIM3 = {"mul33", "mul31", "add33", "sub33", "muladd33"}
BENCH = {  # op -> (id, counted ops per thread per iteration, what is counted, iterations)
    "gl_add": (0, 8, "adds", 4096), "gl_sub": (1, 8, "subs", 4096), "gl_mul": (2, 8, "mults", 4096),
    "gl3_mul": (4, 18, "base mults", 1024), "q_mix": (9, 18, "base mults", 1024),
}
#: namespace -> extra nvcc flags of its build of bench/fieldops.cu
VARIANTS = {"port": ["-DEXPS_PORTABLE"], "cur": []}
#: column titles of fieldops.md
LABELS = {"port": "portable C", "cur": "device forms"}


# ------------------------------------------------------------------------------------ inputs
def random_words(rng: np.random.Generator, n: int) -> np.ndarray:
    edge = np.array(EDGE, dtype=np.uint64)
    uni = rng.integers(0, 1 << 64, size=n, dtype=np.uint64, endpoint=False)
    e = edge[rng.integers(0, len(edge), size=n)]
    near = e + rng.integers(-3, 4, size=n).astype(np.int64).astype(np.uint64)   # wraps mod 2^64
    small = rng.integers(0, 1000, size=n).astype(np.uint64)
    bit = rng.integers(0, 2, size=n).astype(np.uint64)
    half = (uni & np.uint64(0xFFFFFFFF00000000)) | np.array([0, 1, EPS], dtype=np.uint64)[rng.integers(0, 3, size=n)]
    pick = rng.random(n)
    out = uni.copy()
    for lo, hi, v in ((0.30, 0.50, e), (0.50, 0.65, near), (0.65, 0.80, small), (0.80, 0.85, bit),
                      (0.85, 1.0, half)):
        m = (pick >= lo) & (pick < hi)
        out[m] = v[m]
    return out


def edge_pairs() -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of edge values."""
    e = np.array(EDGE, dtype=np.uint64)
    return np.repeat(e, len(e)), np.tile(e, len(e))


def edge_triples() -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair (x, y) of edge values at every component pair (i, j): a[i] = x, b[j] = y,
    the other components edge values too. Returns (m, 3) arrays."""
    e = np.array(EDGE, dtype=np.uint64)
    k = len(e)
    x, y = edge_pairs()
    rows = []
    for i in range(3):
        for j in range(3):
            a = np.empty((k * k, 3), np.uint64)
            b = np.empty((k * k, 3), np.uint64)
            idx = np.arange(k * k)
            for c in range(3):
                a[:, c] = e[(idx * (c + 3) + 7 * c + i) % k]
                b[:, c] = e[(idx * (c + 5) + 11 * c + j) % k]
            a[:, i] = x
            b[:, j] = y
            rows.append((a, b))
    return np.concatenate([r[0] for r in rows]), np.concatenate([r[1] for r in rows])


def make_inputs(op: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): n elements (n x 3 words for the extension ops), edge pairs first."""
    rng = np.random.default_rng(seed)
    if op in DIM3:
        ea, eb = edge_triples()
        m = max(n - len(ea), 0)
        a = np.concatenate([ea, random_words(rng, 3 * m).reshape(m, 3)])[:n]
        b = np.concatenate([eb, random_words(rng, 3 * m).reshape(m, 3)])[:n]
        return np.ascontiguousarray(a), np.ascontiguousarray(b)
    ea, eb = edge_pairs()
    m = max(n - len(ea), 0)
    return (np.concatenate([ea, random_words(rng, m)])[:n].copy(),
            np.concatenate([eb, random_words(rng, m)])[:n].copy())


# ------------------------------------------------------------------------------------ oracle
_A: np.ndarray | None = None
_B: np.ndarray | None = None


def _oracle_slice(args: tuple[str, int, int]) -> np.ndarray:
    op, lo, hi = args
    a, b = _A[lo:hi], _B[lo:hi]
    if op in DIM3:
        ta, tb = (a[:, 0], a[:, 1], a[:, 2]), (b[:, 0], b[:, 1], b[:, 2])
        r = {"mul33": lambda: gl64.mul33(ta, tb), "mul31": lambda: gl64.mul31(ta, tb[0]),
             "add33": lambda: gl64.add3(ta, tb), "sub33": lambda: gl64.sub3(ta, tb),
             "muladd33": lambda: gl64.add3(gl64.mul33(ta, tb), ta)}[op]()
        return np.stack(r, axis=1)
    return {"add": lambda: gl64.add(a, b), "sub": lambda: gl64.sub(a, b), "mul": lambda: gl64.mul(a, b),
            "neg": lambda: gl64.neg(a), "inv": lambda: gl64.inv(a)}[op]()


def oracle(op: str, a: np.ndarray, b: np.ndarray, workers: int) -> np.ndarray:
    """numpy oracle, split over processes (forked: they see a, b without copies)."""
    global _A, _B
    _A, _B = a, b
    n = len(a)
    step = max(1 << 16, -(-n // max(workers, 1)))
    parts = [(op, lo, min(lo + step, n)) for lo in range(0, n, step)]
    if workers <= 1 or len(parts) == 1:
        return np.concatenate([_oracle_slice(p) for p in parts])
    import multiprocessing as mp
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as ex:
        return np.concatenate(list(ex.map(_oracle_slice, parts)))


def first_diff(got: np.ndarray, want: np.ndarray, a: np.ndarray, b: np.ndarray) -> str:
    bad = np.argwhere(got != want)
    i = int(bad[0][0])
    return (f"{len(bad)} words differ; first element {i}: a={a[i].tolist()} b={b[i].tolist()} "
            f"got={got[i].tolist()} want={want[i].tolist()}")


# ------------------------------------------------------------------------------------ build / run
def build(out_dir: Path, arch: str) -> tuple[Path, dict[str, str]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    objs, reports = [], {}
    procs = {}
    for ns, flags in VARIANTS.items():
        extra = ["-I", str(REPO / "templates"), *flags]
        obj = out_dir / f"fieldops_{ns}.o"
        argv = ["nvcc", "-O3", f"-arch=sm_{arch}", "-Xcompiler", "-fPIC", "-Xptxas", "-v", "-c",
                f"-DFO_NS={ns}", *extra, str(REPO / "bench" / "fieldops.cu"), "-o", str(obj)]
        procs[ns] = (subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), argv)
        objs.append(obj)
    for ns, (pr, argv) in procs.items():
        text = pr.communicate()[0]
        if pr.returncode:
            raise RuntimeError(f"{shlex.join(argv)} failed:\n{text}")
        reports[ns] = text
    so = out_dir / "fieldops.so"
    subprocess.run(["nvcc", "-shared", f"-arch=sm_{arch}", "-o", str(so), *map(str, objs)], check=True)
    return so, reports


def load(so: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(so))
    for ns in VARIANTS:
        f = getattr(lib, f"{ns}_check")
        f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        g = getattr(lib, f"{ns}_bench")
        g.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
        g.restype = ctypes.c_int
    return lib


def run_check(lib: ctypes.CDLL, ns: str, op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty_like(a)
    rc = getattr(lib, f"{ns}_check")(OPS[op], a.ctypes.data, b.ctypes.data, out.ctypes.data, len(a))
    if rc:
        raise RuntimeError(f"{ns}_check({op}) returned CUDA error {rc}")
    return out


def run_bench(lib: ctypes.CDLL, ns: str, op: str, blocks: int, reps: int) -> list[float]:
    oid, _, _, iters = BENCH[op]
    ms = (ctypes.c_float * reps)()
    rc = getattr(lib, f"{ns}_bench")(oid, blocks, iters, reps, ms)
    if rc:
        raise RuntimeError(f"{ns}_bench({op}) returned CUDA error {rc}")
    return [float(x) for x in ms]


def sass_counts(out_dir: Path) -> dict[str, int] | None:
    """SASS instructions per bench kernel and variant (cuobjdump, when present)."""
    res = {}
    for ns in VARIANTS:
        try:
            text = subprocess.run(["cuobjdump", "-sass", str(out_dir / f"fieldops_{ns}.o")], capture_output=True,
                                  text=True, timeout=120).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        name, n = None, 0
        for ln in text.splitlines():
            if "Function :" in ln:
                if name:
                    res[f"{ns}:{name}"] = n
                name, n = ln.split("Function :")[1].strip(), 0
            elif "/*" in ln and "NOP" not in ln and ln.strip().startswith("/*"):
                n += 1
        if name:
            res[f"{ns}:{name}"] = n
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "fieldops-out"))
    ap.add_argument("--arch", default="90")
    ap.add_argument("--n", type=int, default=1 << 24, help="pairs per op (default 2^24)")
    ap.add_argument("--n-inv", type=int, default=1 << 20, help="elements for gl_inv (default 2^20)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--no-check", action="store_true", help="benchmark only (e.g. under ncu)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="benchmark these (default: all)")
    ap.add_argument("--build-dir", default=None, help="where the library is built (default OUT/build)")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python3 bench/fieldops.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    t0 = time.monotonic()
    bdir = Path(a.build_dir) if a.build_dir else out / "build"
    so, reports = build(bdir, a.arch)
    lib = load(so)
    print(f"built {so} ({time.monotonic() - t0:.1f}s)", flush=True)
    res: dict = {"command": command, "n": a.n, "edge_values": len(EDGE), "check": {}, "bench": {}}
    bad = 0
    for op in ([] if a.no_check else OPS):
        t1 = time.monotonic()
        n = a.n_inv if op == "inv" else a.n
        x, y = make_inputs(op, n, a.seed + OPS[op])
        want = oracle(op, x, y, a.workers)
        row = {"pairs": n, "edge_pairs": len(EDGE) ** 2 * (9 if op in DIM3 else 1)}
        for ns in VARIANTS:
            got = run_check(lib, ns, op, x, y)
            ok = bool(np.array_equal(got, want))
            row[ns] = "0 mismatches" if ok else first_diff(got, want, x, y)
            bad += not ok
        res["check"][op] = row
        print(f"check {op}: {n} pairs ({row['edge_pairs']} edge): "
              + ", ".join(f"{ns} {row[ns]}" for ns in VARIANTS) + f" ({time.monotonic() - t1:.1f}s)", flush=True)
    if not a.no_bench:
        sms = lib.cur_sms()
        blocks = max(sms, 1) * 8
        res["sms"], res["blocks"] = sms, blocks
        chosen = [ns for ns in VARIANTS if ns in a.variants.split(",")]
        for op, (_, per_it, what, iters) in BENCH.items():
            row = {"what": what, "per_thread_iter": per_it, "iters": iters}
            for ns in chosen:
                ms = run_bench(lib, ns, op, blocks, a.reps)
                med = statistics.median(ms)
                row[ns] = {"ms": ms, "median_ms": med, "g_per_s": blocks * 256 * iters * per_it / (med * 1e-3) / 1e9}
            res["bench"][op] = row
            print(f"bench {op}: " + ", ".join(f"{ns} {row[ns]['g_per_s']:.0f} G {what}/s" for ns in chosen),
                  flush=True)
    res["sass"] = sass_counts(bdir)
    res["ptxas"] = {ns: [ln for ln in t.splitlines() if "bench_k" in ln or "registers" in ln]
                    for ns, t in reports.items()}
    res["elapsed_s"] = time.monotonic() - t0
    (out / "fieldops.json").write_text(json.dumps(res, indent=1) + "\n")
    md = [f"Command: `{command}`", "",
          "| op | pairs (edge pairs) | " + " | ".join(f"{LABELS[ns]} vs oracle" for ns in VARIANTS) + " |",
          "| --- | --- | " + " | ".join("---" for _ in VARIANTS) + " |"]
    md += [f"| {op} | {r['pairs']:,} ({r['edge_pairs']:,}) | " + " | ".join(r[ns] for ns in VARIANTS) + " |"
           for op, r in res["check"].items()]
    if res["bench"]:
        benched = [ns for ns in VARIANTS if all(ns in r for r in res["bench"].values())]
        ratios = [(x, y) for x, y in (("cur", "port"),) if x in benched and y in benched]
        md += ["", f"Register-only loops, {res['blocks']} blocks x 256 threads, median of {a.reps}:", "",
               "| loop | counted | " + " | ".join(LABELS[ns] for ns in benched)
               + "".join(f" | {x} / {y}" for x, y in ratios) + " |",
               "| --- | --- | " + " | ".join("---" for _ in benched + ratios) + " |"]
        md += [f"| {op} | {r['what']} | " + " | ".join(f"{r[ns]['g_per_s']:.0f} G/s" for ns in benched)
               + "".join(f" | {r[x]['g_per_s'] / r[y]['g_per_s']:.3f}x" for x, y in ratios) + " |"
               for op, r in res["bench"].items()]
    (out / "fieldops.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    print(f"fieldops: {bad} failing checks ({res['elapsed_s']:.0f}s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
