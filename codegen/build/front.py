"""What both front ends share: `doit` with our dodo.py, and `exps-codegen` (cli.py).

- :func:`dodo_settings` reads the doit variables (unknown ones are a mistake), checks the
  provingKey, the toolchain and the build dir (preflight.py) *before* anything is created,
  installs the interrupt handlers (procs.py) and takes the build lock.
- :func:`doit_config` is the DOIT_CONFIG of a build.
- :func:`clean_build` removes the `.so` files a build placed and its build dir, saying what.
- :func:`setup_logging`: both front ends print the same lines (warnings and errors; the
  routine details, such as each autotune probe, in the report and with `-v`: `exps-codegen build -v`).
"""
from __future__ import annotations

import atexit
import logging
import shutil
import sys
from pathlib import Path

from codegen.build import actions
from codegen.build import knobs
from codegen.build import preflight
from codegen.build import procs
from codegen.build import statedb
from codegen.discover import shown
from codegen.emit import read_so_identity
from codegen.build.reporter import ProgressReporter
from codegen.tasks import Settings, lock_build, unlock_build

#: doit variables of our dodo.py (README "Usage in a provingKey pipeline")
DOIT_VARS = ("pk", "build", "arch", "cap", "chunk", "chunk_bounds", "launcher", "compile_timeout",
             "allow_bad_input")


def setup_logging(verbose: bool = False) -> None:
    """`LEVEL: message` on stderr, warnings and errors (with `verbose`: every detail)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format="%(levelname)s: %(message)s")
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
#: doit commands that never build: no toolchain check, no lock (clean takes it itself)
NO_BUILD = {"list", "help", "info", "forget", "ignore", "dumpdb", "strace", "tabcompletion",
            "reset-dep", "clean"}
#: task basenames that need no nvcc (emit without a chunk estimates the chunking)
NO_NVCC_TARGETS = {"ir", "tune", "emit"}


def doit_words(argv: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(variables, positional words) of a doit command line, as doit reads them."""
    out_vars, words = [], []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a.startswith("-"):
            # options of doit that take a separate value
            skip = a in ("-f", "--file", "-d", "--dir", "-n", "--process", "-P", "--parallel-type",
                         "-r", "--reporter", "-o", "--output-file", "--db-file", "--backend",
                         "--check_file_uptodate", "--codec-cls", "-k", "--seek-file")
            skip = skip and "=" not in a
            continue
        if "=" in a:
            k, v = a.split("=", 1)
            out_vars.append((k, v))
        else:
            words.append(a)
    return out_vars, words


def _bool_var(name: str, value: str | None) -> bool:
    """A yes/no doit variable (unset or empty: yes)."""
    if value in (None, ""):
        return True
    v = str(value).strip().lower()
    if v in ("1", "yes", "on", "true"):
        return True
    if v in ("0", "no", "off", "false"):
        return False
    raise preflight.UserError(f"{name}={value}: expected 1 or 0 (on / off)")


def _int_var(name: str, value: str | None) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise preflight.UserError(f"{name}={value}: expected a whole number") from None


