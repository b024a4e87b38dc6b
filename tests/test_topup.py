"""exps_ctx's log2 of the row count (templates/gen_common.cuh), and the chunked launcher's scratch
top-up (templates/exps_runtime.cpp exps_topup): the wave it aims at, the EXPS_SCRATCH_MB
knob, and its fallback to the caller's scratch when the allocation fails (CI has no GPU:
cudaMallocAsync fails there, so the fallback path is the one run). The launcher's host code is
compiled by nvcc into a small library (with a one-kernel launch table) and called through ctypes;
bench/run.py's mirror (`topup_scratch`, used for the launch counts of docs/BENCHMARKS.md) is
checked against it."""
from __future__ import annotations

import ctypes
import subprocess

import pytest

from bench import run as R
from codegen.emit import TEMPLATES
from require import require

SRC = r'''
#include "gen_common.cuh"
#include "exps_runtime.cpp"
static const exps_q_kernel tq[] = {{0, "k", 0}};
const exps_desc exps_kernel = {"t", "0", "exps-codegen-id:0:00", 0, 1, 0, 0, 1u, tq, 0, 0, 0, 0};
extern "C" unsigned lg(unsigned long long d) { return exps_log2_ceil(d); }
extern "C" int last_error(void) { return (int)cudaGetLastError(); }
extern "C" unsigned long long want(unsigned long long slots, unsigned long long all) {
    return exps_topup_want(slots, all);
}
extern "C" unsigned long long topup(unsigned long long slots, unsigned long long given,
                                    unsigned long long all, int* took, int* err_after) {
    void* own = (void*)1;
    unsigned long long g = exps_topup(slots, given, all, &own, 0);
    *took = own != 0;
    if (own) (void)cudaFreeAsync(own, 0);
    *err_after = (int)cudaGetLastError();
    return g;
}
'''


@pytest.fixture(scope="module")
def lib(tmp_path_factory) -> ctypes.CDLL:
    require("nvcc")
    d = tmp_path_factory.mktemp("topup")
    (d / "t.cu").write_text(SRC)
    subprocess.run(["nvcc", "-shared", "-Xcompiler", "-fPIC", "-I", str(TEMPLATES), "-o", str(d / "t.so"),
                    str(d / "t.cu")], check=True, capture_output=True)
    so = ctypes.CDLL(str(d / "t.so"))
    so.want.restype = so.topup.restype = ctypes.c_ulonglong
    so.want.argtypes = [ctypes.c_ulonglong] * 2
    so.last_error.restype = ctypes.c_int
    so.lg.restype, so.lg.argtypes = ctypes.c_uint, [ctypes.c_ulonglong]
    so.topup.argtypes = [ctypes.c_ulonglong] * 3 + [ctypes.POINTER(ctypes.c_int)] * 2
    return so


def _no_driver_error(lib) -> int:
    """What cudaGetLastError says in this process anyway: 0 on a GPU machine; on a machine without
    a driver (CI) every runtime call reports cudaErrorInsufficientDriver / NoDevice."""
    e = lib.last_error()
    assert e in (0, 35, 100), e
    return e


def test_wave_aimed_at(lib, monkeypatch) -> None:
    monkeypatch.delenv("EXPS_SCRATCH_MB", raising=False)
    assert lib.want(54, 1 << 14) == 2048            # Intermediates at 2^22 rows: 2048 blocks, 216 MiB
    assert lib.want(204, 1 << 14) == 1285           # the sample's Large: 512 MiB hold 1,285 blocks
    assert lib.want(15, 100) == 100                 # never more than every row
    monkeypatch.setenv("EXPS_SCRATCH_MB", "0")
    assert lib.want(54, 1 << 14) == 0               # 0: never
    monkeypatch.setenv("EXPS_SCRATCH_MB", "1024")
    assert lib.want(204, 1 << 14) == 2048
    for bad in ("x", "-1", "12MB", "99999999999999999999"):
        monkeypatch.setenv("EXPS_SCRATCH_MB", bad)   # not a count of MiB: the default
        assert lib.want(204, 1 << 14) == 1285, bad


def test_mirror_reads_the_knob_as_the_header_does(lib, monkeypatch) -> None:
    for v in ("", "0", "1", "512", "1024", "20000000", "167772160", "1677721600", "x", "-1", "12MB", "١٢",
              "99999999999999999999"):
        monkeypatch.setenv("EXPS_SCRATCH_MB", v)
        for slots in (1, 1 << 20, 1 << 30):
            assert lib.want(slots, 1 << 40) == min(2048, (R._topup_mb(v) << 20) // (slots * 2048)), (v, slots)


def test_mirror_in_bench_matches(lib, monkeypatch) -> None:
    monkeypatch.delenv("EXPS_SCRATCH_MB", raising=False)
    for slots in (1, 3, 15, 54, 204, 1000):
        for n_ext in (1 << 8, 1 << 16, 1 << 22, 1 << 24):
            for given_words in (0, 19 << 17, 82 << 17, 1 << 30):
                ms = slots * 256
                exp = max(given_words // ms, lib.want(slots, n_ext // 256))
                assert R.topup_scratch(ms, n_ext, given_words) in (given_words, exp * ms)
                assert R.topup_scratch(ms, n_ext, given_words) // ms == exp, (slots, n_ext, given_words)


def test_enough_given_scratch_takes_nothing(lib, monkeypatch) -> None:
    monkeypatch.delenv("EXPS_SCRATCH_MB", raising=False)
    took, err = ctypes.c_int(), ctypes.c_int()
    assert lib.topup(15, 4096, 1 << 14, ctypes.byref(took), ctypes.byref(err)) == 4096
    assert took.value == 0 and err.value == _no_driver_error(lib)


def test_failed_allocation_falls_back_to_the_given_scratch(lib, monkeypatch) -> None:
    """Without a usable GPU (CI) or with too little memory, cudaMallocAsync fails: the launcher
    runs with the caller's scratch, and leaves no error of its own behind (on a GPU machine: none)."""
    monkeypatch.setenv("EXPS_SCRATCH_MB", "1")      # 1 MiB: want 2 blocks of 256 slots
    took, err = ctypes.c_int(), ctypes.c_int()
    g = lib.topup(256, 1, 1 << 14, ctypes.byref(took), ctypes.byref(err))
    assert err.value == _no_driver_error(lib)
    if took.value:                                  # a GPU machine: it took its own scratch
        assert g == 2
    else:
        assert g == 1


def test_log2_ceil_of_the_row_count(lib) -> None:
    """exps_ctx's log2 of the domain (column c starts at c << lg): the smallest lg with 2^lg >= D,
    as the loop it replaced computed it."""
    for d in [0, 1, 2, 3, 4, 5, 7, 8, 9, 255, 256, 257, *(1 << k for k in range(64)),
              *((1 << k) + 1 for k in range(2, 63)), *((1 << k) - 1 for k in range(2, 64))]:
        want = 0
        while (1 << want) < d:
            want += 1
        assert lib.lg(d) == want, d
