"""Run bench/run.py or bench/exprs.py on the CPU: a smoke test of the whole GPU script without a GPU.

    python3 bench/cpu_emulation.py --pk provingkey-sample --rows 10 --out /tmp/bench-cpu        # run.py
    python3 bench/cpu_emulation.py exprs --pk provingkey-sample --rows 10 --out /tmp/exprs-cpu  # exprs.py

* ``cupy`` is replaced by :class:`FakeCupy`: numpy arrays whose ``.data.ptr`` is their host
  address, events that read the host clock, a random-word fill with hostcheck's mix of values;
* the interpreter library is ``bench/interp.cu`` built as host C++ (its host ``interp_launch``
  runs the same per-row code);
* each AIR's generated kernel is rendered by codegen and compiled as host C++ (as
  ``codegen.check.hostcheck`` does), exporting the same ``exps_launch`` ABI.

So every pointer, offset, layout and comparison in run.py is exercised, and the numbers it prints
are CPU times (meaningless as benchmarks).
"""
from __future__ import annotations

import ctypes
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import interp_lib as IL  # noqa: E402
from bench import run as R  # noqa: E402


class _Mem:
    def __init__(self, arr: np.ndarray):
        self._arr = arr

    @property
    def ptr(self) -> int:
        return self._arr.ctypes.data if self._arr.size else 0

    def copy_from_device_async(self, src: "_Mem", nbytes: int) -> None:
        ctypes.memmove(self.ptr, src.ptr, nbytes)


class DArr(np.ndarray):
    """A 'device' array: a numpy array with CuPy's ``.data.ptr`` and ``.get()``."""

    @property
    def data(self):  # type: ignore[override]
        return _Mem(self)

    def get(self) -> np.ndarray:
        return np.asarray(self).copy()


def _d(a) -> DArr:
    return np.ascontiguousarray(a).view(DArr)


class _Event:
    def __init__(self) -> None:
        self.t = 0.0

    def record(self, stream=None) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass


class _RuntimeError(RuntimeError):
    pass


def _fill_kernel(*_args, **_kw):
    def run(seed, out: DArr) -> None:
        from codegen.check.hostcheck import raw_words
        rng = np.random.default_rng(int(seed) & ((1 << 63) - 1))
        np.asarray(out)[...] = raw_words(rng, (out.size,))
    return run


def fake_cupy() -> types.ModuleType:
    cp = types.ModuleType("cupy")
    cp.__version__ = "cpu-emulation"
    cp.uint64, cp.int32 = np.uint64, np.int32
    cp.empty = lambda n, dtype=np.float64: _d(np.empty(n, dtype=dtype))
    cp.zeros = lambda n, dtype=np.float64: _d(np.zeros(n, dtype=dtype))
    cp.full = lambda n, v, dtype=None: _d(np.full(n, v, dtype=dtype))
    cp.asarray = lambda a, dtype=None: _d(np.array(a, dtype=dtype))
    cp.asnumpy = lambda a: np.asarray(a).copy()
    cp.array_equal = lambda a, b: bool(np.array_equal(np.asarray(a), np.asarray(b)))
    cp.count_nonzero = lambda a: int(np.count_nonzero(np.asarray(a)))
    cp.nonzero = lambda a: tuple(_d(x) for x in np.nonzero(np.asarray(a)))
    cp.copyto = lambda dst, src: np.copyto(np.asarray(dst), np.asarray(src))
    cp.ElementwiseKernel = _fill_kernel

    class _Pool:
        def free_all_blocks(self) -> None:
            pass
    cp.get_default_memory_pool = lambda: _Pool()

    cuda = types.ModuleType("cupy.cuda")

    class Device:
        def __init__(self, i: int = 0) -> None:
            self.id = i

        def use(self) -> None:
            pass

        def synchronize(self) -> None:
            pass
    cuda.Device = Device
    cuda.Event = _Event
    cuda.get_elapsed_time = lambda a, b: (b.t - a.t) * 1e3
    rt = types.ModuleType("cupy.cuda.runtime")
    rt.CUDARuntimeError = _RuntimeError
    rt.getDeviceProperties = lambda i: {"name": b"CPU emulation", "l2CacheSize": 1 << 20,
                                        "major": 0, "minor": 0}
    rt.memGetInfo = lambda: (4 << 30, 8 << 30)
    rt.driverGetVersion = lambda: 0
    rt.runtimeGetVersion = lambda: 0
    cuda.runtime = rt
    cp.cuda = cuda
    return cp


class HostHooks(R.Hooks):
    """Host builds of the interpreter and of each AIR's generated kernel."""

    def __init__(self, workdir: Path, chunk: int | None = None):
        self.workdir = Path(workdir)
        self.cache: dict[str, Path] = {}
        self.chunk = chunk          # ops per chunk of every kernel (None: hostcheck's default)

    def has_kernel(self, placement) -> bool:
        from codegen.coverage import cover
        from codegen.model import ModelError, load_air
        if placement.error:
            return False
        try:
            si, ei = load_air(placement.starkinfo, placement.expressions)
        except ModelError:
            return False
        return not cover(si, ei).air_skip

    def gen_lib(self, air: "R.Air") -> Path:
        if air.key in self.cache:
            return self.cache[air.key]
        from codegen.emit import render
        from codegen.check.hostcheck import build_host_library, kernel_source
        from codegen.coverage import cover
        from codegen.model import load_air
        si, ei = load_air(air.starkinfo, air.expressions)
        cov = cover(si, ei)
        if cov.air_skip or cov.q is None:
            raise RuntimeError(f"no generated kernel: {cov.air_skip}")
        so = build_host_library(render(kernel_source(air.key, cov, self.chunk)), self.workdir / air.key)
        self.cache[air.key] = so
        return so

    def before_lib(self, air: "R.Air", before_pk: Path) -> Path:
        return self.gen_lib(air)     # no earlier version here: the same host build

    def interp_lib(self, arch: str) -> tuple[Path, str]:
        so = IL.build_host(self.workdir / "libinterp_host.so")
        return so, "host build: Used 0 registers"

    def load_interp(self, path: Path) -> ctypes.CDLL:
        return IL.load_gpu(path)     # the host build exports the same launcher ABI


def main(argv: list[str] | None = None) -> int:
    """`[run|exprs] ARGS...`: bench/run.py (the default) or bench/exprs.py with ARGS, emulated."""
    argv = list(sys.argv[1:] if argv is None else argv)
    script = argv.pop(0) if argv and argv[0] in ("run", "exprs") else "run"
    chunk = None
    if "--emu-chunk" in argv:       # ops per chunk of the emulated kernels (0 = one kernel)
        i = argv.index("--emu-chunk")
        chunk = int(argv[i + 1])
        del argv[i: i + 2]
    saved = sys.modules.get("cupy"), R.HOOKS
    sys.modules["cupy"] = fake_cupy()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-cpu-") as d:
            R.HOOKS = HostHooks(Path(d), chunk)
            if script == "exprs":
                from bench import exprs as X
                return X.main(argv)
            return R.main(argv)
    finally:
        if saved[0] is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = saved[0]
        R.HOOKS = saved[1]


if __name__ == "__main__":
    sys.exit(main())
