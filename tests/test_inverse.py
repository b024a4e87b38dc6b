"""The field inverses of templates/gen_common.cuh (issue #15): on the device gl_inv and gl3_inv are
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
from codegen.check.hostcheck import EDGE, raw_words
from codegen.emit import COMMON_HEADER, TEMPLATES
from require import cuobjdump as cuobjdump_path, require

#: a TU in the shape of templates/exprs.cu.j2's kernels: stores of a dim-1 value, a dim-3 value and
#: a dim-3 denominator of a dim-1 numerator, plus one out-of-line gl_mul as the unit of size
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
static __device__ __noinline__ uint64_t one_mul(uint64_t a, uint64_t b) { return gl_mul(a, b); }
__global__ void mul_k(uint64_t* d) { d[0] = one_mul(d[1], d[2]); }
"""
KERNELS = ("store_v1", "store_v3", "store_v3_num1")


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
    shutil.copy(TEMPLATES / COMMON_HEADER, tmp_path / COMMON_HEADER)
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
    shutil.copy(TEMPLATES / COMMON_HEADER, tmp_path / COMMON_HEADER)
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
