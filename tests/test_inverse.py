"""The field inverses of templates/gen_common.cuh: on the device gl_inv and gl3_inv are
out of line (one `.func` each per TU, called by every store that inverts) and gl_inv's squaring
loop stays rolled, so ptxas compiles ~18 multiplies per inverse kernel instead of ~90; on the host
(the form the host check compiles) they are bit-identical to the oracle on edge and random words.
A header edit that inlines the inverse again, unrolls the chain or changes its arithmetic fails
here."""
from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

from codegen.build import toolchain as tc
from codegen.check import gl64
from codegen.check.hostcheck import EDGE, EPS, P, raw_words
from codegen.emit import ABI_HEADER, COMMON_HEADER, TEMPLATES
from require import cuobjdump as cuobjdump_path, require

#: a TU of stores as templates/exprs.cu.j2's kernels make them: one inverse per row (exps_store) of a
#: dim-1 value, a dim-3 value and a dim-3 denominator of a dim-1 numerator, the batched inverses of
#: exps_x_inv_thread (the `_ki` kernels' form), plus one out-of-line gl_mul as the unit of size
DEVICE_TU = """#include "gen_common.cuh"
#define STORE_KERNEL(name, vdim, num1)                                                          \\
__global__ void name(uint64_t* dest, uint64_t N, uint64_t mode, uint64_t scalar, uint64_t destDim, \\
                     unsigned destExpr) {                                                        \\
    for (uint64_t row = threadIdx.x; row < N; row += blockDim.x)                                \\
        exps_store(dest, row, gl3_make(dest[row], dest[row + N], dest[row + 2 * N]), vdim, num1,  \\
                   mode, scalar, N, 0, destDim, destExpr);                                       \\
}
STORE_KERNEL(store_v1, 1, 0)
STORE_KERNEL(store_v3, 3, 0)
STORE_KERNEL(store_v3_num1, 3, 1)
EXPS_HD gl3 row3(const ExpsCtx& X, uint64_t row, const exps_offs*) { return gl3_make(X.cm[1][row], X.cm[1][X.D + row], X.cm[1][2 * X.D + row]); }
__global__ void thread_v3(const StepsParams* P, uint64_t* dest, uint64_t N, uint64_t mode, uint64_t scalar,
                          uint64_t destDim, unsigned destExpr) {              /* the batched form */
    const ExpsCtx X = exps_ctx(P, N, 0, 0, 0, 0, 0);
    exps_x_inv_thread<row3>(X, 0, blockIdx.x, threadIdx.x, dest, N, 3, 0, mode, scalar, N, 0, destDim, destExpr);
}
static __device__ __noinline__ uint64_t one_mul(uint64_t a, uint64_t b) { return gl_mul(a, b); }
__global__ void mul_k(uint64_t* d) { d[0] = one_mul(d[1], d[2]); }
"""
KERNELS = ("store_v1", "store_v3", "store_v3_num1", "thread_v3")


def _func_bodies(ptx: str) -> dict[str, list[str]]:
    """`.func` / `.entry` name -> the lines of its body (definitions only, not declarations)."""
    out: dict[str, list[str]] = {}
    for m in re.finditer(r"^(?:\.visible )?\.(?:func|entry)\s+(?:\([^)]*\)\s*)?(\w+)\((.*?)^\}", ptx, re.M | re.S):
        body = m[2].split("{", 1)
        if len(body) == 2:
            assert m[1] not in out, f"{m[1]} defined twice"
            out[m[1]] = body[1].splitlines()
    return out


