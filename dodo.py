"""exps-codegen as a doit build: `doit` builds provingkey-sample/, `doit pk=DIR` another key.

Variables: pk=DIR  build=DIR  arch=auto|major|90,120  cap=N  chunk=N  chunk_bounds=1|0
           launcher=CMD  compile_timeout=SECONDS (kill a hung nvcc; that AIR fails, the others build)
           allow_bad_input=1|0 (an AIR whose JSON cannot be used gets no .so; 1: the build still
           exits 0)
Commands:  doit (build and place every <base>.exps.so), doit emit (sources only, into the build
dir), doit clean (the .so files it placed and the build dir), doit list, doit -n N (parallel).
The build dir defaults to ~/.cache/exps-codegen/builds/<key>-<digest> (EXPS_BUILD_ROOT), the
same one `exps-codegen status|verify|clean PK` finds. A pipeline's own dodo.py can instead
`yield from codegen.tasks.exps_tasks(Settings(...))` (see README).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # works from a plain checkout, too

from doit import get_var  # noqa: E402

from codegen.build.front import clean_after_doit, doit_config, dodo_settings  # noqa: E402
from codegen.resources import SAMPLE  # noqa: E402
from codegen.build.reporter import ProgressReporter, reported  # noqa: E402
from codegen.tasks import exps_tasks  # noqa: E402

SETTINGS, COMMAND = dodo_settings(sys.argv[1:], get_var, SAMPLE)
if COMMAND == "clean":
    if not Path(SETTINGS.build).is_dir():
        print(f"nothing to clean: no build dir {SETTINGS.build}")
        raise SystemExit(0)
    clean_after_doit(SETTINGS)

DOIT_CONFIG = doit_config(SETTINGS, default_tasks=["link", "gone"], cmd=COMMAND)


def task_exps():
    """every stage of the kernels of the provingKey (ir, tune, emit, cc, link, gone)"""
    if COMMAND == "clean":   # front.clean_build does it all, once doit has closed its files
        return
    yield from reported(exps_tasks(SETTINGS, emit_only=ProgressReporter.emit_only))
