"""Every user mistake is one line and exit code 2, with no traceback and nothing created; an
interrupt is one line and exit code 130, leaves no process behind, and the next build completes.
Through the real `exps-codegen` and `doit` (our dodo.py) in subprocesses (the table of
docs/USAGE.md is these cases)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import buildkit as bk

pytestmark = pytest.mark.requires("nvcc")

PREFIX = "exps-codegen: error: "
VARS = "pk=, build=, arch=, cap=, chunk=, chunk_bounds=, launcher=, compile_timeout=, allow_bad_input="


def _env(tmp: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPS_")}
    env["EXPS_BUILD_ROOT"] = str(tmp / "builds")
    env["EXPS_CACHE_DIR"] = str(tmp / "cache")
    env.update(extra)
    return env


def _doit(*args) -> list[str]:
    return [sys.executable, "-m", "doit", "-f", str(bk.DODO), *args]


def _run(argv, tmp: Path, env=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=tmp, env=env or _env(tmp), capture_output=True, text=True,
                          timeout=timeout)


def _one_line(p: subprocess.CompletedProcess, want: str, rc: int = 2) -> None:
    """Exit code `rc`, stderr exactly one line equal to `want` (or starting with it when `want`
    ends with '…'), no traceback anywhere."""
    assert p.returncode == rc, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stdout + p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    if want.endswith("…"):
        assert lines[0].startswith(want[:-1]), lines[0]
    else:
        assert lines[0] == want, lines[0]


@pytest.fixture
def small_key(tmp_path: Path) -> Path:
    return bk.copy_key(tmp_path / "pk", (bk.TINY,))


def _nothing_created(tmp: Path, *dirs: Path) -> None:
    assert not (tmp / "builds").exists(), list((tmp / "builds").rglob("*"))
    for d in dirs:
        assert not d.exists()


# ---------------------------------------------------------------------- the key
@pytest.mark.parametrize("front", ["cli", "doit"])
def test_missing_key(tmp_path: Path, front: str) -> None:
    gone, b = tmp_path / "no-such-key", tmp_path / "b"
    argv = ([*bk.exps_codegen(), "build", str(gone), "--build-dir", str(b)] if front == "cli"
            else _doit(f"pk={gone}", f"build={b}"))
    _one_line(_run(argv, tmp_path), f"{PREFIX}provingKey {gone} does not exist: give the directory that "
              "holds the <base>.starkinfo.json files (pk=DIR / exps-codegen build DIR)")
    _nothing_created(tmp_path, b)


@pytest.mark.parametrize("front", ["cli", "doit"])
def test_key_is_a_file(tmp_path: Path, front: str) -> None:
    f = tmp_path / "key.json"
    f.write_text("{}")
    argv = [*bk.exps_codegen(), "build", str(f)] if front == "cli" else _doit(f"pk={f}")
    _one_line(_run(argv, tmp_path), f"{PREFIX}provingKey {f} is not a directory: …")
    _nothing_created(tmp_path)


@pytest.mark.parametrize("front", ["cli", "doit"])
def test_empty_key(tmp_path: Path, front: str) -> None:
    e = tmp_path / "empty"
    e.mkdir()
    argv = [*bk.exps_codegen(), "build", str(e)] if front == "cli" else _doit(f"pk={e}")
    _one_line(_run(argv, tmp_path), f"{PREFIX}no AIRs found under {e}: expected <base>.starkinfo.json "
              "files, each with a sibling <base>.expressionsinfo.json")
    _nothing_created(tmp_path)


# ---------------------------------------------------------------------- arch, nvcc, variables
@pytest.mark.parametrize("front", ["cli", "doit"])
def test_unknown_arch_lists_the_valid_ones(tmp_path: Path, small_key: Path, front: str) -> None:
    argv = ([*bk.exps_codegen(), "build", str(small_key), "--arch", "sm_999"] if front == "cli"
            else _doit(f"pk={small_key}", "arch=sm_999"))
    p = _run(argv, tmp_path)
    _one_line(p, f"{PREFIX}arch=sm_999: arch(s) ['sm_999'] not supported by …")
    supported = p.stderr.split("(supported: ")[1].rstrip(")\n").split(", ")
    assert "90" in supported and "80" in supported
    _nothing_created(tmp_path)


@pytest.mark.parametrize("front", ["cli", "doit"])
def test_bad_arch_word(tmp_path: Path, small_key: Path, front: str) -> None:
    argv = ([*bk.exps_codegen(), "build", str(small_key), "--arch", "hopper"] if front == "cli"
            else _doit(f"pk={small_key}", "arch=hopper"))
    p = _run(argv, tmp_path)
    _one_line(p, f"{PREFIX}arch=hopper: bad arch 'hopper': expected e.g. 90, sm_90, 9.0, 'major' or "
              "'auto' (this nvcc supports: …")
    _nothing_created(tmp_path)


def _no_nvcc_env(tmp: Path) -> dict:
    """PATH without nvcc (python and the console scripts stay reachable)."""
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    for tool in ("doit", "exps-codegen"):
        exe = shutil.which(tool)
        if exe:
            (bindir / tool).symlink_to(exe)
    (bindir / "python3").symlink_to(sys.executable)
    env = _env(tmp, PATH=f"{bindir}:/usr/bin:/bin", EXPS_CUDA_DIRS="")     # (nor CUDA's install dirs)
    for k in ("CUDA_HOME", "CUDA_PATH"):
        env.pop(k, None)
    assert shutil.which("nvcc", path=env["PATH"]) is None
    return env


NO_NVCC = (f"{PREFIX}nvcc not found (looked at $EXPS_NVCC, PATH, $CUDA_HOME/bin, $CUDA_PATH/bin, "
           "pip's nvidia/*/bin/nvcc and /usr/local/cuda*/bin, /opt/cuda/bin). Install the CUDA toolkit (>= 12) or `pip install nvidia-cuda-nvcc`, "
           "or set EXPS_NVCC=/path/to/nvcc (or CUDA_HOME).")


@pytest.mark.parametrize("front", ["cli", "doit"])
def test_nvcc_missing(tmp_path: Path, small_key: Path, front: str) -> None:
    argv = [*bk.exps_codegen(), "build", str(small_key)] if front == "cli" else _doit(f"pk={small_key}")
    _one_line(_run(argv, tmp_path, env=_no_nvcc_env(tmp_path)), NO_NVCC)
    _nothing_created(tmp_path)


def test_gpucheck_without_cupy(tmp_path: Path, small_key: Path) -> None:
    """No CuPy (a build machine): one line that says what to install and what runs without a GPU.
    A `cupy` module that fails to import stands in for its absence wherever CuPy is installed."""
    fake = tmp_path / "nocupy"
    fake.mkdir()
    (fake / "cupy.py").write_text("raise ImportError('No module named cupy')\n")
    env = _env(tmp_path, PYTHONPATH=os.pathsep.join([str(fake), *filter(None, [os.environ.get("PYTHONPATH")])]))
    p = _run([*bk.exps_codegen(), "gpucheck", str(small_key)], tmp_path, env=env)
    _one_line(p, f"{PREFIX}gpucheck needs CuPy and a CUDA GPU (No module named cupy): pip install -e '.[gpu]', "
                 "or run `exps-codegen verify` (the host check, no GPU)")


@pytest.mark.parametrize("front", ["cli", "doit"])
def test_emit_needs_no_nvcc(tmp_path: Path, small_key: Path, front: str) -> None:
    """Sources only: with a chunk nothing is probed; without one the cost model's estimate is
    used, and said."""
    env = _no_nvcc_env(tmp_path)
    for chunk in ("0", None):
        b = tmp_path / f"b{chunk}"
        if front == "cli":
            argv = [*bk.exps_codegen(), "emit", str(small_key), "--keep-dir", str(b)]
            argv += ["--chunk", chunk] if chunk is not None else []
        else:
            argv = _doit("emit", f"pk={small_key}", f"build={b}", *([f"chunk={chunk}"] if chunk else []))
        p = _run(argv, tmp_path, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "Traceback" not in p.stdout + p.stderr
        src = b / bk.TINY_KEY / "src"
        assert sorted(x.name for x in src.iterdir()) == sorted(
            ["gen_common.cuh", "exps_abi.h", "exps_runtime.cpp", f"{bk.TINY_KEY}_q0_x0.cu", "exps_xinv.cu",
             f"{bk.TINY_KEY}_abi.cpp"])
        said = "no nvcc to probe with: chunking estimated by the cost model"
        assert (said in p.stderr) == (chunk is None), p.stderr
        assert not list(small_key.rglob("*.so"))


def test_unknown_doit_variable(tmp_path: Path, small_key: Path) -> None:
    _one_line(_run(_doit(f"pk={small_key}", "arhc=90"), tmp_path),
              f"{PREFIX}unknown variable arhc=…: the variables are {VARS}")
    _nothing_created(tmp_path)


@pytest.mark.parametrize("args,want", [
    (("chunk=abc",), "chunk=abc: expected a whole number"),
    (("cap=0",), "cap must be a positive number of ops"),
    (("chunk=-1",), "chunk must be >= 0 (0 = a single kernel)"),
    (("compile_timeout=soon",), "compile_timeout=soon: expected seconds"),
    (("chunk_bounds=maybe",), "chunk_bounds=maybe: expected 1 or 0 (on / off)"),
])
def test_bad_variable_values(tmp_path: Path, small_key: Path, args, want) -> None:
    _one_line(_run(_doit(f"pk={small_key}", *args), tmp_path), PREFIX + want)
    _nothing_created(tmp_path)


@pytest.mark.parametrize("front", ["cli", "doit"])
def test_unwritable_build_dir(tmp_path: Path, small_key: Path, front: str) -> None:
    """A build dir below a regular file, and one below /proc (root may write anywhere else)."""
    f = tmp_path / "file"
    f.write_text("")
    for b, why in ((f / "b", f"build dir {f / 'b'}: {f} is not a directory; choose another with "
                               "build=DIR / --build-dir DIR"),
                   (Path("/proc/exps-no/b"), "cannot create the build dir /proc/exps-no/b: …")):
        argv = ([*bk.exps_codegen(), "build", str(small_key), "--build-dir", str(b)] if front == "cli"
                else _doit(f"pk={small_key}", f"build={b}"))
        _one_line(_run(argv, tmp_path), PREFIX + why)
    _nothing_created(tmp_path)


# ---------------------------------------------------------------------- exps-codegen sample DIR
def test_sample_into_a_non_empty_dir(tmp_path: Path) -> None:
    d = tmp_path / "key"
    d.mkdir()
    (d / "mine.txt").write_text("x")
    _one_line(_run([*bk.exps_codegen(), "sample", str(d)], tmp_path),
              f"{PREFIX}{d} is not empty: give a new or empty folder for the sample key")
    assert [q.name for q in d.iterdir()] == ["mine.txt"]


def test_sample_onto_a_file(tmp_path: Path) -> None:
    f = tmp_path / "key"
    f.write_text("x")
    _one_line(_run([*bk.exps_codegen(), "sample", str(f)], tmp_path),
              f"{PREFIX}{f} is not a directory: give a new or empty folder for the sample key")
    assert f.read_text() == "x"


def test_sample_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    _one_line(_run([*bk.exps_codegen(), "sample", str(tmp_path / "f" / "key")], tmp_path),
              f"{PREFIX}cannot write the sample key to {tmp_path / 'f' / 'key'}: Not a directory")


def test_cli_usage_error_is_argparse_two(tmp_path: Path) -> None:
    p = _run([*bk.exps_codegen(), "biuld", "x"], tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "invalid choice: 'biuld'" in p.stderr


# ---------------------------------------------------------------------- interrupts
def _alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it is dead)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _procs_with(marker: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker.encode() in (d / "cmdline").read_bytes() and _alive(int(d.name)):
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def _stalling_build(tmp_path: Path, front: str) -> tuple[bk.Kit, list[str]]:
    """Tiny + Skipped, and the argv of a parallel build (`exps-codegen -j 2` / `doit -n 2`)
    whose compiles stall (the launcher writes stall.pid.<pid> under tmp_path, then sleeps)."""
    kit = bk.new_kit(tmp_path / "k", airs=(bk.TINY, bk.SKIPPED))
    stall = bk.write_launcher(tmp_path / "stall.sh", kit.log, fault="stall", kind="cc",
                              marker=tmp_path / "stall.pid")
    if front == "cli":
        return kit, [*bk.exps_codegen(), "build", str(kit.pk), *bk.CLI_ARGS, "--build-dir", str(kit.build),
                     "--launcher", stall, "-j", "2"]
    return kit, kit.doit_argv("-n", "2", launcher=stall)


def _wait_for_stall(tmp_path: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300      # a liveness bound: the stall comes after the build's start
    while not list(tmp_path.glob("stall.pid.*")) and time.monotonic() < deadline:
        assert proc.poll() is None, "the build ended before its compiler stalled"
        time.sleep(0.1)
    assert list(tmp_path.glob("stall.pid.*")), "no compiler stalled"


@pytest.mark.parametrize("front", ["cli", "doit"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_is_one_line_and_kills_the_compilers(tmp_path: Path, front: str, sig) -> None:
    """A build stuck in a compile (a launcher that stalls) gets SIGINT (as Ctrl-C sends it to the
    foreground group) or SIGTERM (to the front end only): one line, exit 128+sig, no traceback,
    no process left (the stalled compile included), the lock released: the next build completes."""
    kit, argv = _stalling_build(tmp_path, front)
    proc = subprocess.Popen(argv, cwd=kit.root, env=kit.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _wait_for_stall(tmp_path, proc)
        time.sleep(0.5)
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)          # the terminal's Ctrl-C: the whole foreground group
        else:
            os.kill(proc.pid, sig)            # a pipeline's kill: the front end only
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            bk.kill_strays(kit.root)
    assert proc.returncode == 128 + sig, (proc.returncode, out, err)
    assert "Traceback" not in out + err, out + err
    assert err.splitlines() == ["exps-codegen: interrupted \u2014 rerun to continue"], err
    # nothing of that build survives (workers die ~2 s after their parent: allow a bound)
    stalled = [int(p.read_text()) for p in tmp_path.glob("stall.pid.*")]
    assert stalled
    deadline = time.monotonic() + 20
    while (_procs_with(str(tmp_path)) or any(_alive(pid) for pid in stalled)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _procs_with(str(tmp_path)) == [] and not any(_alive(pid) for pid in stalled)
    assert bk.so_files(kit.pk) == set()
    # the next build completes (lock released, no stale state)
    kit.doit(timeout=300)
    assert bk.so_files(kit.pk) == {bk.TINY}


@pytest.mark.parametrize("front", ["cli", "doit"])
def test_sigkill_of_the_front_end_leaves_no_process_and_no_lock(tmp_path: Path, front: str) -> None:
    """A pipeline SIGKILLs only the front end (doit's main process / exps-codegen) mid-compile:
    its workers and every compiler (each under a guard) die with it, within a bound; the lock it
    held does not block the next build, which completes."""
    kit, argv = _stalling_build(tmp_path, front)
    proc = subprocess.Popen(argv, cwd=kit.root, env=kit.env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for_stall(tmp_path, proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        stalled = [int(p.read_text()) for p in tmp_path.glob("stall.pid.*")]
        assert stalled

        def left() -> list[int]:    # the guards name stall.sh (under tmp_path); the stalls by pid
            return _procs_with(str(tmp_path)) + [pid for pid in stalled if _alive(pid)]
        deadline = time.monotonic() + 30      # parent-death signals arrive within a few seconds
        while left() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert left() == []
    finally:
        bk.kill_strays(kit.root)
    p = kit.doit(timeout=300)
    assert "waiting for the build" not in p.stderr, p.stderr
    assert bk.so_files(kit.pk) == {bk.TINY}
