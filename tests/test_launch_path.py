"""The launch path of a placed `.so`: its kernels are device code only (each device TU
an `nvcc -c -fatbin`, no host pass), embedded by its launch table (`<key>_abi.cpp`) in `.nv_fatbin`
and loaded by the generic launcher (templates/exps_runtime.cpp) with cudaLibraryLoadData at the
first launch; nothing is registered with the CUDA runtime when the `.so` is loaded. Checked here
without a GPU: what the `.so` exports and holds, that every kernel the table names is in its
fatbins under that name, and (on a machine without a GPU) that a launch goes through the library
API, says so once on stderr when it cannot load, and writes nothing. The GPU side (bit-identity,
launch cost) is bench/gpu_round.sh's gpucheck and bench/launch_overhead.py's."""
from __future__ import annotations

import ctypes
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codegen import EMITTER_VERSION
from codegen.build import kernelcc, toolchain
from codegen.build.cache import ObjectCache
from codegen.check import hostcheck
from codegen.coverage import cover
from codegen.discover import discover
from codegen.emit import XINV_PARAMS, KernelSource, device_tus, kernel_symbol, render, tu_kernels
from codegen.model import load_air
from codegen.plan import plan
from require import cuobjdump as cuobjdump_path, require

pytestmark = pytest.mark.requires("nvcc", "binutils")

SAMPLE = Path(__file__).resolve().parent.parent / "provingkey-sample"
ABI = {"exps_launch", "exps_min_scratch", "exps_expr_covered", "exps_launch_expr", "exps_emitter_version",
       "exps_source_hash"}
#: a TU limit that cuts Tiny (39 Q ops, 2 expressions, one of them with no `_ki`) into four device TUs (one
#: per part, and the generic inverse kernel's `exps_xinv.cu`): four fatbins
TU_OPS = 1


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("launch")
    [p] = [p for p in discover(SAMPLE) if p.base == "Tiny"]
    si, ei = load_air(p.starkinfo, p.expressions)
    cov = cover(si, ei)
    ks = KernelSource(p.key, cov.q, plan(cov.q, 0), cov.exprs, "ab" * 32)
    files = render(ks, tu_ops=TU_OPS)
    kernels = tu_kernels(ks, tu_ops=TU_OPS)
    assert device_tus(files) == [f"{p.key}_q0.cu", f"{p.key}_x0.cu", f"{p.key}_x1.cu", "exps_xinv.cu"]
    kernelcc.stage_sources(files, d / "src")
    got = kernelcc.compile_kernel(d / "src", list(files), kernels, d / "obj", [90], ObjectCache(d / "cache"), [])
    so = toolchain.link_shared([Path(o) for o in got["objects"]], d / "k.exps.so", kernelcc.compile_options([90]),
                               launcher=[])
    return so, ks, kernels


def test_exports_exactly_the_abi_and_registers_nothing(built) -> None:
    so, _, _ = built
    out = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True).stdout
    assert {line.split()[-1] for line in out.splitlines() if " T " in line} == ABI
    sections = subprocess.run(["readelf", "-S", "-W", str(so)], capture_output=True, text=True, check=True).stdout
    assert " .nv_fatbin " in sections                     # the kernels, where nvcc puts fatbins
    assert ".nvFatBinSegment" not in sections              # no fatbin registered with the runtime at load
    assert ".symtab" not in sections                       # stripped
    dyn = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
    assert "libcudart" not in dyn and "libcuda." not in dyn  # the CUDA runtime static, the driver dlopen'ed


def test_every_kernel_of_the_table_is_in_the_fatbins(built) -> None:
    """cuobjdump finds the fatbins in the .so and they hold exactly the kernels the table names,
    under the names it looks them up by (emit.kernel_symbol's mangling): per expression a WRITE
    kernel and one of the inverse modes."""
    so, ks, kernels = built
    require("cuobjdump")
    cuobjdump = cuobjdump_path()
    sass = subprocess.run([cuobjdump, "-sass", str(so)], capture_output=True, text=True, check=True).stdout
    names = re.findall(r"Function : (\S+)", sass)
    assert sorted(names) == sorted(n for ns in kernels.values() for n in ns)
    # an expression: its WRITE kernel, and an inverse kernel if a hint inverts it; the others share
    # the key's generic inverse kernel
    cold = sum(1 for x in ks.exprs if not x.inv)
    assert len(names) == ks.plan.n_chunks + 2 * len(ks.exprs) - cold + (1 if cold else 0)
    assert sass.count("Fatbin elf code") == sass.count("Fatbin ptx code") == 4   # per device TU: SASS, PTX
    # the generic inverse kernel is alone in the last fatbin (its own TU, the table's inv lib)
    assert kernels["exps_xinv.cu"] == [kernel_symbol("exps_x_inv_k", XINV_PARAMS)]
    assert re.findall(r"Function : (\S+)", sass.split("Fatbin elf code")[-1]) == kernels["exps_xinv.cu"]


