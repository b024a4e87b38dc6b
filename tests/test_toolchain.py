"""toolchain.py: ptxas parsing, nvcc discovery, gencode/options/knobs and the compile guard need
no nvcc and always run; the rest runs against the real nvcc (arch 90 only, to stay quick) through
the `nvcc` fixture, which requires it (tests/require.py: skip, or fail under EXPS_REQUIRE)."""

from __future__ import annotations

import ctypes
import re
import stat
import subprocess
import time
from pathlib import Path

import pytest

from codegen.build import toolchain as tc
from require import require


SPILL_CU = r"""
// 32 live u64 values: register-hungry; spills under -maxrregcount 24 (ptxas' lower bound).
__global__ void hungry(unsigned long long* out, const unsigned long long* in) {
  unsigned long long v[32];
#pragma unroll
  for (int i = 0; i < 32; i++) v[i] = in[i * 1024 + threadIdx.x];
  unsigned long long s = 0;
#pragma unroll
  for (int i = 0; i < 32; i++)
#pragma unroll
    for (int j = i + 1; j < 32; j++) s ^= v[i] * v[j] + (v[j] >> (i & 7));
  out[threadIdx.x] = s;
}
extern "C" __global__ void calm(int* out) {
  __shared__ int buf[256];
  buf[threadIdx.x] = threadIdx.x; __syncthreads(); out[threadIdx.x] = buf[255 - threadIdx.x];
}
"""

HOST_CU = r"""
extern "C" __global__ void k(int* out) { out[threadIdx.x] = 7; }
extern "C" int exps_answer(void) { return 42; }
"""

# Real CUDA 13.0 `-Xptxas -v` output: two archs, an -rdc device function printed before the
# run's first entry, cmem (printed for sm_75), smem and cumulative stack.
PTXAS_SAMPLE = """\
ptxas info    : 0 bytes gmem
ptxas info    : Function properties for _Z6helperiPi
    40 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z6callitPiS_' for 'sm_75'
ptxas info    : Function properties for _Z6callitPiS_
    32 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 15 registers, used 0 barriers, 32 bytes cumulative stack size, 368 bytes cmem[0]
ptxas info    : Compile time = 2.369 ms
ptxas info    : 16 bytes gmem
ptxas info    : Compiling entry function 'shm' for 'sm_90'
ptxas info    : Function properties for shm
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem
ptxas info    : Compile time = 2.409 ms
"""


@pytest.fixture(scope="module")
def nvcc() -> Path:
    require("nvcc")
    return tc.find_nvcc()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("EXPS_LAUNCHER", "EXPS_ASSERT_NO_COMPILE", "NVCC_PREPEND_FLAGS",
                "NVCC_APPEND_FLAGS"):
        monkeypatch.delenv(var, raising=False)


OPTS90 = tc.CompileOptions((90,))


# ----------------------------------------------------------------------------- ptxas report

def test_parse_ptxas_sample():
    r = tc.parse_ptxas(PTXAS_SAMPLE)
    assert r["_Z6callitPiS_"]["sm_75"] == {
        "entry": True, "registers": 15, "stack_frame": 32, "spill_stores": 8, "spill_loads": 12,
        "shared_mem": 0, "barriers": 0, "cumulative_stack": 32, "cmem": {"0": 368}}
    assert r["_Z6helperiPi"]["sm_75"]["entry"] is False
    assert r["_Z6helperiPi"]["sm_75"]["stack_frame"] == 40
    assert r["shm"]["sm_90"]["shared_mem"] == 1024 and r["shm"]["sm_90"]["barriers"] == 1
    assert set(r["shm"]) == {"sm_90"}
    assert tc.spill_bytes(r) == 20


