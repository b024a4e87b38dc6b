"""The device prelude (codegen/build/prelude.py): device-only compiles see
templates/exps_device_prelude.h as `cuda_runtime.h` instead of CUDA's ~37,000-line header, only
where that gives nvcc's own bytes. Checked with the real nvcc: every device TU of a real kernel
(chunked Q with scratch, expressions with and without a hint inverse, the generic inverse kernel)
compiles to the same fatbin bytes both ways; a prelude that fails or changes the output is never
used; the knob turns it off; the object cache keys the prelude's use and its text."""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from codegen.build import kernelcc, prelude, toolchain
from codegen.build.cache import ObjectCache
from codegen.coverage import cover
from codegen.discover import discover
from codegen.emit import TEMPLATES, KernelSource, device_tus, render
from codegen.model import load_air
from codegen.plan import plan

pytestmark = pytest.mark.requires("nvcc")

SAMPLE = Path(__file__).resolve().parent.parent / "provingkey-sample"
PRELUDE_TEXT = (TEMPLATES / "exps_device_prelude.h").read_text()


@pytest.fixture(autouse=True)
def fresh_decisions(monkeypatch):
    """Each test decides anew (the module keeps one decision per process and option set)."""
    monkeypatch.setattr(prelude, "_decided", {})


def test_used_with_this_nvcc_for_device_compiles_only(tmp_path) -> None:
    cache = ObjectCache(tmp_path / "cache")
    dev = kernelcc.compile_options([90], cache)
    assert dev.prelude == PRELUDE_TEXT
    assert dev.flags()[-3:] == ["-Iexps_prelude", "-Xcompiler", "-fvisibility=hidden"]
    cub = prelude.options(toolchain.CompileOptions((90,), extra_flags=kernelcc.HIDDEN, mode="cubin"), cache)
    assert cub.prelude == PRELUDE_TEXT
    # the probe's two compiles went through the cache: the next process decides from two hits
    assert (cache.misses, cache.hits) == (4, 0)
    prelude._decided.clear()
    assert kernelcc.compile_options([90], cache).prelude == PRELUDE_TEXT
    assert (cache.misses, cache.hits) == (4, 2)
    host = kernelcc.host_options([90])
    assert prelude.options(host, cache) is host
    with pytest.raises(toolchain.ToolchainError, match="device-only"):
        toolchain.CompileOptions((90,), mode="object", prelude=PRELUDE_TEXT)


def test_every_device_tu_of_a_real_kernel_compiles_to_the_same_bytes(tmp_path) -> None:
    """Shared (155 Q ops) in 3 chunks with scratch slots, one TU per part: the Q chunks, its 5
    expressions (2 with a hint-inverse kernel `_ki`, 3 through the generic inverse kernel,
    wrapped-row reads), with the prelude and with CUDA's header: identical fatbins."""
    [p] = [p for p in discover(SAMPLE) if p.base == "Shared"][:1]
    si, ei = load_air(p.starkinfo, p.expressions)
    cov = cover(si, ei)
    ks = KernelSource(p.key, cov.q, plan(cov.q, 64), cov.exprs, "cd" * 32)
    files = render(ks, tu_ops=1)
    tus = device_tus(files)
    text = "".join(files[n] for n in tus)
    assert len(tus) >= 4 and "_ki(" in text and "exps_x_inv_k(" in text and "EXPS_ROW(-1)" in text
    src = tmp_path / "src"
    kernelcc.stage_sources(files, src)
    plain = toolchain.CompileOptions((90,), extra_flags=kernelcc.HIDDEN, mode="fatbin")
    with_prelude = dataclasses.replace(plain, prelude=PRELUDE_TEXT)
    for n in tus:
        a = toolchain.compile_object(src / n, tmp_path / "a" / (n + ".o"), plain, include_dirs=[src], launcher=[])
        b = toolchain.compile_object(src / n, tmp_path / "b" / (n + ".o"), with_prelude, include_dirs=[src],
                                     launcher=[])
        assert a.obj_path.read_bytes() == b.obj_path.read_bytes(), n
        assert a.report == b.report and a.report, n


@pytest.mark.parametrize("broken, why", [
    ("#error not this one\n", "unusable with this nvcc"),
    # compiles (CUDA's own header, next on the search path), but its output is not nvcc's: a
    # device variable of its own
    ("#pragma once\n#include_next <cuda_runtime.h>\n__device__ int exps_not_nvccs;\n", "differs from nvcc's"),
])
def test_a_prelude_that_fails_or_changes_the_output_is_not_used(tmp_path, monkeypatch, caplog, broken, why) -> None:
    monkeypatch.setattr(prelude, "text", lambda: broken)
    with caplog.at_level(logging.INFO, logger="exps_codegen"):
        opts = kernelcc.compile_options([90], ObjectCache(tmp_path / "cache"))
    assert opts.prelude == "" and "-Iexps_prelude" not in opts.flags()
    assert why in caplog.text and "compiling with the full header" in caplog.text


def test_knob_off_compiles_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EXPS_DEVICE_PRELUDE", "0")
    cache = ObjectCache(tmp_path / "cache")
    assert kernelcc.compile_options([90], cache).prelude == ""
    assert (cache.misses, cache.hits) == (0, 0)


def test_cache_key_holds_the_prelude_and_its_text(tmp_path) -> None:
    tu = tmp_path / "k.cu"
    tu.write_text('#include "gen_common.cuh"\n')
    (tmp_path / "gen_common.cuh").write_text("// header\n")
    cache = ObjectCache(tmp_path / "cache")
    plain = toolchain.CompileOptions((90,), mode="fatbin")
    keys = {cache.key_for(tu, o, include_dirs=[tmp_path])
            for o in (plain, dataclasses.replace(plain, prelude=PRELUDE_TEXT),
                      dataclasses.replace(plain, prelude=PRELUDE_TEXT + "// another\n"))}
    assert len(keys) == 3