def test_name_check_catches_a_kernel_missing_from_its_fatbin(built, tmp_path) -> None:
    """The build refuses a table naming a kernel ptxas did not compile in that TU (a mangling or
    packing mistake would otherwise be a load failure in the prover)."""
    _, ks, kernels = built
    report = {n: {"sm_90": {"entry": True}} for names in kernels.values() for n in names}
    tu = next(iter(kernels))
    kernelcc.check_kernel_names(kernels, {t: report for t in kernels})
    bad = {tu: kernels[tu] + ["_Z3fooPK11StepsParamsPmS2_mmmmmmm"]}
    with pytest.raises(kernelcc.KernelNameError, match="_Z3foo"):
        kernelcc.check_kernel_names(bad, {tu: report})
    kernelcc.check_kernel_names(bad, {tu: {}})             # no report (a launcher ate stderr): not checked


PROBE = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
u, ull, vp = ctypes.c_uint64, ctypes.c_ulonglong, ctypes.c_void_p
lib.exps_launch.argtypes = [vp, vp, vp] + [u] * 6 + [vp]
lib.exps_launch_expr.argtypes = [ull, vp, vp] + [ull] * 10 + [ctypes.c_uint, vp]
lib.exps_min_scratch.restype = ull
e = int(sys.argv[2])
print("covered", lib.exps_expr_covered(e), lib.exps_expr_covered(1 << 40), "scratch", lib.exps_min_scratch(), flush=True)
lib.exps_launch(None, None, None, 0, 1024, 0, 0, 0, 0, None)
lib.exps_launch(None, None, None, 0, 1024, 0, 0, 0, 0, None)
print("expr", lib.exps_launch_expr(e, None, None, 16, 16, 0, 0, 0, 0, 0, 0, 1, 1, 0, None),
      lib.exps_launch_expr(e, None, None, 0, 16, 0, 0, 0, 0, 0, 0, 1, 1, 0, None),
      lib.exps_launch_expr(e, None, None, 16, 16, 0, 0, 0, 3, 0, 0, 1, 1, 0, None), flush=True)
"""


def test_without_a_gpu_a_launch_says_why_once_and_writes_nothing(built, tmp_path) -> None:
    """No GPU here: the first launch tries cudaLibraryLoadData, fails, says so once on stderr
    (kernel key, the CUDA error) and launches nothing; exps_launch_expr then returns 0 for a covered
    expression with rows (1 with N == 0, as ever: nothing to write). The pure entry points never
    touch CUDA. (The old path, <<<>>> through a registered fatbin, failed silently.)"""
    if toolchain.detect_gpu_archs():
        pytest.skip("a GPU is present: the library loads (bench/gpu_round.sh checks the launches)")
    so, ks, _ = built
    e = ks.exprs[0].ir.exp_id
    p = subprocess.run([sys.executable, "-c", PROBE, str(so), str(e)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["covered 1 0 scratch 0", "expr 0 1 0"], p.stdout
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr                      # once, although it failed four times
    assert f"kernel {ks.key} (exps {EMITTER_VERSION}): loading its kernels (cudaLibraryLoadData) failed: cuda" in lines[0]
    assert "outputs are not written" in lines[0]


def test_host_check_runs_the_same_launcher(built, tmp_path) -> None:
    """The host check links the same launcher (exps_runtime.cpp, -DEXPS_HOSTCHECK) over the same
    table, so its dispatch (by expId, waves, N == 0, refusals) is what is tested there."""
    _, ks, _ = built
    lib = hostcheck._load(hostcheck.build_host_library(render(ks, tu_ops=TU_OPS), tmp_path))
    assert lib.exps_expr_covered(ks.exprs[0].ir.exp_id) == 1 and lib.exps_expr_covered(1 << 40) == 0
    assert isinstance(lib, ctypes.CDLL)