def test_spill_report_real_nvcc(tmp_path, nvcc):
    tu = tmp_path / "spill.cu"
    tu.write_text(SPILL_CU)
    t0 = time.monotonic()
    res = tc.compile_object(tu, tmp_path / "o" / "spill.o", tc.CompileOptions((90,), maxrregcount=16),
                            nvcc=nvcc, launcher=[])
    print(f"compile of a spilling kernel: {time.monotonic() - t0:.2f} s")
    hungry = res.report["_Z6hungryPyPKy"]["sm_90"]
    assert hungry["entry"] and hungry["registers"] <= 24
    assert hungry["spill_stores"] > 0 and hungry["spill_loads"] > 0
    calm = res.report["calm"]["sm_90"]
    assert calm["spill_stores"] == calm["spill_loads"] == calm["stack_frame"] == 0
    assert calm["shared_mem"] == 1024
    assert res.obj_path.is_file() and res.obj_path.stat().st_size > 0
    assert "-maxrregcount" in res.argv and res.seconds > 0
    assert [p.name for p in res.obj_path.parent.iterdir()] == ["spill.o"]  # no temp left


def test_no_spill_kernel_reports_zero(tmp_path, nvcc):
    tu = tmp_path / "calm.cu"
    tu.write_text(HOST_CU)
    res = tc.compile_object(tu, tmp_path / "calm.o", OPTS90, nvcc=nvcc, launcher=[])
    assert res.report["k"]["sm_90"]["registers"] > 0
    assert tc.spill_bytes(res.report) == 0


def test_host_opt_level_leaves_the_device_code_alone(tmp_path, nvcc):
    """BASE_FLAGS' `-O1` is the host compiler's level only: with -O3 instead, cicc and
    ptxas get the same arguments and the PTX is the same text, so the SASS is the same."""
    from codegen.emit import ABI_HEADER, COMMON_HEADER, TEMPLATES
    for h in (COMMON_HEADER, ABI_HEADER):       # (gen_common.cuh includes exps_abi.h)
        (tmp_path / h).write_text((TEMPLATES / h).read_text())
    (tmp_path / "t.cu").write_text(f'#include "{COMMON_HEADER}"\n'
                                   "__global__ void k(uint64_t* d) { d[0] = gl_inv(gl_mul(d[1], d[2])); }\n")
    assert tc.BASE_FLAGS[0] == "-O1"
    o3 = ["-O3", *tc.BASE_FLAGS[1:]]

    def device_steps(flags: list[str]) -> list[str]:
        out = subprocess.run([str(nvcc), "-dryrun", "-c", *flags, *tc.gencode_flags([90]), "t.cu", "-o", "t.o"],
                             cwd=tmp_path, capture_output=True, text=True, check=True).stderr
        steps = [l for l in out.splitlines() if re.search(r"\b(cicc|ptxas)\b", l)]
        return [re.sub(r"tmpxft_\w+", "T", l) for l in steps]

    assert device_steps(list(tc.BASE_FLAGS)) == device_steps(o3) != []

    def ptx(flags: list[str]) -> str:
        subprocess.run([str(nvcc), "-ptx", *flags, "-arch=sm_90", "t.cu", "-o", "t.ptx"], cwd=tmp_path,
                       capture_output=True, check=True)
        return (tmp_path / "t.ptx").read_text()

    assert ptx(list(tc.BASE_FLAGS)) == ptx(o3)


# ----------------------------------------------------------------------------- discovery

def _fake_exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_find_nvcc_order(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("EXPS_NVCC", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    pip = _fake_exe(tmp_path / "site" / "nvidia" / "cuda_nvcc" / "bin" / "nvcc")
    monkeypatch.setattr(tc.site, "getsitepackages", lambda: [str(tmp_path / "site")])
    assert tc.find_nvcc() == pip.resolve()
    cuda_path = _fake_exe(tmp_path / "cp" / "bin" / "nvcc")
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "cp"))
    assert tc.find_nvcc() == cuda_path.resolve()
    cuda_home = _fake_exe(tmp_path / "ch" / "bin" / "nvcc")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "ch"))
    assert tc.find_nvcc() == cuda_home.resolve()
    on_path = _fake_exe(tmp_path / "p" / "nvcc")
    monkeypatch.setenv("PATH", str(tmp_path / "p"))
    assert tc.find_nvcc() == on_path.resolve()
    explicit = _fake_exe(tmp_path / "x" / "my-nvcc")
    monkeypatch.setenv("EXPS_NVCC", str(explicit))
    assert tc.find_nvcc() == explicit.resolve()
    monkeypatch.setenv("EXPS_NVCC", str(tmp_path / "nope"))
    with pytest.raises(tc.ToolchainError, match="EXPS_NVCC"):
        tc.find_nvcc()


