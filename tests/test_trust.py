"""No wrong, foreign or stale `.so` is ever placed or called current.

Through the real CLI and doit, on copies of the sample key:
- a JSON edited while a build runs, at random moments and at fixed stages: every `.so` that is
  placed and that `status` calls current is byte-identical to a clean build of the JSON on disk
  at the end; otherwise that AIR is stale or missing, never current; the next build makes it so;
- names that collide (a broken AIR whose path spells a valid AIR's kernel, an unsafe name, AIRs
  named like the build dir's own files, a base `.`): every valid AIR builds, no broken one gets a
  `.so`, the build never aborts;
- the bytes depend only on the inputs: a warm cache and a compiler launcher place the bytes of a
  cold build, and `verify --rebuild` says identical for each;
- an object that came through a poisoned launcher is never placed once the launcher is gone;
- special files placed as a `.so`, size fields that would allocate gigabytes, a build dir that
  overlaps the key, temp files of a killed build, `clean` under a waiting build, malformed knobs,
  names that would forge output lines.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import buildkit as bk
from buildkit import SHARED1, SHARED2, TINY, MEDIUM

pytestmark = pytest.mark.requires("nvcc")

RACE_AIRS = (TINY, SHARED1, SHARED2)
EDITED = TINY


# ------------------------------------------------------------------------------- helpers
def _env(root: Path, cache: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPS_")}
    env.update({"EXPS_CACHE_DIR": str(cache), "EXPS_BUILD_ROOT": str(root / "builds")})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _cli(*args, env: dict, timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
    p = subprocess.run([*bk.exps_codegen(), *map(str, args)], env=env, capture_output=True, text=True,
                       timeout=timeout, cwd=cwd)
    assert "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    return p


def _status(pk: Path, env: dict, *extra) -> dict[str, str]:
    p = _cli("status", pk, *extra, env=env, timeout=120)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    return {ln.split()[0]: ln.split()[1] for ln in p.stdout.splitlines()
            if ln.split() and ln.split()[0].startswith("synth/")}


def _sos(pk: Path, airs) -> dict[str, str | None]:
    """AIR -> sha256 of its placed `.so` (None: no `.so`)."""
    return {r: (hashlib.sha256(bk.so_path(pk, r).read_bytes()).hexdigest() if bk.so_path(pk, r).exists()
                else None) for r in airs}


def _versions() -> tuple[bytes, bytes]:
    """Two versions of the edited AIR's expressionsinfo: the sample's and one with a Q constant
    changed (another kernel, the same sym)."""
    tmp = bk.REPO / "provingkey-sample"
    a = (tmp / (EDITED + ".expressionsinfo.json")).read_bytes()
    ei = json.loads(a)
    si = json.loads((tmp / (EDITED + ".starkinfo.json")).read_bytes())
    q = next(e for e in ei["expressionsCode"] if e["expId"] == si["cExpId"])
    src = next(s for op in q["code"] for s in op["src"] if s["type"] == "number")
    src["value"] = str(int(src["value"]) + 1)
    return a, json.dumps(ei, separators=(",", ":")).encode()


@pytest.fixture(scope="module")
def refs(tmp_path_factory) -> dict[int, dict[str, str | None]]:
    """Clean cold builds (own caches, `--chunk 0`) of RACE_AIRS with the edited AIR at version 0
    and at version 1: the `.so` bytes a build of each must place."""
    out = {}
    for i, data in enumerate(_versions()):
        root = tmp_path_factory.mktemp(f"ref{i}")
        pk = bk.copy_key(root / "pk", RACE_AIRS)
        (pk / (EDITED + ".expressionsinfo.json")).write_bytes(data)
        env = _env(root, root / "cache")
        p = _cli("build", pk, "--arch", "90", "--chunk", "0", env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        out[i] = _sos(pk, RACE_AIRS)
        assert all(out[i].values())
    assert out[0][EDITED] != out[1][EDITED] and out[0][SHARED1] == out[1][SHARED1]
    return out


def _check_settled(pk: Path, env: dict, refs, version: int) -> dict[str, str]:
    """Every AIR `status` calls current holds the `.so` of a clean build of the JSON on disk (at
    `version`); every other one is stale or missing. Returns the states."""
    states = _status(pk, env)
    got = _sos(pk, RACE_AIRS)
    for r in RACE_AIRS:
        if states[r] == "current":
            assert got[r] == refs[version][r], f"{r} called current, but its .so is not the current JSON's"
        else:
            assert states[r] in ("stale", "missing"), states
    return states


# ------------------------------------------------------------------------------- 1. edits during a build
def _race(tmp_path: Path, refs, seed: int, swaps: int, in_place: bool, builds: int = 6) -> None:
    """`builds` builds of RACE_AIRS while the edited AIR's JSON is switched between its two
    versions: every other build under a switch every few milliseconds from start to end (a switch
    falls between discovery and `ir`'s read, or between that read and the task's end, in about
    half of them), the others at `swaps` random moments (half of them in the build's first fifth,
    where discovery and `ir` run). After each, `_check_settled`; at the end a quiet build makes
    every AIR current."""
    rng = random.Random(seed)
    vers = _versions()
    pk = bk.copy_key(tmp_path / "pk", RACE_AIRS)
    env = _env(tmp_path, tmp_path / "cache", EXPS_LINK_CACHE="0")
    target = pk / (EDITED + ".expressionsinfo.json")
    now = [0]

    def put(v: int) -> None:
        if in_place:                 # truncate and write: a reader may see a torn file
            with open(target, "r+b") as f:
                f.truncate(0)
                f.write(vers[v])
        else:                        # what editors and `cp` to a temp + rename do
            tmp = target.with_name(".swap.tmp")
            tmp.write_bytes(vers[v])
            os.replace(tmp, target)
        now[0] = v

    t0 = time.monotonic()
    p = _cli("build", pk, "--arch", "90", "--chunk", "0", env=env)   # warms the cache
    span = max(time.monotonic() - t0, 1.0)
    assert p.returncode == 0, p.stdout + p.stderr
    for it in range(builds):
        proc = subprocess.Popen([*bk.exps_codegen(), "build", str(pk), "--arch", "90", "--chunk", "0"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if it % 2 == 0:
            at = []
            while not at or at[-1] < 2 * span:
                at.append((at[-1] if at else 0.0) + rng.uniform(0.002, 0.03))
        else:
            at = sorted(rng.uniform(0, span * (0.2 if rng.random() < 0.5 else 1.0)) for _ in range(swaps))
        start = time.monotonic()
        for t in at:
            time.sleep(max(0.0, t - (time.monotonic() - start)))
            if proc.poll() is not None:
                break
            put(1 - now[0])
        out, err = proc.communicate(timeout=600)
        assert "Traceback" not in out + err, out + err
        assert proc.returncode in (0, 1), out + err
        if proc.returncode == 1:      # the build saw an AIR change under it (or read it torn), and said so
            assert "changed while the build ran" in out or "bad input" in out, out + err
        _check_settled(pk, env, refs, now[0])
    # the next build, with nothing moving, makes every AIR current: the .so of the JSON on disk
    p = _cli("build", pk, "--arch", "90", "--chunk", "0", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    states = _check_settled(pk, env, refs, now[0])
    assert set(states.values()) == {"current"}, states


@pytest.mark.parametrize("in_place", [False, True], ids=["renamed", "rewritten in place"])
def test_json_switched_at_random_moments_of_builds(tmp_path, refs, in_place) -> None:
    _race(tmp_path, refs, seed=7 + in_place, swaps=3, in_place=in_place)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_json_switched_at_random_moments_of_builds_many_times(tmp_path, refs, seed) -> None:
    _race(tmp_path, refs, seed=100 + seed, swaps=1 + seed % 4, in_place=bool(seed % 2), builds=12)


SWAP_LAUNCHER = """#!/bin/sh
# a compiler launcher that switches the AIR's JSON the first time a {kind} of ours runs
case " $* " in *" -shared "*) kind=link ;; *) kind=cc ;; esac
if [ "$kind" = {kind} ] && [ ! -e {done} ]; then cp {new} {target}; touch {done}; fi
exec "$@"
"""


@pytest.mark.parametrize("stage", ["cc", "link"])
def test_json_switched_while_a_stage_runs(tmp_path, refs, stage) -> None:
    """The JSON is switched after `ir` read it, while a compile (or the link) runs: the build
    places no `.so` of the old JSON under the new one's name (the old bug: status said current,
    every later build up to date); it exits 1 saying so, and the next build places the new one."""
    vers = _versions()
    pk = bk.copy_key(tmp_path / "pk", RACE_AIRS)
    target = pk / (EDITED + ".expressionsinfo.json")
    (tmp_path / "new.json").write_bytes(vers[1])
    launcher = tmp_path / "swap.sh"
    launcher.write_text(SWAP_LAUNCHER.format(kind=stage, done=tmp_path / "done", new=tmp_path / "new.json",
                                             target=target))
    launcher.chmod(0o755)
    env = _env(tmp_path, tmp_path / "cache", EXPS_LINK_CACHE="0")
    p = _cli("build", pk, "--arch", "90", "--chunk", "0", "--launcher", launcher, env=env)
    assert (tmp_path / "done").exists() and target.read_bytes() == vers[1]
    assert p.returncode == 1, p.stdout + p.stderr
    assert re.search(rf"^STALE {re.escape(EDITED)}: .*removed", p.stdout, re.M), p.stdout
    assert "changed while the build ran" in p.stdout
    states = _check_settled(pk, env, refs, 1)
    assert states[EDITED] == "missing" and not bk.so_path(pk, EDITED).exists()
    assert states[SHARED1] == states[SHARED2] == "current"
    p = _cli("build", pk, "--arch", "90", "--chunk", "0", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert set(_check_settled(pk, env, refs, 1).values()) == {"current"}


def test_status_compares_the_bytes_on_disk_with_the_placed_identity(tmp_path, refs) -> None:
    """An edit after the build: status says stale at once (not `current` until the next build);
    the edit undone, current again, with no build in between."""
    vers = _versions()
    pk = bk.copy_key(tmp_path / "pk", RACE_AIRS)
    env = _env(tmp_path, tmp_path / "cache")
    assert _cli("build", pk, "--arch", "90", "--chunk", "0", env=env).returncode == 0
    target = pk / (EDITED + ".expressionsinfo.json")
    target.write_bytes(vers[1])
    assert _status(pk, env)[EDITED] == "stale"
    target.write_bytes(vers[0])
    assert _status(pk, env)[EDITED] == "current"


# ------------------------------------------------------------------------------- 2. names that collide
def _air(pk: Path, rel: str, src: str = TINY, si: bytes | None = None, ei: bytes | None = None) -> None:
    d = (pk / rel).parent
    d.mkdir(parents=True, exist_ok=True)
    base = Path(rel).name
    (d / (base + ".starkinfo.json")).write_bytes(si if si is not None else
                                                  (bk.SAMPLE / (src + ".starkinfo.json")).read_bytes())
    (d / (base + ".expressionsinfo.json")).write_bytes(ei if ei is not None else
                                                       (bk.SAMPLE / (src + ".expressionsinfo.json")).read_bytes())


def _build(pk: Path, tmp_path: Path, *extra, tool: str = "cli") -> subprocess.CompletedProcess:
    env = _env(tmp_path, tmp_path / "cache")
    if tool == "doit":
        p = subprocess.run([sys.executable, "-m", "doit", "-f", str(bk.DODO), "-d", str(tmp_path),
                            f"pk={pk}", "arch=90", "chunk=0"], env=env, capture_output=True, text=True,
                           timeout=600)
        assert "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
        return p
    return _cli("build", pk, "--arch", "90", "--chunk", "0", *extra, env=env)


@pytest.mark.parametrize("good", ["a/air/Tiny", "t/air/Tiny"], ids=["good first", "broken first"])
@pytest.mark.parametrize("tool", ["cli", "doit"])
def test_a_broken_air_whose_path_spells_a_valid_kernel(tmp_path, good, tool) -> None:
    """`basic/a0_0_b4_e50` (broken JSON) spells Tiny's kernel `basic_a0_0_b4_e50`: Tiny builds and
    is current, whichever comes first; the broken AIR is bad input and gets no `.so`."""
    pk = tmp_path / "pk"
    _air(pk, good)
    _air(pk, "basic/a0_0_b4_e50", si=b"{not json")
    (pk / "basic" / "a0_0_b4_e50.exps.so").write_bytes(b"a stale library")    # must go
    p = _build(pk, tmp_path, tool=tool)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    assert bk.so_path(pk, good).is_file() and not (pk / "basic" / "a0_0_b4_e50.exps.so").exists()
    env = _env(tmp_path, tmp_path / "cache")
    st = _cli("status", pk, env=env).stdout
    assert re.search(rf"^{good}\s+current", st, re.M) and re.search(r"^basic/a0_0_b4_e50\s+bad input\s+.*invalid JSON",
                                                                     st, re.M), st


def test_an_unsafe_name_that_spells_a_valid_kernel_gets_no_so(tmp_path) -> None:
    """`basic/a0_0_b4 e50` (a valid copy of Tiny under an unsafe name) is refused as bad input and
    gets no `.so`; Tiny, whose kernel its path spells, builds."""
    pk = tmp_path / "pk"
    _air(pk, "t/air/Tiny")
    _air(pk, "basic/a0_0_b4 e50")
    p = _build(pk, tmp_path)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    assert bk.so_path(pk, "t/air/Tiny").is_file()
    assert not (pk / "basic" / "a0_0_b4 e50.exps.so").exists()
    assert "is not a safe name" in p.stdout


@pytest.mark.parametrize("tool", ["cli", "doit"])
def test_airs_named_like_the_build_dirs_own_files(tmp_path, tool) -> None:
    """AIRs named `link`, `ir`, `report`, `.lock`-like and a broken `link` beside a valid `ir` at the
    key's root: no two tasks share a target, nothing aborts, every valid AIR builds; after an edit
    of one of them, its new `.so` is placed."""
    pk = tmp_path / "pk"
    _air(pk, "ir", src=TINY)
    _air(pk, "report", src=SHARED1)
    _air(pk, "link", si=b"[]")               # broken: its key never names the build dir's link/
    _air(pk, "d/air/d", src=TINY)            # an AIR named like its dir
    p = _build(pk, tmp_path, tool=tool)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    assert "exit 3" not in p.stdout + p.stderr
    for rel in ("ir", "report", "d/air/d"):
        assert bk.so_path(pk, rel).is_file(), (rel, p.stdout, p.stderr)
    assert not bk.so_path(pk, "link").exists()
    bk.bump_q_number(pk, "ir")
    p = _build(pk, tmp_path, tool=tool)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    env = _env(tmp_path, tmp_path / "cache")
    st = _cli("status", pk, env=env).stdout
    assert re.search(r"^ir\s+current", st, re.M) and re.search(r"^report\s+current", st, re.M), st


def test_a_base_name_of_dots_is_refused_the_others_build(tmp_path) -> None:
    """`d/..starkinfo.json` (base `.`, which a path join makes `d`) beside an AIR named `d`: the dot
    is an unsafe name and gets no `.so`; `d` builds and is current."""
    pk = tmp_path / "pk"
    _air(pk, "d", src=TINY)
    (pk / "d").mkdir()
    _air(pk, "d/.", src=SHARED1)
    _air(pk, "d/..", src=SHARED1)
    p = _build(pk, tmp_path)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    assert bk.so_path(pk, "d").is_file()
    assert not (pk / "d" / "..exps.so").exists() and not (pk / "d" / "...exps.so").exists()


# ------------------------------------------------------------------------------- 3. bytes from inputs only
def _ccache_env(tmp_path: Path) -> dict:
    return {"CCACHE_DIR": tmp_path / "ccache", "CCACHE_SLOPPINESS": "include_file_mtime,include_file_ctime",
            "CCACHE_NOHASHDIR": "1", "CCACHE_BASEDIR": "/"}


def _same_bytes_whatever_the_cache(tmp_path: Path, airs) -> None:
    cold = bk.copy_key(tmp_path / "cold", airs)
    env = _env(tmp_path, tmp_path / "cache")
    assert _cli("build", cold, "--arch", "90", env=env).returncode == 0     # autotuned: twins
    want = _sos(cold, airs)
    assert [r for r, b in want.items() if b is None] == [r for r in airs if r == bk.SKIPPED]
    bounded = [k for k in {bk.KEY_OF[r] for r in airs if r in bk.KEY_OF}
               if (j := _objs(tmp_path, cold, k)) and j.get("bounded")]
    assert bounded, "the key needs an AIR whose Q runs bounded twins"
    # warm: the cache the cold build filled, another build dir and key dir
    warm = bk.copy_key(tmp_path / "warm", airs)
    assert _cli("build", warm, "--arch", "90", env=env).returncode == 0
    # through ccache, a private object cache: cold, then warm from ccache's store alone
    runs = {"warm": warm}
    for name in ("ccache-cold", "ccache-warm"):
        pk = bk.copy_key(tmp_path / name, airs)
        e = _env(tmp_path, tmp_path / f"cache-{name}", **_ccache_env(tmp_path))
        p = _cli("build", pk, "--arch", "90", "--launcher", "ccache", env=e)
        assert p.returncode == 0, p.stdout + p.stderr
        runs[name] = pk
    for name, pk in runs.items():
        assert _sos(pk, airs) == want, f"the {name} build placed other bytes"
    for pk in (cold, *runs.values()):
        p = _cli("verify", pk, "--rebuild", "--arch", "90", env=env)
        assert p.returncode == 0 and "DIFFERS" not in p.stdout, p.stdout + p.stderr
        assert p.stdout.count("identical (sha256") == len([b for b in want.values() if b]), p.stdout


def _objs(tmp_path: Path, pk: Path, key: str) -> dict | None:
    from codegen.tasks import default_build_dir
    env = {"EXPS_BUILD_ROOT": str(tmp_path / "builds")}
    from codegen.build import knobs
    with knobs.overridden(**env):
        b = default_build_dir(pk.resolve())
    f = b / key / "objs.json"
    return json.loads(f.read_text()) if f.exists() else None


@pytest.mark.requires("ccache")
def test_warm_cache_and_launcher_builds_place_the_cold_builds_bytes(tmp_path) -> None:
    _same_bytes_whatever_the_cache(tmp_path, (TINY, MEDIUM, bk.SKIPPED, SHARED1, SHARED2))


@pytest.mark.slow
@pytest.mark.requires("ccache")
def test_warm_cache_and_launcher_builds_place_the_cold_builds_bytes_whole_sample(tmp_path) -> None:
    _same_bytes_whatever_the_cache(tmp_path, bk.ALL)


POISON = b"POISONED-OBJECT"
POISON_LAUNCHER = """#!/bin/sh
# a launcher whose store was poisoned: every device object it hands back carries foreign bytes
"$@" || exit $?
out=; prev=; fat=; for a in "$@"; do [ "$prev" = -o ] && out=$a; [ "$a" = -fatbin ] && fat=1; prev=$a; done
[ -n "$fat" ] && printf '%s' {poison} >> "$out"
exit 0
"""


def test_a_poisoned_object_is_never_placed_after_its_launcher_is_gone(tmp_path, refs) -> None:
    """Objects made through a launcher are keyed by it: with the (poisoned) launcher unset and the
    key cleaned, the next build compiles afresh and places a clean build's bytes."""
    pk = bk.copy_key(tmp_path / "pk", RACE_AIRS)
    launcher = tmp_path / "ccache-poisoned.sh"
    launcher.write_text(POISON_LAUNCHER.format(poison=POISON.decode()))
    launcher.chmod(0o755)
    env = _env(tmp_path, tmp_path / "cache")
    p = _cli("build", pk, "--arch", "90", "--chunk", "0", "--launcher", launcher, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert POISON in bk.so_path(pk, EDITED).read_bytes()     # what a poisoned store does
    assert _cli("clean", pk, env=env).returncode == 0
    p = _cli("build", pk, "--arch", "90", "--chunk", "0", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert all(POISON not in bk.so_path(pk, r).read_bytes() for r in RACE_AIRS)
    assert _sos(pk, RACE_AIRS) == refs[0]


# ------------------------------------------------------------------------------- 5. the smaller items
@pytest.mark.parametrize("kind", ["fifo", "dev-zero link", "directory"])
def test_a_special_file_placed_as_the_so(tmp_path, kind) -> None:
    """A FIFO, a link to /dev/zero or a directory where `<base>.exps.so` goes: status and
    `verify --rebuild` answer at once (never read it), call it stale / DIFFERS; a build replaces
    the FIFO and the link with the real `.so`."""
    pk = bk.copy_key(tmp_path / "pk", (TINY,))
    env = _env(tmp_path, tmp_path / "cache")
    assert _cli("build", pk, "--arch", "90", "--chunk", "0", env=env).returncode == 0
    so = bk.so_path(pk, TINY)
    so.unlink()
    {"fifo": lambda: os.mkfifo(so), "dev-zero link": lambda: so.symlink_to("/dev/zero"),
     "directory": lambda: so.mkdir()}[kind]()
    p = _cli("status", pk, env=env, timeout=60)
    assert p.returncode == 1 and re.search(rf"^{TINY}\s+stale\s+its \.so is ", p.stdout, re.M), p.stdout
    p = _cli("verify", pk, "--rebuild", "--arch", "90", "--chunk", "0", env=env, timeout=300)
    assert p.returncode == 1 and re.search(rf"^{TINY}\s+DIFFERS: the placed \.so is ", p.stdout, re.M), p.stdout
    if kind != "directory":
        p = _cli("build", pk, "--arch", "90", "--chunk", "0", env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        assert so.is_file() and not so.is_symlink()
        assert _status(pk, env)[TINY] == "current"


@pytest.mark.parametrize("field, value", [("nPublics", 2147483648), ("nConstants", 1 << 31),
                                          ("mapSectionsN.cm1", 1 << 31)])
def test_a_size_field_that_would_allocate_gigabytes(tmp_path, field, value) -> None:
    """A 2 KB starkinfo asking for 2^31 words: bad input naming the field (no allocation), in a
    build and in `verify`, within seconds."""
    pk = bk.copy_key(tmp_path / "pk", (TINY,))
    si_path = pk / (TINY + ".starkinfo.json")
    si = json.loads(si_path.read_text())
    if "." in field:
        a, b = field.split(".")
        si[a][b] = value
    else:
        si[field] = value
    si_path.write_text(json.dumps(si))
    env = _env(tmp_path, tmp_path / "cache")
    p = _cli("verify", pk, "--arch", "90", env=env, timeout=120)
    assert f"{field}: integer {value} out of range" in p.stdout, p.stdout + p.stderr
    p = _cli("build", pk, "--arch", "90", "--chunk", "0", env=env, timeout=300)
    assert f"{field}: integer {value} out of range" in p.stdout and not bk.so_path(pk, TINY).exists()


@pytest.mark.parametrize("where", ["the key", "inside the key", "above the key"])
@pytest.mark.parametrize("cmd", ["build", "clean", "status", "doit"])
def test_a_build_dir_that_overlaps_the_key_is_refused(tmp_path, where, cmd) -> None:
    """`--build-dir` (or `build=`) equal to the key dir, inside it or holding it: one line, exit 2,
    nothing created, and `clean` never deletes the key."""
    pk = bk.copy_key(tmp_path / "top" / "pk", (TINY,))
    build = {"the key": pk, "inside the key": pk / "build", "above the key": tmp_path / "top"}[where]
    before = sorted(p for p in (tmp_path / "top").rglob("*"))
    env = _env(tmp_path, tmp_path / "cache")
    if cmd == "doit":
        p = subprocess.run([sys.executable, "-m", "doit", "-f", str(bk.DODO), "-d", str(tmp_path),
                            f"pk={pk}", f"build={build}", "arch=90"], env=env, capture_output=True,
                           text=True, timeout=120)
    else:
        p = _cli(cmd, pk, *(["--arch", "90"] if cmd == "build" else []), "--build-dir", build, env=env, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and re.match(r"exps-codegen: error: build dir .* (is the provingKey|is inside the "
                                        r"provingKey|holds the provingKey)", lines[0]), p.stderr
    assert sorted(p for p in (tmp_path / "top").rglob("*")) == before


def test_temp_files_of_a_killed_build_are_removed_by_the_next(tmp_path) -> None:
    """`.<base>.exps.so.<pid>.<hex>.tmp` left by a build killed while it wrote the `.so` (its link
    reruns: the stamp went first) is removed; a live writer's is not."""
    pk = bk.copy_key(tmp_path / "pk", (TINY,))
    env = _env(tmp_path, tmp_path / "cache")
    assert _cli("build", pk, "--arch", "90", "--chunk", "0", env=env).returncode == 0
    so = bk.so_path(pk, TINY)
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = so.with_name(f".{so.name}.{dead.pid}.0123456789ab.tmp")
    live = so.with_name(f".{so.name}.{os.getpid()}.ba9876543210.tmp")
    other = so.with_name(f".Other.exps.so.{dead.pid}.0123456789ab.tmp")
    for f in (stale, live, other):
        f.write_bytes(b"half a library")
    so.unlink()      # as after a kill in the link: it reruns
    p = _cli("build", pk, "--arch", "90", "--chunk", "0", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not stale.exists() and live.exists() and other.exists() and so.is_file()
    assert f"removed {stale}" in p.stderr


def test_clean_while_a_build_waits_on_the_lock(tmp_path) -> None:
    """A build holds the lock, a second waits, `clean` runs: whichever takes the lock first, the
    waiting build ends in 0 with no traceback, though `clean` removed `.lock`."""
    pk = bk.copy_key(tmp_path / "pk", (TINY,))
    env = _env(tmp_path, tmp_path / "cache")
    marker, log = tmp_path / "hold", tmp_path / "nvcc.log"
    holder = bk.write_launcher(tmp_path / "hold.sh", log, fault="hold", kind="link", marker=marker)
    first = subprocess.Popen([*bk.exps_codegen(), "build", str(pk), "--arch", "90", "--chunk", "0",
                              "--launcher", holder], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    deadline = time.monotonic() + 300
    while not list(tmp_path.glob("hold.[0-9]*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(tmp_path.glob("hold.[0-9]*")), "the first build never reached its link"
    second = subprocess.Popen([*bk.exps_codegen(), "build", str(pk), "--arch", "90", "--chunk", "0"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cleaner = subprocess.Popen([*bk.exps_codegen(), "clean", str(pk)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    (tmp_path / "hold.go").write_text("")
    outs = [p.communicate(timeout=600) for p in (first, second, cleaner)]
    for p, (out, err) in zip((first, second, cleaner), outs):
        assert p.returncode == 0 and "Traceback" not in out + err, out + err
    assert "waiting for the build" in outs[1][1]


@pytest.mark.parametrize("knob, value", [("EXPS_CACHE_MAX_BYTES", "abc"), ("EXPS_HEARTBEAT_S", "abc"),
                                         ("EXPS_LAUNCHER", "'x")])
@pytest.mark.parametrize("front", ["cli", "doit"])
def test_a_malformed_knob_is_one_line(tmp_path, knob, value, front) -> None:
    pk = bk.copy_key(tmp_path / "pk", (TINY,))
    env = _env(tmp_path, tmp_path / "cache", **{knob: value})
    if front == "doit":
        p = subprocess.run([sys.executable, "-m", "doit", "-f", str(bk.DODO), "-d", str(tmp_path), f"pk={pk}",
                            "arch=90"], env=env, capture_output=True, text=True, timeout=120)
    else:
        p = _cli("build", pk, "--arch", "90", env=env, timeout=120)
    lines = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"exps-codegen: error: {knob}="), lines
    assert not (tmp_path / "builds").exists()


def test_names_that_would_forge_lines_are_escaped(tmp_path) -> None:
    """An AIR dir whose name holds a newline and ANSI escapes: the progress lines, the summary and
    status print it escaped, one line per AIR (no raw control character reaches the terminal)."""
    pk = tmp_path / "pk"
    rel = "evil\ncurrent\x1b[2K\x1b[31m/air/Tiny"
    _air(pk, rel)
    env = _env(tmp_path, tmp_path / "cache")
    p = _cli("build", pk, "--arch", "90", "--chunk", "0", env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    st = _cli("status", pk, env=env)
    shown = "evil\\ncurrent\\x1b[2K\\x1b[31m/air/Tiny"
    for out in (p.stdout, p.stderr, st.stdout):
        assert "\x1b" not in out and "\ncurrent" not in out, out
    assert shown in p.stdout and re.search(rf"^{re.escape(shown)}\s+current", st.stdout, re.M), st.stdout
    assert bk.so_path(pk, rel).is_file()


def test_a_waiting_build_takes_the_lock_after_clean_removed_the_build_dir(tmp_path) -> None:
    """The deterministic form of the case above: the lock's holder removes the whole build dir
    (as `clean` does) while another waits on it; the waiter then takes the lock of a new build dir
    instead of failing on the vanished `.lock`."""
    import io

    from codegen.build import buildlock
    d = tmp_path / "build"
    d.mkdir()
    go = tmp_path / "go"
    holder = subprocess.Popen([sys.executable, "-c", f"""
import os, shutil, sys, time
from pathlib import Path
from codegen.build import buildlock
buildlock.acquire({str(d)!r})
print("held", flush=True)
while not os.path.exists({str(go)!r}):
    time.sleep(0.02)
shutil.rmtree({str(d)!r})
"""], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(bk.REPO)})
    assert holder.stdout.readline().strip() == "held"
    out, err = io.StringIO(), []

    def wait() -> None:
        try:
            buildlock.acquire(d, wait=True, out=out)
        except BaseException as e:   # noqa: BLE001 — the test reports it
            err.append(e)
    t = threading.Thread(target=wait)
    t.start()
    deadline = time.monotonic() + 30
    while "waiting for the build" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "waiting for the build" in out.getvalue()
    go.write_text("")
    assert holder.wait(timeout=30) == 0
    t.join(timeout=30)
    try:
        assert not t.is_alive() and err == [], err
        assert (d / ".lock").read_text().split() == [str(os.getpid())]
    finally:
        buildlock.release(d)


def test_broken_airs_under_names_that_would_forge_lines_are_escaped(tmp_path) -> None:
    """A broken AIR and a good one under dirs whose names hold a newline and ANSI escapes: the
    FAILED and ERROR lines of the build (cli and doit), the compile's and link's own lines and
    `clean` print them escaped: no raw control character reaches the terminal, no forged line."""
    pk = tmp_path / "pk"
    evil = "evil\nFAKE: all AIRs placed\x1b[2K"
    _air(pk, f"{evil}/air/Tiny")
    _air(pk, f"{evil}/air/Broken", si=b"{not json")
    env = _env(tmp_path, tmp_path / "cache")
    runs = [_cli("build", pk, "--arch", "90", "--chunk", "0", "-v", env=env)]
    bk.bump_q_number(pk, f"{evil}/air/Tiny")
    runs.append(_build(pk, tmp_path, tool="doit"))
    runs.append(_cli("clean", pk, env=env))
    for p in runs:
        out = p.stdout + p.stderr
        assert "\x1b" not in out and not re.search(r"^FAKE", out, re.M), out
    assert runs[0].returncode == 1 and "evil\\nFAKE: all AIRs placed\\x1b[2K/air/Broken" in runs[0].stdout
    assert "removed " in runs[2].stdout and "evil\\nFAKE" in runs[2].stdout, runs[2].stdout


def test_refused_airs_whose_names_print_alike_are_two_tasks(tmp_path) -> None:
    """Two refused AIRs (no expressionsinfo) under dirs `x<newline>y` and `x\\ny` (a backslash),
    whose escaped names are one text: each is its own task (named from its real path), so the
    build does not abort; both are bad input (exit 1) and the good AIR beside them is placed."""
    pk = tmp_path / "pk"
    _air(pk, "t/air/Tiny")
    for d in ("x\ny", "x\\ny"):
        (pk / d).mkdir(parents=True)
        (pk / d / "A.starkinfo.json").write_bytes((bk.SAMPLE / (TINY + ".starkinfo.json")).read_bytes())
    from codegen.tasks import Settings, exps_tasks
    names = [f"{t['basename']}:{t['name']}" for t in exps_tasks(Settings(pk=pk, build=tmp_path / "b", arch="90"))
             if t.get("name")]
    assert len(names) == len(set(names)) and sum(n.startswith("exps-gone:refused-") for n in names) == 2, names
    for tool in ("cli", "doit"):
        p = _build(pk, tmp_path, tool=tool)
        out = p.stdout + p.stderr
        assert p.returncode == 1 and "duplicated" not in out, out
        assert bk.so_path(pk, "t/air/Tiny").is_file()
        assert out.count("unreadable: expressionsinfo is missing") >= 2, out


@pytest.mark.parametrize("value", [" ", ""])
def test_a_blank_launcher_is_no_launcher(tmp_path, value) -> None:
    """EXPS_LAUNCHER / --launcher / launcher= of blanks only: no launcher, as unset (never an
    IndexError traceback)."""
    from codegen.tasks import Settings
    assert Settings(pk=tmp_path / "k", build=tmp_path / "b", launcher=value).launcher_argv() is None
    pk = bk.copy_key(tmp_path / "pk", (TINY,))
    p = _cli("build", pk, "--arch", "90", env=_env(tmp_path, tmp_path / "cache", EXPS_LAUNCHER=value))
    assert p.returncode == 0 and bk.so_path(pk, TINY).is_file(), p.stdout + p.stderr
    p = _cli("build", pk, "--arch", "90", "--launcher", value, env=_env(tmp_path, tmp_path / "cache"))
    assert p.returncode == 0 and "up to date" in p.stdout, p.stdout + p.stderr


# ------------------------------------------------------------------------------- the end-of-build check
def _built_tiny(tmp_path: Path):
    from codegen.tasks import Settings
    pk = bk.copy_key(tmp_path / "pk", (TINY, SHARED1))
    build = tmp_path / "b"
    p = _cli("build", pk, "--arch", "90", "--build-dir", build, env=_env(tmp_path, tmp_path / "cache"))
    assert p.returncode == 0, p.stdout + p.stderr
    return pk, Settings(pk=pk, build=build, arch="90")


def test_settle_removes_the_so_of_an_air_whose_files_broke_during_the_build(tmp_path) -> None:
    """An AIR whose expressionsinfo vanished after the graph was made (its `gone` task was never
    made): the end-of-build check removes its `.so` and names it; the other AIR stays."""
    from codegen.build.settle import settle
    pk, s = _built_tiny(tmp_path)
    (pk / (TINY + ".expressionsinfo.json")).unlink()
    [(air, why)] = settle(s)
    assert air == TINY and "expressionsinfo is missing" in why and "removed" in why, why
    assert not bk.so_path(pk, TINY).exists() and bk.so_path(pk, SHARED1).is_file()
    assert settle(s) == []


def test_an_embedded_build_ends_with_the_check(tmp_path) -> None:
    """A pipeline's dodo.py that embeds the tasks (`yield from exps_tasks(...)`, doit's own
    reporter): its group task `exps` ends with `exps:check`, the end-of-build check after every
    link, so an `.so` that is not of the files on disk is removed and the task fails saying so."""
    from codegen.tasks import exps_tasks
    import codegen.tasks as tasks
    pk, s = _built_tiny(tmp_path)
    [check] = [t for t in exps_tasks(s) if t["basename"] == "exps" and t["name"] == "check"]
    assert check["task_dep"] == ["exps-link", "exps-gone"] and check["actions"] == [(tasks._settle_action, [s])]
    assert [t["name"] for t in exps_tasks(s, emit_only=True) if t["basename"] == "exps"] == [None]
    assert tasks._settle_action(s) is True and bk.so_path(pk, TINY).is_file()
    bk.bump_q_number(pk, TINY)             # as if edited after its ir task read it
    assert tasks._settle_action(s) is False
    assert not bk.so_path(pk, TINY).exists() and bk.so_path(pk, SHARED1).is_file()
    dodo = tmp_path / "pipeline" / "dodo.py"
    dodo.parent.mkdir()
    dodo.write_text("from codegen.tasks import Settings, exps_tasks\n\n"
                    "def task_exps():\n"
                    f"    yield from exps_tasks(Settings(pk={str(pk)!r}, build={str(s.build)!r}, arch='90'))\n")
    env = _env(tmp_path, tmp_path / "cache", PYTHONPATH=str(bk.REPO))
    p = subprocess.run([sys.executable, "-m", "doit", "-f", str(dodo), "exps"], env=env, capture_output=True,
                       text=True, timeout=600, cwd=dodo.parent)
    assert p.returncode == 0 and p.stdout.endswith(".  exps:check\n"), p.stdout + p.stderr
    assert bk.so_path(pk, TINY).is_file()
    st = _cli("status", pk, "--build-dir", s.build, env=env)
    assert st.returncode == 0, st.stdout


def test_a_stale_row_fails_the_build(tmp_path, monkeypatch) -> None:
    """A row the summary calls stale (an AIR whose files changed after its ir task read them,
    e.g. one skipped by the cap, which has no `.so` to remove) fails the run with one ERROR line,
    as a `.so` the check removed does."""
    import io

    from codegen.build import reporter
    from codegen.tasks import Settings
    monkeypatch.setattr(reporter, "settle", lambda s, sc=None: [])
    monkeypatch.setattr(reporter, "summary_rows", lambda *a, **k: [{"air": "a/air/A", "result": "stale"},
                                                                 {"air": "b/air/B", "result": "placed"}])
    out = io.StringIO()
    rep = reporter.ProgressReporter(out, {})
    rep.settings, rep.show_summary = Settings(pk=tmp_path / "k", build=tmp_path / "b"), False
    rep.failed, rep.seconds = {}, {}        # what `initialize` sets up for a run
    with pytest.raises(SystemExit) as e:
        rep.complete_run()
    assert e.value.code == 1
    assert out.getvalue() == ("ERROR: 1 AIR(s) changed while the build ran and have no .so of their files "
                              "on disk: rerun the build\n"), out.getvalue()
    monkeypatch.setattr(reporter, "summary_rows", lambda *a, **k: [{"air": "b/air/B", "result": "placed"}])
    out.truncate(0)
    rep.complete_run()
    assert out.getvalue() == ""