def test_device_inverses_are_out_of_line_and_rolled(tmp_path: Path) -> None:
    require("nvcc")
    nvcc = tc.find_nvcc()
    for h in (COMMON_HEADER, ABI_HEADER):       # (gen_common.cuh includes exps_abi.h)
        shutil.copy(TEMPLATES / h, tmp_path / h)
    (tmp_path / "inv.cu").write_text(DEVICE_TU)
    subprocess.run([str(nvcc), "-cubin", *tc.BASE_FLAGS, "-arch=sm_90", "-keep", "-keep-dir", ".",
                    "inv.cu", "-o", "inv.cubin"], cwd=tmp_path, check=True, capture_output=True, timeout=300)
    bodies = _func_bodies((tmp_path / "inv.ptx").read_text())
    # plain C++ names: a device function of internal linkage would be named after the compile's
    # pid-derived temp file (_ZN.._INTERNAL_<hash>_..), and two builds would differ byte for byte
    inv = [n for n in bodies if n == "_Z6gl_invm"]
    inv3 = [n for n in bodies if n == "_Z7gl3_inv3gl3"]
    mul = [n for n in bodies if n.endswith("7one_mulEmm")]
    # cicc: one definition of each inverse per TU, called from every store kernel
    assert len(inv) == 1 and len(inv3) == 1 and len(mul) == 1, sorted(bodies)
    for k in KERNELS:
        entry = next(b for n, b in bodies.items() if re.fullmatch(rf"_Z\d+{k}P\w+", n))
        calls = [l for l in entry if re.search(r"\bcall(\.uni)?\b", l)]
        assert calls, f"{k}: the inverse was inlined into the kernel"
    # the addition chain (91 multiplies) stays a loop: ~18 multiplies' worth of code
    ratio = len(bodies[inv[0]]) / len(bodies[mul[0]])
    assert 9 < ratio < 40, f"gl_inv is {ratio:.1f} gl_mul long (unrolled: ~90)"
    # ptxas keeps the call (it copies the callee into each kernel, but does not inline it)
    require("cuobjdump")
    cuobjdump = cuobjdump_path()
    sass = subprocess.run([cuobjdump, "-sass", "inv.cubin"], cwd=tmp_path, check=True,
                          capture_output=True, text=True, timeout=120).stdout
    per_fn = dict(re.findall(r"Function : (\w+)\n(.*?)(?=\n\s*Function : |\Z)", sass, re.S))
    for k in KERNELS:
        text = next(t for n, t in per_fn.items() if re.fullmatch(rf"_Z\d+{k}P\w+", n))
        assert re.search(r"\bCALL\.", text), f"{k}: ptxas inlined the inverse back"


HOST_TU = """#include "gen_common.cuh"
extern "C" void inv_all(const uint64_t* a, uint64_t* r, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) r[i] = gl_inv(a[i]);
}
extern "C" void inv3_all(const uint64_t* a, uint64_t* r, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) {
        gl3 u = gl3_inv(gl3_make(a[i], a[n + i], a[2 * n + i]));
        r[i] = u.v0; r[n + i] = u.v1; r[2 * n + i] = u.v2;
    }
}
"""


def test_host_inverses_match_the_oracle(tmp_path: Path) -> None:
    require("gxx")
    for h in (COMMON_HEADER, ABI_HEADER):       # (gen_common.cuh includes exps_abi.h)
        shutil.copy(TEMPLATES / h, tmp_path / h)
    (tmp_path / "inv.cpp").write_text(HOST_TU)
    so = tmp_path / "inv.so"
    subprocess.run(["g++", "-O1", "-std=c++17", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
                    "inv.cpp", "-o", str(so)], cwd=tmp_path, check=True, capture_output=True, timeout=120)
    lib = ctypes.CDLL(str(so))
    rng = np.random.default_rng(15)
    a = np.concatenate([EDGE, raw_words(rng, 2000)]).astype(np.uint64)
    n = a.size
    got = np.zeros(n, np.uint64)
    ptr = ctypes.POINTER(ctypes.c_uint64)
    lib.inv_all(a.ctypes.data_as(ptr), got.ctypes.data_as(ptr), ctypes.c_uint64(n))
    assert np.array_equal(got, gl64.inv(a))
    c = np.stack([a, np.roll(a, 1), np.roll(a, 7)])
    c[1:, : EDGE.size] = 0                                   # (e, 0, 0): the dim-1 denominators' shape
    c = np.ascontiguousarray(c)
    got3 = np.zeros_like(c)
    lib.inv3_all(c.ctypes.data_as(ptr), got3.ctypes.data_as(ptr), ctypes.c_uint64(n))
    want = gl64.inv3((c[0], c[1], c[2]))
    for d in range(3):
        assert np.array_equal(got3[d], want[d]), d


