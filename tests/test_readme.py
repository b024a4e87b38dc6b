"""README holds no command that fails.

Every line of every ```bash block of README.md runs as a subprocess, in order, from a copy of the
checkout (tests/buildkit.copy_repo: dodo.py, codegen/, templates/, the sample's JSON; the tests
never write into the checkout), with a temporary build root (EXPS_BUILD_ROOT) and object cache,
and must exit 0. Substitutions: `<checkout>` is that copy, `/path/to/provingKey` a copy of two
sample AIRs; every `doit` without `arch=` gets `arch=90` (no GPU here). Not run: `pip install`
(what .ci/run does before the tests) and the test command itself (it is what runs this). The
default test also gives a bare `doit` the small key (`pk=`); the slow one builds the copy's whole
sample, as README says, and `status` then says every AIR of it is current (5) or skipped (1).
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

import buildkit as bk

README = bk.REPO / "README.md"


def bash_lines() -> list[str]:
    text = README.read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = []
    for b in blocks:
        for line in b.splitlines():
            cmd = line.split("  #")[0].strip()
            if cmd and not cmd.startswith("#"):
                lines.append(cmd)
    return lines


def test_readme_has_the_commands() -> None:
    """The blocks this test runs are the ones README shows (a test that cannot go vacuous)."""
    lines = bash_lines()
    assert lines[0].startswith("pip install -e '.[test]' && doit")
    assert lines[1] == "python3 -m pytest -q"
    assert sum("dodo.py" in x for x in lines) >= 3 and any("exps-codegen status" in x for x in lines)


def _commands(key: Path, whole_sample: bool, checkout: Path) -> list[str]:
    out = []
    for cmd in bash_lines():
        parts = [p.strip() for p in cmd.split("&&")]
        keep = []
        for p in parts:
            if p.startswith("pip install") or p.startswith("python3 -m pytest"):
                continue
            p = p.replace("<checkout>", str(checkout)).replace("/path/to/provingKey", str(key))
            if re.match(r"^doit\b", p):
                if "arch=" not in p:
                    p += " arch=90"
                if "pk=" not in p and not whole_sample:
                    p += f" pk={key}"
            keep.append(p)
        if keep:
            out.append(" && ".join(keep))
    return out


def _run_readme(tmp_path: Path, whole_sample: bool) -> tuple[list[str], Path, dict]:
    """The README's commands, run in a copy of the checkout: (the commands, the copy, their env)."""
    checkout = bk.copy_repo(tmp_path / "checkout")
    key = bk.copy_key(tmp_path / "provingKey", (bk.TINY, bk.SKIPPED))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPS_")}
    env["EXPS_BUILD_ROOT"] = str(tmp_path / "builds")
    env["EXPS_CACHE_DIR"] = str(tmp_path / "cache")
    ran = []
    for cmd in _commands(key, whole_sample, checkout):
        p = subprocess.run(["bash", "-c", cmd], cwd=checkout, env=env, capture_output=True,
                           text=True, timeout=1800)
        assert p.returncode == 0, f"README command failed (rc={p.returncode}): {cmd}\n{p.stdout}\n{p.stderr}"
        assert "Traceback" not in p.stdout + p.stderr, cmd
        ran.append(cmd)
    return ran, checkout, env


@pytest.mark.requires("nvcc")
def test_every_readme_command_succeeds(tmp_path: Path) -> None:
    ran, _, _ = _run_readme(tmp_path, whole_sample=False)
    # set-up doit, build, emit, status, clean: each ran
    assert len(ran) == 5, ran
    # the last command (clean) removed what the build placed
    assert not list((tmp_path / "provingKey").rglob("*.so"))


@pytest.mark.slow
@pytest.mark.requires("nvcc")
def test_every_readme_command_succeeds_on_the_whole_sample(tmp_path: Path) -> None:
    ran, checkout, env = _run_readme(tmp_path, whole_sample=True)
    assert len(ran) == 5, ran
    # the set-up `doit` built the copy's sample; the later commands left it current
    sample = checkout / "provingkey-sample"
    p = subprocess.run([*bk.exps_codegen(), "status", str(sample)], cwd=checkout, env=env,
                       capture_output=True, text=True, timeout=600)
    states = sorted(line.split()[1] for line in p.stdout.splitlines() if line.startswith("synth/"))
    assert p.returncode == 0 and states == ["current"] * 5 + ["skipped"], p.stdout + p.stderr
    assert bk.so_files(sample) == {bk.TINY, bk.MEDIUM, bk.LARGE, bk.SHARED1, bk.SHARED2}