def dodo_settings(argv: list[str], get_var, default_pk: Path) -> tuple[Settings, str]:
    """Settings of a `doit` run from its variables, checked; returns (settings, doit command).
    Any mistake: one line on stderr and SystemExit(2), before anything is created."""
    procs.install()
    variables, words = doit_words(argv)
    setup_logging()
    cmd = words[0] if words and words[0] in NO_BUILD | {"run"} else "run"
    targets = [w for w in words if w != cmd]
    try:
        unknown = sorted({k for k, _ in variables if k not in DOIT_VARS})
        if unknown:
            raise preflight.UserError(f"unknown variable {unknown[0]}=…: the variables are "
                                      f"{', '.join(v + '=' for v in DOIT_VARS)}")
        timeout = get_var("compile_timeout", None)
        try:
            timeout = float(timeout) if timeout not in (None, "") else None
        except ValueError:
            raise preflight.UserError(f"compile_timeout={timeout}: expected seconds") from None
        try:
            s = Settings(pk=get_var("pk", None) or default_pk, build=get_var("build", None) or None,
                         arch=get_var("arch", "auto") or "auto",
                         cap=Settings.cap if (c := _int_var("cap", get_var("cap", None))) is None else c,
                         chunk=_int_var("chunk", get_var("chunk", None)),
                         chunk_bounds=_bool_var("chunk_bounds", get_var("chunk_bounds", None)),
                         launcher=get_var("launcher", None) or knobs.read().launcher_text,
                         compile_timeout=timeout,
                         allow_bad_input=_bool_var("allow_bad_input", get_var("allow_bad_input", "0")),
                         namespace="")
        except ValueError as e:
            raise preflight.UserError(str(e)) from None
        if cmd in NO_BUILD:          # builds nothing: no toolchain check, no lock (clean takes it)
            return s, cmd
        emit_only = bool(targets) and all(t.split(":")[0] in NO_NVCC_TARGETS for t in targets)
        for note in preflight.check(s, need_nvcc=not emit_only, places=not emit_only):
            print(note, file=sys.stderr)
    except (preflight.UserError, knobs.KnobError) as e:
        raise SystemExit(preflight.fail(e)) from None
    lock_build(s)
    check_state(s)
    ProgressReporter.settings = s
    ProgressReporter.emit_only = emit_only
    return s, cmd


def check_state(s: Settings) -> None:
    """Under the build lock, before doit opens it: a dependency file that does not read back
    (a build killed while saving it) is removed, with a note (statedb.py)."""
    if (note := statedb.check(statedb.path(s.build))) is not None:
        print(note, file=sys.stderr)


def doit_config(s: Settings, default_tasks: list[str] | None = None, cmd: str = "run") -> dict:
    cfg: dict = {"dep_file": str(statedb.path(s.build))}
    if cmd in NO_BUILD and not Path(s.build).is_dir():
        # `doit list` & co. before any build: doit opens a dependency file; an in-memory one, so
        # a command that builds nothing creates nothing
        cfg = {"dep_file": ":memory:", "backend": "sqlite3"}
    cfg.update({
        "reporter": ProgressReporter,
        "verbosity": 1,
        "continue": True,   # one AIR's failure must not stop the others (its dependants still do not run)
        "cleanall": True,   # `doit clean`: every stage's outputs, not only the default tasks'
    })
    if default_tasks:
        cfg["default_tasks"] = default_tasks
    return cfg


def clean_build(s: Settings, out=None, dryrun: bool = False) -> list[str]:
    """Remove the `.so` files this build dir placed (those its link stamps record and that carry
    our identity string) and the build dir itself; print each removal. Returns what went."""
    out = out or sys.stdout
    b = Path(s.build)
    removed: list[str] = []
    if not b.is_dir():
        out.write(f"nothing to clean: no build dir {shown(b)}\n")
        return removed
    lock_build(s)
    try:
        for stamp in sorted((b / "link").rglob("*.json")) if (b / "link").is_dir() else []:
            st = actions.read_json(stamp)
            so = Path(st["so"]) if st and st.get("so") else None
            if so is not None and so.is_file() and read_so_identity(so) is not None:
                if not dryrun:
                    so.unlink()
                out.write(f"{'would remove' if dryrun else 'removed'} {shown(so)}\n")
                removed.append(str(so))
        if not dryrun:
            shutil.rmtree(b, ignore_errors=True)
        out.write(f"{'would remove' if dryrun else 'removed'} build dir {shown(b)}\n")
        removed.append(str(b))
    finally:
        unlock_build(s)
    return removed


def clean_after_doit(s: Settings) -> None:
    """`doit clean`: doit runs the stages' cleaners (the .so files); the build dir, which holds
    doit's own dependency file, goes when doit has closed it."""
    atexit.register(lambda: clean_build(s))