# ------------------------------------------------------------------ batched inverses
#: the two kernels' forms over a value table: F reads row r of a dim-1 or dim-3 value (what an
#: expression kernel's row function returns); WRITE one row at a time (`_k`), the inverse modes by
#: exps_x_inv_grid, i.e. exps_x_inv_thread over the launch's exps_x_blocks(N, mode) blocks (`_ki`)
BATCH_TU = """#include "gen_common.cuh"
static const uint64_t* g_v;
static uint64_t g_n;
static gl3 f1(const ExpsCtx&, uint64_t row, const exps_offs*) { return gl3_make(g_v[row], 0, 0); }
static gl3 f3(const ExpsCtx&, uint64_t row, const exps_offs*) { return gl3_make(g_v[row], g_v[g_n + row], g_v[2 * g_n + row]); }
extern "C" void run(const uint64_t* v, uint64_t n, int vdim, int num1, uint64_t mode, uint64_t scalar,
                    uint64_t destDim, unsigned destExpr, uint64_t* dest) {
    g_v = v; g_n = n;
    const ExpsCtx X = {};
    if (mode == EXPS_WRITE) {
        for (uint64_t row = 0; row < n; ++row)
            exps_store(dest, row, vdim == 3 ? f3(X, row, 0) : f1(X, row, 0), vdim, num1, EXPS_WRITE, scalar, n, 1, destDim, destExpr);
        return;
    }
    if (vdim == 3) exps_x_inv_grid<f3>(X, 0, dest, n, 3, num1, mode, scalar, n, 1, destDim, destExpr);
    else exps_x_inv_grid<f1>(X, 0, dest, n, 1, num1, mode, scalar, n, 1, destDim, destExpr);
}
"""
#: the line of exps_inv_finish that takes gl_inv's own word for a value with two encodings
FALLBACK = "if (ti < EXPS_EPS) ti = gl_inv(B.t[j]);"


def _batch_lib(tmp_path: Path, header: str, rows: int | None = None) -> ctypes.CDLL:
    """The harness compiled with `header` as gen_common.cuh (and EXPS_INV_ROWS = rows)."""
    require("gxx")
    (tmp_path / COMMON_HEADER).write_text(header)
    shutil.copy(TEMPLATES / ABI_HEADER, tmp_path / ABI_HEADER)
    (tmp_path / "batch.cpp").write_text(BATCH_TU)
    so = tmp_path / f"batch{rows or ''}.so"
    subprocess.run(["g++", "-O1", "-std=c++17", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
                    *([f"-DEXPS_INV_ROWS={rows}"] if rows else []), "batch.cpp", "-o", str(so)],
                   cwd=tmp_path, check=True, capture_output=True, timeout=120)
    return ctypes.CDLL(str(so))


def _batch_values(n: int) -> np.ndarray:
    """dim-3 values, 3 x n: runs of zero / p / one norms, values whose inverse (dim 1) or whose
    norm's inverse (dim 3) is a small int (two encodings: the chain may give m or m + p), the
    (e, 0, 0) shape of dim-1 denominators, raw words."""
    rng = np.random.default_rng(1401)
    v = raw_words(rng, (3, n)).astype(np.uint64)
    small = np.arange(1, 40, dtype=np.uint64)
    k = 0
    for run in (EDGE, gl64.inv(small), np.array([0, P, 1, P + 1, 0, 0, 0, 0, 0, 0, 0, 0], np.uint64)):
        v[0, k:k + run.size], v[1:, k:k + run.size] = run, 0
        k += run.size
    v[:, 2048:2048 + 256 * 8] = 0                     # one whole batch of zeros (the product is 1)
    m = rng.integers(1, 9, 300).astype(np.uint64)
    v[0, 4100:4400] = gl64.inv(m)                     # dim 1: t^-1 = m
    v[0, 4400:4700] = gl64.neg(gl64.inv(m))           # dim 3 (x, 0, 0): t = -x^3, t^-1 = m^3
    v[1:, 4100:4700] = 0
    return np.ascontiguousarray(v)


