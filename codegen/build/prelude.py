"""The device prelude: a small `cuda_runtime.h` for device-only compiles.

nvcc force-includes `cuda_runtime.h` in every compile, and gcc's preprocessing and cicc's parsing
of it (~37,000 lines) cost ~0.2 s of the ~0.26 s a TU of no work takes: on ../shared/pk, with ~50
device compiles, about a tenth of a cold build. A generated device TU needs only the CUDA keywords,
the built-in variables and three intrinsics: templates/exps_device_prelude.h, which a compile with
``CompileOptions.prelude`` sees under that name (toolchain.PRELUDE_DIR).

It is used only where it gives nvcc's own bytes: once per process and set of options,
:func:`options` compiles a probe TU (gen_common.cuh and a kernel over every intrinsic and the
built-in variables) with the prelude and with the full header, through the object cache (so later
builds decide from two hits), and keeps the prelude only when the two outputs are identical byte
for byte. Any failure (another CUDA release whose internal headers differ) or difference means the
full header and one log line. ``EXPS_DEVICE_PRELUDE=0`` turns it off.
"""
from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import threading
from pathlib import Path

from codegen.build import toolchain
from codegen.build.cache import ObjectCache
from codegen.emit import ABI_HEADER, COMMON_HEADER
from codegen.resources import TEMPLATES

log = logging.getLogger("exps_codegen")

PRELUDE = "exps_device_prelude.h"

#: the probe: gen_common.cuh's device code over each intrinsic the prelude declares (__umul64hi
#: in gl_mulhi, __clzll in exps_log2_ceil, __ldg in EXPS_LD), the built-in variables, an out-of-line
#: inverse and a bounded kernel, as the generated TUs use them
PROBE_TU = """// exps-codegen: does the device prelude give nvcc's bytes? (codegen/build/prelude.py)
#include "gen_common.cuh"

__global__ void __launch_bounds__(256)
exps_prelude_probe(const uint64_t* __restrict__ a, uint64_t* __restrict__ o, uint64_t n) {
    const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const uint64_t x = EXPS_LD(a + i), y = EXPS_LD(a + (i ^ 1));
    const uint64_t m = gl_add(gl_mul(x, y), gl_sub(gl_mulhi(x, y), exps_log2_ceil(n + gridDim.z)));
    o[i] = gl_inv(gl_neg(m));
}
"""

_lock = threading.Lock()
_decided: dict[tuple, bool] = {}


def text() -> str:
    return (TEMPLATES / PRELUDE).read_text()


def _works(opts: toolchain.CompileOptions, cache: ObjectCache) -> bool:
    tmp = Path(tempfile.mkdtemp(prefix="exps-prelude-"))
    try:
        for name in (COMMON_HEADER, ABI_HEADER):
            shutil.copyfile(TEMPLATES / name, tmp / name)
        tu = tmp / "exps_prelude_probe.cu"
        tu.write_text(PROBE_TU)
        outs = []
        for i, o in enumerate((opts, dataclasses.replace(opts, prelude=text()))):
            # through the build's launcher (a shared ccache hands the next machine both)
            r = cache.compile_cached(tu, tmp / f"probe{i}.o", o, include_dirs=[tmp])
            outs.append(Path(r.obj_path).read_bytes())
        if outs[0] != outs[1]:
            log.info("device prelude: its output differs from nvcc's with cuda_runtime.h; "
                     "compiling with the full header")
            return False
        return True
    except toolchain.CompileGuardError:
        raise
    except (toolchain.CompileError, OSError) as e:
        lines = str(getattr(e, "stderr", "") or e).strip().splitlines() or [""]
        first = next((ln for ln in lines if "error" in ln), lines[0]).strip()
        log.info("device prelude: unusable with this nvcc (%s); compiling with the full header", first[:200])
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def options(opts: toolchain.CompileOptions, cache: ObjectCache | None = None) -> toolchain.CompileOptions:
    """`opts` with the device prelude when it is on, the compile is device-only, and the probe
    gives the same bytes with it as without (decided once per process and option set)."""
    if not opts.device_only or not toolchain.knobs().device_prelude:
        return opts
    cache = cache or ObjectCache()
    k = (str(cache.root), str(toolchain.find_nvcc()), tuple(opts.flags()))
    with _lock:
        if k not in _decided:
            _decided[k] = _works(opts, cache)
        ok = _decided[k]
    return dataclasses.replace(opts, prelude=text()) if ok else opts