def test_find_nvcc_missing_says_what_to_do(tmp_path, monkeypatch):
    for var in ("EXPS_NVCC", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("EXPS_CUDA_DIRS", "")      # (this machine's /usr/local/cuda would be found)
    monkeypatch.setattr(tc, "_pip_nvcc_candidates", lambda: iter(()))
    with pytest.raises(tc.ToolchainError, match="(?s)Install the CUDA toolkit.*EXPS_NVCC"):
        tc.find_nvcc()


def test_nvcc_version_probe_and_injection(nvcc):
    info = tc.nvcc_version(nvcc)
    assert info.release >= (12, 0) and "Cuda compilation tools" in info.text
    assert tc.nvcc_version(nvcc) is info  # probed once
    fake = tc.NvccInfo.parse("Cuda compilation tools, release 12.8, V12.8.93")
    assert fake.release == (12, 8)
    with tc.injected_version(fake):
        assert tc.nvcc_version(nvcc) is fake
    assert tc.nvcc_version(nvcc) is info
    with pytest.raises(tc.ToolchainError):
        tc.NvccInfo.parse("no version here")


# ----------------------------------------------------------------------------- archs

def test_resolve_archs(nvcc, monkeypatch, caplog):
    supported = tc.supported_archs(nvcc)
    assert 90 in supported and all(isinstance(a, int) for a in supported)
    assert tc.resolve_archs("major", nvcc) == [a for a in tc.MAJOR_ARCHS if a in supported]
    monkeypatch.setattr(tc, "supported_archs", lambda _n: (75, 80, 86, 90))
    assert tc.resolve_archs("major", nvcc) == [80, 86, 90]
    assert tc.resolve_archs("sm_90", nvcc) == [90]
    assert tc.resolve_archs("90, sm_80 8.6 90", nvcc) == [80, 86, 90]
    with pytest.raises(tc.ToolchainError, match="sm_120.*not supported"):
        tc.resolve_archs("89,120", nvcc)
    for bad in ("garbage", "sm_", "", "9", "sm_90x"):
        with pytest.raises(tc.ToolchainError):
            tc.resolve_archs(bad, nvcc)


def test_resolve_archs_list_real(nvcc):
    assert tc.resolve_archs("89,120", nvcc) == [89, 120]
    with pytest.raises(tc.ToolchainError, match="sm_999"):
        tc.resolve_archs("sm_999", nvcc)


def test_resolve_auto(nvcc, monkeypatch):
    """No GPU: sm_90 only (the front ends print NO_GPU_NOTE, which says how to get the rest)."""
    monkeypatch.setattr(tc, "detect_gpu_archs", lambda: [])
    assert tc.resolve_archs("auto", nvcc) == [tc.NO_GPU_ARCH] == [90]
    assert "arch=major" in tc.NO_GPU_NOTE
    monkeypatch.setattr(tc, "detect_gpu_archs", lambda: [90])
    assert tc.resolve_archs("auto", nvcc) == [90]


def test_gencode_flags():
    assert tc.gencode_flags([90]) == ["-gencode", "arch=compute_90,code=sm_90",
                                      "-gencode", "arch=compute_90,code=compute_90"]
    flags = tc.gencode_flags([120, 80, 86, 89, 90, 100])
    pairs = [flags[i + 1] for i in range(0, len(flags), 2)]
    assert all(flags[i] == "-gencode" for i in range(0, len(flags), 2))
    sass = [p for p in pairs if "code=sm_" in p]
    ptx = [p for p in pairs if "code=compute_" in p]
    assert sass == [f"arch=compute_{a},code=sm_{a}" for a in (80, 86, 89, 90, 100, 120)]
    assert ptx == [f"arch=compute_{a},code=compute_{a}" for a in (89, 90, 100, 120)]


def test_compile_options_flags_and_key():
    o = tc.CompileOptions((90, 80, 90), extra_flags=("-lineinfo",), maxrregcount=64)
    assert o.archs == (80, 90)
    f = o.flags()
    assert f[:6] == ["-O1", "-std=c++17", "-Xcompiler", "-fPIC", "-DGL64_PARTIALLY_REDUCED",
                     "-Xptxas=-v"]
    assert f[-3:] == ["-maxrregcount", "64", "-lineinfo"]
    assert o.key() == tc.CompileOptions((80, 90), ("-lineinfo",), 64).key()
    assert o.key() != tc.CompileOptions((80, 90), ("-lineinfo",), 72).key()
    assert o.key() != tc.CompileOptions((80, 90), maxrregcount=64).key()
    with pytest.raises(tc.ToolchainError):
        tc.CompileOptions(())


def test_knobs(monkeypatch, tmp_path):
    monkeypatch.setenv("EXPS_LAUNCHER", "ccache --flag 'a b'")
    monkeypatch.setenv("EXPS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EXPS_CACHE_MAX_BYTES", "500M")
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-lineinfo")
    monkeypatch.delenv("NVCC_PREPEND_FLAGS", raising=False)
    monkeypatch.delenv("NVCC_CCBIN", raising=False)
    k = tc.knobs()
    assert k.launcher == ("ccache", "--flag", "a b") == tuple(tc.launcher_from_env())
    assert k.cache_dir == tmp_path and k.cache_max_bytes == 500 << 20
    assert k.keyed_env == {"NVCC_PREPEND_FLAGS": "", "NVCC_APPEND_FLAGS": "-lineinfo", "NVCC_CCBIN": ""}
    assert not k.assert_no_compile
    monkeypatch.setenv("EXPS_CACHE_MAX_BYTES", "lots")
    with pytest.raises(tc.ToolchainError):
        tc.knobs()


# ----------------------------------------------------------------------------- errors, guard

def test_compile_error_has_stderr_and_repro(tmp_path, nvcc):
    tu = tmp_path / "bad.cu"
    tu.write_text("__global__ void k() { this_is_not_declared = 1; }\n")
    out = tmp_path / "bad.o"
    with pytest.raises(tc.CompileError) as ei:
        tc.compile_object(tu, out, OPTS90, nvcc=nvcc, launcher=[])
    e = ei.value
    assert e.rc not in (0, None) and "this_is_not_declared" in e.stderr
    assert e.tu_path == tu.resolve() and e.argv[0] == str(nvcc)
    assert "\n" not in e.repro and str(tu.resolve()) in e.repro and str(out) in e.repro
    assert "repro:" in str(e) and "1  __global__" in e.dump()
    assert not out.exists() and list(tmp_path.iterdir()) == [tu]


def test_assert_no_compile_guard(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPS_ASSERT_NO_COMPILE", "1")
    tu = tmp_path / "k.cu"
    tu.write_text(HOST_CU)
    with pytest.raises(tc.CompileGuardError):
        tc.compile_object(tu, tmp_path / "k.o", OPTS90)
    with pytest.raises(tc.CompileGuardError):
        tc.link_shared([tmp_path / "k.o"], tmp_path / "k.so", OPTS90)


def test_timeout_kills_process_group(tmp_path, nvcc):
    pidfile = tmp_path / "child.pid"
    launcher = _fake_exe(tmp_path / "slow-launcher")
    launcher.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pidfile}\nwait\n")
    tu = tmp_path / "k.cu"
    tu.write_text(HOST_CU)
    with pytest.raises(tc.CompileError, match="timed out") as ei:     # not the launcher's 60 s sleep
        tc.compile_object(tu, tmp_path / "k.o", OPTS90, nvcc=nvcc, launcher=[str(launcher)],
                          timeout_s=1.0)
    assert ei.value.rc is None
    child = int(pidfile.read_text())

    def state() -> str:     # '' when gone, 'Z' for a zombie awaiting its reaper ('ZN' when niced)
        return subprocess.run(["ps", "-o", "stat=", "-p", str(child)], capture_output=True, text=True).stdout.strip()
    deadline = time.monotonic() + 30      # SIGKILL is delivered at once; a loaded machine runs ps late
    while state()[:1] not in ("", "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state()[:1] in ("", "Z")


# ----------------------------------------------------------------------------- link

def test_link_shared_loads_with_ctypes(tmp_path, nvcc):
    tu = tmp_path / "host.cu"
    tu.write_text(HOST_CU)
    obj = tc.compile_object(tu, tmp_path / "host.o", OPTS90, nvcc=nvcc, launcher=[]).obj_path
    so = tc.link_shared([obj], tmp_path / "out" / "libhost.so", OPTS90, nvcc=nvcc, launcher=[])
    assert so == tmp_path / "out" / "libhost.so"
    lib = ctypes.CDLL(str(so))
    assert lib.exps_answer() == 42
    assert sorted(p.name for p in so.parent.iterdir()) == ["libhost.so"]
    require("binutils")
    sections = subprocess.run(["readelf", "-S", str(so)], capture_output=True, text=True, check=True).stdout
    assert ".symtab" not in sections and ".dynsym" in sections  # stripped
    dyn = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
    assert "libcudart" not in dyn and "NEEDED" in dyn  # static runtime


def test_link_failure_leaves_nothing(tmp_path, nvcc):
    junk = tmp_path / "junk.o"
    junk.write_bytes(b"definitely not an ELF object")
    out = tmp_path / "lib" / "libx.so"
    out.parent.mkdir()
    out.write_bytes(b"stale")
    with pytest.raises(tc.CompileError) as ei:
        tc.link_shared([junk], out, OPTS90, nvcc=nvcc, launcher=[])
    assert ei.value.rc not in (0, None)
    assert list(out.parent.iterdir()) == []


# ----------------------------------------------------------------------------- launcher

def test_launcher_is_used(tmp_path, nvcc, monkeypatch):
    count = tmp_path / "count"
    launcher = _fake_exe(tmp_path / "counting-launcher")
    launcher.write_text(f'#!/bin/sh\necho "$1" >> {count}\nexec "$@"\n')
    monkeypatch.setenv("EXPS_LAUNCHER", str(launcher))
    tu = tmp_path / "k.cu"
    tu.write_text(HOST_CU)
    res = tc.compile_object(tu, tmp_path / "k.o", OPTS90, nvcc=nvcc)  # launcher from env
    assert res.argv[:2] == [str(launcher), str(nvcc)]
    assert count.read_text().splitlines() == [str(nvcc)]
    assert res.report["k"]["sm_90"]["registers"] > 0


def test_ccache_launcher_hits(tmp_path, nvcc, monkeypatch):
    """ccache (4.x) treats nvcc as a compiler and caches multi-gencode compiles; on a hit it
    replays the stored stderr, so the ptxas report survives."""
    require("ccache")
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    monkeypatch.setenv("EXPS_LAUNCHER", "ccache")
    tu = tmp_path / "k.cu"
    tu.write_text(HOST_CU)
    opts = tc.CompileOptions((89, 90))
    first = tc.compile_object(tu, tmp_path / "a.o", opts, nvcc=nvcc)
    second = tc.compile_object(tu, tmp_path / "b.o", opts, nvcc=nvcc)
    stats = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True).stdout
    counters = dict(line.split("\t") for line in stats.splitlines() if "\t" in line)
    hits = int(counters.get("direct_cache_hit", 0)) + int(counters.get("preprocessed_cache_hit", 0))
    assert hits == 1 and int(counters["cache_miss"]) == 1
    assert (tmp_path / "a.o").read_bytes() == (tmp_path / "b.o").read_bytes()
    assert second.report == first.report and set(second.report["k"]) == {"sm_89", "sm_90"}


def test_device_only_options_for_probes():
    """Autotune probes compile device code only (-cubin, one arch): no host pass, no fatbinary."""
    o = tc.CompileOptions((90,), extra_flags=("-Xcompiler", "-fvisibility=hidden"), mode="cubin")
    assert o.flags() == ["-cubin", *tc.BASE_FLAGS, "-arch=sm_90", "-Xcompiler", "-fvisibility=hidden"]
    assert o.device_only
    assert o.key() != tc.CompileOptions((90,), extra_flags=("-Xcompiler", "-fvisibility=hidden")).key()
    with pytest.raises(tc.ToolchainError):
        tc.CompileOptions((80, 90), mode="cubin")
    with pytest.raises(tc.ToolchainError):
        tc.CompileOptions((90,), mode="ptx")


def test_kernel_tus_compile_device_code_only():
    """A kernel's device TUs compile to fatbins: every target's SASS and the PTX, and no
    host pass (no cudafe++, no host compile of stubs); the launch table and the launcher are plain
    host C++ with no gencode at all."""
    from codegen.build import kernelcc
    dev = kernelcc.compile_options([80, 90])
    assert dev.mode == "fatbin" and dev.device_only
    assert dev.flags()[:1 + len(tc.BASE_FLAGS)] == ["-fatbin", *tc.BASE_FLAGS]
    assert " ".join(tc.gencode_flags((80, 90))) in " ".join(dev.flags())
    host = kernelcc.host_options([80, 90])
    assert host.mode == "host" and not host.device_only
    assert not any("gencode" in f or "arch" in f for f in host.flags())


def test_fatbin_compile_runs_no_host_pass(tmp_path, nvcc):
    """nvcc in the mode of a device TU runs no cudafe++ and no host compiler (its --dryrun plan);
    the object compile (the old way) runs both. The fatbin holds the kernel (cuobjdump)."""
    tu = tmp_path / "k.cu"
    tu.write_text(HOST_CU)
    def plan(mode):
        argv = [str(nvcc), "--dryrun", "-c", *tc.CompileOptions((90,), mode=mode).flags(), str(tu), "-o",
                str(tmp_path / "out")]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stderr
    def host_compiles(text):   # the host compiler's runs other than preprocessing
        return [x for x in text.splitlines() if re.match(r"#\$ (gcc|g\+\+|c\+\+) ", x) and " -E " not in x]
    fat, obj = plan("fatbin"), plan("object")
    assert "cudafe++" in obj and host_compiles(obj)
    assert "cudafe++" not in fat and host_compiles(fat) == [], fat
    assert "cicc" in fat and "ptxas" in fat and "fatbinary" in fat
    res = tc.compile_object(tu, tmp_path / "k.fatbin", tc.CompileOptions((90,), mode="fatbin"), nvcc=nvcc, launcher=[])
    assert res.argv[res.argv.index(str(nvcc)) + 1:][:2] == ["-c", "-fatbin"]
    assert res.report["k"]["sm_90"]["registers"] > 0
    assert (tmp_path / "k.fatbin").read_bytes()[:4] == bytes.fromhex("50ed55ba")   # fatbin magic


def test_host_compiler_text_follows_nvcc_ccbin(tmp_path, monkeypatch) -> None:
    """The host compiler's identity (part of the object cache's key and the tasks' toolchain):
    gcc and g++ on PATH; NVCC_CCBIN as a compiler or, as nvcc's -ccbin takes it, a directory that
    holds gcc and g++; a compiler that cannot say its version is "unknown", never an error."""
    for n in ("gcc", "g++"):
        (tmp_path / n).write_text(f'#!/bin/sh\necho "{n} (other) 99.0.1"\n')
        (tmp_path / n).chmod(0o755)
    monkeypatch.setenv("NVCC_CCBIN", str(tmp_path))
    assert tc.host_compiler_text() == "gcc: gcc (other) 99.0.1; g++: g++ (other) 99.0.1"
    monkeypatch.setenv("NVCC_CCBIN", str(tmp_path / "g++"))
    assert tc.host_compiler_text() == "g++: g++ (other) 99.0.1"
    monkeypatch.setenv("NVCC_CCBIN", str(tmp_path / "none"))
    assert tc.host_compiler_text() == "none: unknown"
    monkeypatch.delenv("NVCC_CCBIN")
    assert tc.host_compiler_text().startswith("gcc: ") and "; g++: " in tc.host_compiler_text()
