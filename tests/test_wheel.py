"""The wheel: what `pip wheel .` puts in it, and that an install of it works anywhere.

Default tier: the wheel is built (from a copy of the checkout's package inputs, so the build's
build/ and egg-info never land in the checkout; the copy also holds a placed `.so`, an object file
and `__pycache__`, which the wheel must leave out), and its files are pinned: every file of
templates/ and every JSON of provingkey-sample/ byte for byte, LICENSE, the `exps-codegen` entry
point, the version. The unpacked wheel, outside the checkout, then finds its templates and sample
inside itself (`sample`, `emit`). Slow tier: a fresh venv outside the checkout, `pip install` of
the wheel, and the README's demo and a build of ../shared/pk/simple run with its `exps-codegen`.
"""
from __future__ import annotations

import configparser
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

import buildkit as bk
from require import PK

import codegen
from codegen import EMITTER_VERSION, resources

ROOT = Path(__file__).resolve().parent.parent
#: what the build reads: the package, its two data folders, and the metadata's files
INPUTS = ("pyproject.toml", "README.md", "LICENSE", "codegen", "templates", "provingkey-sample")
DIST_INFO = f"exps_codegen-{codegen.__version__}.dist-info"
#: the files a built wheel may never carry, planted in the copy it is built from
JUNK = ("provingkey-sample/" + bk.TINY + ".exps.so", "templates/gen_common.o",
        "templates/__pycache__/x.cpython-311.pyc", "codegen/__pycache__/cli.cpython-311.pyc")


