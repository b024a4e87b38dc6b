"""exps-codegen as a doit build: `doit` builds provingkey-sample/, `doit pk=DIR` another key.

Variables: pk=DIR  build=DIR  arch=auto|major|90,120  cap=N  chunk=N  launcher=CMD
           compile_timeout=SECONDS (kill a hung nvcc; that AIR fails, the others build)
Commands:  doit (build and place every <base>.exps.so), doit emit (sources only, into the build
dir), doit clean, doit list, doit -n N (parallel). A pipeline's own dodo.py can instead
`yield from codegen.tasks.exps_tasks(Settings(...))` (see README).
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # works from a plain checkout, too

from doit import get_var  # noqa: E402

from codegen.tasks import ProgressReporter, Settings, exps_tasks, lock_build  # noqa: E402


def _int(name):
    v = get_var(name, None)
    return None if v in (None, "") else int(v)


SETTINGS = Settings(
    pk=get_var("pk", str(Path(__file__).resolve().parent / "provingkey-sample")),
    build=get_var("build", None),
    arch=get_var("arch", "auto"),
    cap=_int("cap") or 40000,
    chunk=_int("chunk"),
    launcher=get_var("launcher", None) or os.environ.get("EXPS_LAUNCHER") or None,
    compile_timeout=float(get_var("compile_timeout", 0) or 0) or None,
)
lock_build(SETTINGS)
ProgressReporter.settings = SETTINGS

DOIT_CONFIG = {
    "default_tasks": ["link"],
    "dep_file": str(Path(SETTINGS.build) / ".doit.db"),
    "reporter": ProgressReporter,
    "verbosity": 1,
    "continue": True,   # one AIR's failure must not stop the others (its dependants still do not run)
}


def task_exps():
    """every stage of the kernels of the provingKey (ir, tune, emit, cc, link)"""
    yield from exps_tasks(SETTINGS)
