"""The base field ops of templates/gen_common.cuh as g++ compiles them (the host forms every host
check runs) against the spec's scalar model (codegen.check.gl64's s_* functions), word for word,
on every pair of edge words (0, 1, EPS - 1, EPS, p - 1, p, p + 1, 2^64 - 1, ...) and a mix of
random words: each op's comparisons at their boundaries (gl_neg's `a <= p`, gl_sub's `a < EPS`,
gl_add's carry) are where a wrong form differs, on a few words only."""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from codegen.check import gl64
from codegen.check.hostcheck import EDGE, raw_words
from codegen.emit import ABI_HEADER, COMMON_HEADER, TEMPLATES
from require import requires

pytestmark = requires("gxx")      # tests/require.py: skip, or fail under EXPS_REQUIRE

HOST_TU = """#include "gen_common.cuh"
#define BINARY(name, expr) extern "C" void name(const uint64_t* a, const uint64_t* b, uint64_t* r, uint64_t n) \\
    { for (uint64_t i = 0; i < n; ++i) r[i] = expr; }
#define UNARY(name, expr) extern "C" void name(const uint64_t* a, const uint64_t* b, uint64_t* r, uint64_t n) \\
    { (void)b; for (uint64_t i = 0; i < n; ++i) r[i] = expr; }
BINARY(h_add, gl_add(a[i], b[i]))
BINARY(h_sub, gl_sub(a[i], b[i]))
BINARY(h_mul, gl_mul(a[i], b[i]))
UNARY(h_neg, gl_neg(a[i]))
UNARY(h_canon, gl_canon(a[i]))
"""

MODEL = {"h_add": gl64.s_add, "h_sub": gl64.s_sub, "h_mul": gl64.s_mul,
         "h_neg": lambda a, b: gl64.s_neg(a), "h_canon": lambda a, b: gl64.s_canon(a)}


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> ctypes.CDLL:
    d = tmp_path_factory.mktemp("fieldops")
    for h in (COMMON_HEADER, ABI_HEADER):       # (gen_common.cuh includes exps_abi.h)
        shutil.copy(TEMPLATES / h, d / h)
    (d / "ops.cpp").write_text(HOST_TU)
    subprocess.run(["g++", "-O1", "-std=c++17", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
                    "ops.cpp", "-o", "ops.so"], cwd=d, check=True, capture_output=True, timeout=300)
    return ctypes.CDLL(str(d / "ops.so"))


def _words() -> tuple[np.ndarray, np.ndarray]:
    """Every (edge, edge) pair, then 4,000 pairs of the host check's input mix."""
    rng = np.random.default_rng(29)
    ea, eb = (x.ravel() for x in np.meshgrid(EDGE, EDGE, indexing="ij"))
    return (np.concatenate([ea, raw_words(rng, 4000)]).astype(np.uint64),
            np.concatenate([eb, raw_words(rng, 4000)]).astype(np.uint64))


@pytest.mark.parametrize("op", sorted(MODEL))
def test_host_op_is_the_spec_word_for_word(lib, op: str) -> None:
    a, b = _words()
    got = np.zeros_like(a)
    ptr = ctypes.POINTER(ctypes.c_uint64)
    getattr(lib, op)(a.ctypes.data_as(ptr), b.ctypes.data_as(ptr), got.ctypes.data_as(ptr), ctypes.c_uint64(a.size))
    want = np.array([MODEL[op](int(x), int(y)) for x, y in zip(a, b)], dtype=np.uint64)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(hex(int(a[i])), hex(int(b[i])), hex(int(got[i])), hex(int(want[i]))) for i in bad[:5]]


def test_the_edges_hold_each_ops_boundary_words() -> None:
    """The edge words are where the ops' comparisons turn: p (gl_neg: p - p = 0, not 2p - p),
    EPS - 1 and EPS (gl_sub), p - 1, p and 2^64 - 1 (canon, the carry of gl_add)."""
    edges = {int(x) for x in EDGE}
    assert {0, 1, gl64.EPS - 1, gl64.EPS, gl64.P - 1, gl64.P, gl64.P + 1, (1 << 64) - 1} <= edges
    assert gl64.s_neg(gl64.P) == 0 and gl64.s_neg(gl64.P + 1) == gl64.P - 1 and gl64.s_neg(0) == gl64.P