def _env(tmp: Path, path_head: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("EXPS_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["EXPS_BUILD_ROOT"] = str(tmp / "builds")
    env["EXPS_CACHE_DIR"] = os.environ.get("EXPS_CACHE_DIR") or str(tmp / "cache")
    if path_head:
        env["PATH"] = f"{path_head}{os.pathsep}{env['PATH']}"
    return env


def _checkout_files() -> dict[str, bytes]:
    """wheel path -> bytes of every file the wheel must carry from the checkout's data folders."""
    out = {f"codegen/templates/{p.name}": p.read_bytes()
           for p in sorted((ROOT / "templates").iterdir()) if p.is_file()}   # all that templates_digest hashes
    sample = ROOT / "provingkey-sample"
    out["codegen/provingkey_sample/README.md"] = (sample / "README.md").read_bytes()
    for p in sorted(sample.rglob("*.json")):
        out[f"codegen/provingkey_sample/{p.relative_to(sample)}"] = p.read_bytes()
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    """(the wheel, the build's output) built from a copy of INPUTS with JUNK planted."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in INPUTS:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copyfile)(ROOT / name, src / name)
    for rel in JUNK:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(b"\x7fELF junk")
    have = importlib.metadata.version("setuptools")
    assert tuple(int(x) for x in have.split(".")[:2]) >= (77, 0), \
        f"setuptools {have}: the test extra needs >= 77 (pip install -e '.[test]')"
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                        "-v", "-w", str(tmp / "dist")], cwd=tmp, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    [whl] = (tmp / "dist").iterdir()
    return whl, p.stdout + p.stderr


def test_the_wheel_holds_exactly_the_package_and_its_data(wheel) -> None:
    whl, _ = wheel
    assert whl.name == f"exps_codegen-{codegen.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(whl) as z:
        names = set(z.namelist())
        data = _checkout_files()
        py = {str(p.relative_to(ROOT)) for p in (ROOT / "codegen").rglob("*.py") if "__pycache__" not in p.parts}
        meta = {f"{DIST_INFO}/{n}" for n in ("METADATA", "WHEEL", "entry_points.txt", "top_level.txt", "RECORD",
                                              "licenses/LICENSE")}
        assert names == py | set(data) | meta
        for name, want in data.items():
            assert z.read(name) == want, name
        assert len([n for n in data if n.startswith("codegen/templates/")]) == 8
        assert len([n for n in data if n.endswith(".json")]) == 12
        assert not [n for n in names if n.endswith((".so", ".o", ".pyc")) or "__pycache__" in n]
        assert z.read(f"{DIST_INFO}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        ep = configparser.ConfigParser()
        ep.read_string(z.read(f"{DIST_INFO}/entry_points.txt").decode())
        assert dict(ep["console_scripts"]) == {"exps-codegen": "codegen.cli:main"}
        head = z.read(f"{DIST_INFO}/METADATA").decode().split("\n\n", 1)[0].splitlines()
    assert "Version: 0.26.0" in head and codegen.__version__ == "0.26.0"
    assert "License-Expression: Apache-2.0" in head and "License-File: LICENSE" in head
    assert {x for x in head if x.startswith("Requires-Dist: ") and "extra ==" not in x} == {
        "Requires-Dist: doit>=0.36", "Requires-Dist: jinja2>=3.1", "Requires-Dist: numpy>=1.26"}


def test_the_build_warns_of_nothing(wheel) -> None:
    """setuptools takes the license metadata and the data packages without a warning (a license
    table, or data folders left to include-package-data, each print a ...Warning)."""
    _, out = wheel
    assert "Successfully built exps-codegen" in out or "Created wheel for exps-codegen" in out
    assert re.findall(r"\w*Warning\b.*", out) == []


def test_one_version() -> None:
    """pyproject takes the version from codegen.__version__, and `--version` gives both versions."""
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in proj["project"] and proj["project"]["dynamic"] == ["version"]
    assert proj["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "codegen.__version__"}
    p = subprocess.run([*bk.exps_codegen(), "--version"], capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout) == (0, f"exps-codegen {codegen.__version__} (emitter {EMITTER_VERSION})\n")


def test_a_checkout_uses_its_own_folders() -> None:
    assert resources.TEMPLATES == ROOT / "templates" and resources.SAMPLE == ROOT / "provingkey-sample"
    assert [str(p) for p in resources.sample_files()] == sorted(
        f"{rel}{s}" for rel in bk.ALL for s in (".expressionsinfo.json", ".starkinfo.json"))


def test_the_unpacked_wheel_finds_its_data_inside_itself(wheel, tmp_path: Path) -> None:
    """Outside the checkout, the wheel's code reads the wheel's templates and sample: `sample`
    writes the 12 JSON files of the checkout's sample, `emit` renders the sources of two of them
    (a wheel without them ends an installed emit in FileNotFoundError: site-packages/templates)."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel[0]) as z:
        z.extractall(site)
    env = _env(tmp_path) | {"PYTHONPATH": str(site)}

    def run(*args: str) -> subprocess.CompletedProcess:
        p = subprocess.run([sys.executable, "-m", "codegen.cli", *args], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0 and "Traceback" not in p.stdout + p.stderr, (args, p.stdout, p.stderr)
        return p

    where = subprocess.run([sys.executable, "-c", "import codegen.resources as r; print(r.TEMPLATES); print(r.SAMPLE)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert where.stdout.split() == [str(site / "codegen" / "templates"), str(site / "codegen" / "provingkey_sample")]
    assert run("sample", "key").stdout == ("sample provingKey (6 AIRs, 12 JSON files) in key; "
                                           "build it with: exps-codegen build key\n")
    got = {str(p.relative_to(tmp_path / "key")): p.read_bytes() for p in (tmp_path / "key").rglob("*") if p.is_file()}
    assert got == {n.removeprefix("codegen/provingkey_sample/"): b for n, b in _checkout_files().items()
                   if n.endswith(".json")}
    small = bk.copy_key(tmp_path / "small", (bk.TINY, bk.SHARED1))
    run("emit", str(small), "--chunk", "0")
    srcs = sorted((tmp_path / "builds").glob(f"small-*/{bk.TINY_KEY}/src/*"))
    assert [p.name for p in srcs if p.name in ("gen_common.cuh", "exps_abi.h", "exps_runtime.cpp")] == [
        "exps_abi.h", "exps_runtime.cpp", "gen_common.cuh"]
    for p in srcs:
        if p.name in ("gen_common.cuh", "exps_abi.h", "exps_runtime.cpp"):
            assert p.read_bytes() == (ROOT / "templates" / p.name).read_bytes()


# ---------------------------------------------------------------------- slow: a fresh venv
@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv outside the checkout with the wheel installed (its dependencies from the
    configured indexes); returns its bin/."""
    tmp = tmp_path_factory.mktemp("venv")
    venv.create(tmp / "v", with_pip=True)
    py = tmp / "v" / "bin" / "python"
    p = subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel[0])], cwd=tmp, env=_env(tmp),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    return tmp / "v" / "bin"


def _sh(cmd: str, cwd: Path, bindir: Path) -> str:
    p = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=_env(cwd, bindir), capture_output=True, text=True,
                       timeout=1800)
    assert p.returncode == 0, f"rc={p.returncode}: {cmd}\n{p.stdout}\n{p.stderr}"
    assert "Traceback" not in p.stdout + p.stderr, cmd
    return p.stdout


def _readme_install() -> list[str]:
    """The commands of README's install block after its `pip` lines, each `build` given --arch 90
    (no GPU here)."""
    [block] = re.findall(r"## Install\n.*?```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    cmds = [x.split("  #")[0].strip() for x in block.splitlines() if not x.startswith("pip ")]
    return [" && ".join(c + " --arch 90" if c.startswith("exps-codegen build ") else c for c in x.split(" && "))
            for x in cmds]


@pytest.mark.slow
@pytest.mark.requires("nvcc")
def test_installed_wheel_runs_the_readme_demo(installed: Path, tmp_path: Path) -> None:
    exe = installed / "exps-codegen"
    assert shutil.which("exps-codegen", path=str(installed)) == str(exe)
    out = _sh("exps-codegen --version", tmp_path, installed)
    assert out == f"exps-codegen {codegen.__version__} (emitter {EMITTER_VERSION})\n"
    demo = _readme_install()
    assert demo == ["exps-codegen sample ./sample-key && exps-codegen build ./sample-key --arch 90",
                    "exps-codegen status ./sample-key"]
    _sh(demo[0], tmp_path, installed)
    status = _sh(demo[1], tmp_path, installed)
    assert status.splitlines()[-1].startswith("5 current, 0 stale, 0 missing, 1 skipped  (build dir ")
    assert len(list((tmp_path / "sample-key").rglob("*.exps.so"))) == 5


@pytest.mark.slow
@pytest.mark.requires("nvcc", "pk")
def test_installed_wheel_builds_a_real_key(installed: Path, tmp_path: Path) -> None:
    key = tmp_path / "simple"
    shutil.copytree(PK / "simple" / "provingKey", key)
    _sh("exps-codegen emit ./simple", tmp_path, installed)
    _sh("exps-codegen build ./simple --arch 90", tmp_path, installed)
    status = _sh("exps-codegen status ./simple", tmp_path, installed)
    assert status.splitlines()[-1].startswith("2 current, 0 stale, 0 missing, 0 skipped  (build dir ")
    assert len(list(key.rglob("*.exps.so"))) == 2