def _want(v: np.ndarray, vdim: int, num1: int, mode: int, scalar: int, destDim: int, d: np.ndarray) -> np.ndarray:
    """The oracle's dest after the store, in the destExpr layout (row-major, destDim per row)."""
    if mode == 0:
        out = np.zeros_like(d)
        out[:, 0] = v[0]
        if destDim == 3 and vdim == 3:
            out[:, 1], out[:, 2] = v[1], v[2]
        return out
    z = np.zeros(v.shape[1], np.uint64)
    u = gl64.inv3((v[0], v[1], v[2])) if vdim == 3 else (gl64.inv(v[0]), z, z)
    if mode == 1:
        if destDim == 1:
            return gl64.mul(d[:, 0], u[0])[:, None]
        dd = (d[:, 0], d[:, 1], d[:, 2])
        r = gl64.mul31(dd, u[0]) if vdim == 1 else (gl64.mul31(u, d[:, 0]) if num1 else gl64.mul33(dd, u))
        return np.stack(r, axis=1)
    if destDim == 1:
        return gl64.mul(np.full(v.shape[1], scalar, np.uint64), u[0])[:, None]
    return np.stack(gl64.mul31(u, np.full(v.shape[1], scalar, np.uint64)), axis=1)


def _run_batch(lib, v, vdim, num1, mode, scalar, destDim, d) -> np.ndarray:
    n = v.shape[1]
    dest = np.ascontiguousarray(d.copy())
    ptr = ctypes.POINTER(ctypes.c_uint64)
    lib.run(v.ctypes.data_as(ptr), ctypes.c_uint64(n), vdim, num1, ctypes.c_uint64(mode), ctypes.c_uint64(scalar),
            ctypes.c_uint64(destDim), ctypes.c_uint(1), dest.ctypes.data_as(ptr))
    return dest


CASES = [(vdim, num1, mode, destDim) for mode in (0, 1, 2) for destDim in (1, 3) for vdim in (1, 3)
         for num1 in (0, 1) if vdim <= destDim and not (num1 and vdim == 1)]


def test_batched_inverse_stores_match_the_oracle(tmp_path: Path) -> None:
    """Every mode x destDim x vdim x numerator dim, at 8 rows per thread (the default) and at 1 and
    3 (full, partial and one-row batches) over 4,900 rows: exactly the oracle's words (its inverse
    is gl_inv's chain on each row). The inputs include norms whose inverse has two encodings (1,
    inverses of small ints) and zero norms, alone and as a whole batch."""
    header = (TEMPLATES / COMMON_HEADER).read_text()
    assert "#define EXPS_INV_ROWS 8\n" in (TEMPLATES / ABI_HEADER).read_text()
    n = 4900
    v = _batch_values(n)
    d = raw_words(np.random.default_rng(7), (n, 3)).astype(np.uint64)
    scalar = int(gl64.inv(np.array([3], np.uint64))[0])
    t = gl64.canon(gl64.inv3((v[0], v[1], v[2]))[0])
    assert int(np.count_nonzero(t < EPS)) > 300      # the fallback's rows are there
    for rows in (None, 1, 3):
        lib = _batch_lib(tmp_path, header, rows)
        for vdim, num1, mode, destDim in CASES:
            want = _want(v, vdim, num1, mode, scalar, destDim, d[:, :destDim])
            got = _run_batch(lib, v, vdim, num1, mode, scalar, destDim, d[:, :destDim])
            bad = np.flatnonzero((got != want).any(axis=1))
            assert bad.size == 0, (rows, vdim, num1, mode, destDim, bad[:5])


def test_batched_inverse_without_its_fallback_fails(tmp_path: Path) -> None:
    """The same check with the fallback line removed (every row takes the batch's canonical word):
    dim-1 rows whose inverse has two encodings then differ from the chain's word (p + 2 where the
    batch has 2), so the inputs above exercise it. (In dim 3 the norm's inverse is only a factor
    of the stored products, whose words are the same for either encoding on these inputs.)"""
    header = (TEMPLATES / COMMON_HEADER).read_text()
    assert header.count(FALLBACK) == 1
    lib = _batch_lib(tmp_path, header.replace(FALLBACK, ""))
    n = 4900
    v = _batch_values(n)
    d = raw_words(np.random.default_rng(7), (n, 3)).astype(np.uint64)
    want = _want(v, 1, 0, 2, 1, 3, d)
    got = _run_batch(lib, v, 1, 0, 2, 1, 3, d)
    assert (got != want).any(axis=1).sum() > 300
