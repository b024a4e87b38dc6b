"""The doit plugin: task generators a pipeline's own `dodo.py` can `yield from`.

    from codegen.tasks import Settings, exps_tasks
    def task_exps():
        yield from exps_tasks(Settings(pk="path/to/provingKey", build="build/exps"))

Stages (basenames) per kernel key: `ir`, `tune`, `emit`, `cc`; per placement (AIR): `link`.
Loading the graph only walks the key, parses the small starkinfo files and hashes the expressions
files (discover.py); everything else runs in actions (build.py). Every input that is not a file is
in its stage's `config_changed` dict.
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from doit.tools import config_changed

from codegen import EMITTER_VERSION
from codegen.build import buildlock
from codegen.build import knobs
from codegen.build import actions
from codegen.build import kernelcc
from codegen.build import toolchain
from codegen.build.settle import settle
from codegen.discover import Placement, kernels, scan, shown
from codegen.emit import COMMON_FILES
from codegen.coverage import CAP, EXPR_CAP, SLOTS_CAP
from codegen.resources import SAMPLE, TEMPLATES

log = logging.getLogger("exps_codegen")
BASENAMES = ("ir", "tune", "emit", "cc", "link")


def default_build_dir(pk: Path) -> Path:
    """The build dir of a key when none is given, the same for `doit` and `exps-codegen`
    whatever the current directory: `$EXPS_BUILD_ROOT` (default `${XDG_CACHE_HOME:-~/.cache}/exps-codegen/builds`)
    / `<key name, safe characters only>-<digest of the key's absolute path>`. Made only of
    `[A-Za-z0-9_.-]`: no name from a provingKey ever reaches a compiler command line."""
    root = knobs.read().build_root
    raw = os.fsencode(str(pk))
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(pk).name.encode("utf-8", "surrogateescape")
                  .decode("ascii", "replace"))[:40].strip("._") or "key"
    return Path(root).expanduser() / f"{name}-{hashlib.sha256(raw).hexdigest()[:12]}"


@dataclass
class Settings:
    pk: str | Path = SAMPLE
    build: str | Path | None = None
    arch: str = "auto"
    cap: int | None = CAP     # None: no limit on Q ops
    expr_cap: int = EXPR_CAP
    slots_cap: int = SLOTS_CAP
    chunk: int | None = None
    #: chunk kernels of a chunked Q may take a launch bound where ptxas spills nothing
    #: (build/bounds.py): a second compile of their TUs, for 3-5% on the large AIRs (docs/BENCHMARKS.md "Levers tried and rejected")
    chunk_bounds: bool = True
    launcher: str | None = None
    compile_timeout: float | None = None
    #: an AIR with bad input (broken JSON, a missing field, an unusable file) gets no `.so` either
    #: way; by default its `link` task fails, so the build exits 1 once every other AIR is placed.
    #: True accepts it (the AIR is reported as bad input, the build passes)
    allow_bad_input: bool = False
    #: prefix of our task basenames when embedded in a pipeline's dodo.py (`exps-ir`, ...,
    #: `exps-link`, and a group task `exps` that builds everything), so that a pipeline's own
    #: `link` / `emit` tasks coexist; our own dodo.py and the CLI use "" (plain `ir` ... `link`)
    namespace: str = "exps"
    _archs: list[int] | None = field(default=None, repr=False)
    _nvcc_text: str | None = field(default=None, repr=False)

    def __post_init__(self):
        self.pk = Path(os.path.abspath(os.path.expanduser(str(self.pk))))
        if self.pk.exists():
            self.pk = self.pk.resolve()
        if self.build is None:
            self.build = default_build_dir(self.pk)
        self.build = Path(os.path.abspath(os.path.expanduser(str(self.build))))
        b, k = Path(os.path.realpath(self.build)), Path(os.path.realpath(self.pk))
        if b == k or b.is_relative_to(k) or k.is_relative_to(b):
            where = "is the provingKey" if b == k else "is inside the provingKey" if b.is_relative_to(k) \
                else "holds the provingKey"
            raise ValueError(f"build dir {shown(self.build)} {where} (`clean` removes the build dir): "
                             "choose another with build=DIR / --build-dir DIR")
        for name in ("cap", "expr_cap", "slots_cap"):
            if getattr(self, name) is not None and int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be a positive number of ops")
        if self.namespace and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", self.namespace):
            raise ValueError(f"namespace {self.namespace!r}: letters, digits, _ . - only")
        if self.chunk is not None and int(self.chunk) < 0:
            raise ValueError("chunk must be >= 0 (0 = a single kernel)")
        if self.compile_timeout is not None and float(self.compile_timeout) <= 0:
            raise ValueError("compile_timeout must be a positive number of seconds")
        if self.launcher is not None and not shlex.split(self.launcher):
            self.launcher = None        # blank: no launcher, as unset
        if self.launcher:   # nvcc runs in its own dir: a relative launcher path must not depend on it
            argv = shlex.split(self.launcher)
            if "/" in argv[0] and not os.path.isabs(argv[0]):
                self.launcher = shlex.join([os.path.abspath(argv[0]), *argv[1:]])

    def stage(self, basename: str) -> str:
        """The doit basename of a stage under this build's namespace."""
        return f"{self.namespace}-{basename}" if self.namespace else basename

    def launcher_argv(self) -> list[str] | None:
        return shlex.split(self.launcher) if self.launcher else None

    def archs(self) -> list[int]:
        """Resolved arch list; [] when nvcc is absent (tune then estimates, cc fails with the
        reason; the front ends refuse a build without nvcc before anything runs)."""
        if self._archs is None:
            try:
                self._archs = toolchain.resolve_archs(self.arch, toolchain.find_nvcc())
            except toolchain.ToolchainError as e:
                log.debug("no toolchain: %s", e)
                self._archs = []
        return self._archs

    def nvcc_text(self) -> str:
        if self._nvcc_text is None:
            try:
                self._nvcc_text = toolchain.nvcc_version(toolchain.find_nvcc()).text
            except toolchain.ToolchainError:
                self._nvcc_text = "absent"
        return self._nvcc_text

    def toolchain(self) -> dict:
        """What of the machine's tools changes a task's output: nvcc, the host compiler nvcc
        calls, and the variables nvcc reads (a change reruns tune, cc and link)."""
        return {"nvcc": self.nvcc_text(), "host": toolchain.host_compiler_text(),
                "env": dict(toolchain.knobs().keyed_env)}

    def hashed(self) -> dict:
        """Settings that change what a `.so` computes or covers (part of exps_source_hash).
        Archs and chunking change only speed, and `cap` only whether an AIR gets a kernel, never
        what the kernel computes: `status` answers the same for any of them."""
        return {"expr_cap": self.expr_cap, "slots_cap": self.slots_cap}


class lazy_config_changed(config_changed):   # noqa: N801 (doit's naming)
    """doit's `config_changed` over a dict computed only when doit checks whether the task is up
    to date: creators describe, they run no tool (`doit list` probes no nvcc, no nvidia-smi)."""

    def __init__(self, make_config):
        super().__init__({})
        self._make = make_config

    def _calc_digest(self):
        self.config = self._make()
        return super()._calc_digest()

    def __repr__(self):
        return "config_changed(<computed when checked: archs, nvcc version, ...>)"


def kernel_dir(s: Settings, key: str) -> Path:
    """`<build>/<key>`: a kernel's stage files."""
    return Path(s.build) / key


def stamp_path(s: Settings, p: Placement) -> Path:
    """`<build>/link/<digest of the AIR's path>.json`: one flat file per AIR, so no AIR's path can
    name another's stamp or a directory another's needs (the stamp records the AIR and its `.so`)."""
    return Path(s.build) / "link" / (hashlib.sha256(p.rel.encode("utf-8", "surrogateescape")).hexdigest()[:24] + ".json")


def _templates() -> list[str]:
    return sorted(str(p) for p in TEMPLATES.iterdir() if p.is_file())


def _need_toolchain(s: Settings, stage: str, key: str, so_paths: list[str]) -> bool:
    """Whether nvcc and a GPU arch are there; if not, the stage fails with one line, and the
    kernel's `.so` files go first (a failed AIR leaves no `.so` behind)."""
    try:
        if not s.archs():
            toolchain.find_nvcc()   # raises the ToolchainError that says what to install
            raise toolchain.ToolchainError(f"no usable GPU arch for spec {s.arch!r}")
        return True
    except toolchain.ToolchainError as e:
        log.error("%s %s: %s", stage, key, e)
    try:
        actions.remove_so(so_paths)
    except OSError as e:
        log.error("%s %s: cannot remove the stale .so: %s", stage, key, e)
    return False


def _tune_action(s: Settings, key, ir_json, out, work, emit_only=False, so_paths=None):
    if not emit_only and not _need_toolchain(s, "tune", key, so_paths or []):
        return False
    return actions.act_tune(key, ir_json, out, work, s.archs(), s.chunk, s.slots_cap, s.launcher_argv(),
                            s.hashed(), s.chunk_bounds, None if emit_only else so_paths)


def _cc_action(s: Settings, key, manifest, obj_dir, out, so_paths, airs):
    m = actions.read_json(Path(manifest))
    if m is not None and not m.get("skip") and not _need_toolchain(s, "cc", key, so_paths):
        return False
    return actions.act_cc(key, manifest, obj_dir, out, s.archs(), so_paths, airs, s.launcher_argv(),
                    s.compile_timeout)


def _link_action(s: Settings, rel, objs_json, so_path, stamp):
    if not actions.act_link(rel, objs_json, so_path, stamp, s.archs(), s.launcher_argv(), s.compile_timeout):
        return False
    skip = (actions.read_json(Path(objs_json)) or {}).get("skip") or ""
    if skip.startswith(BAD_INPUT) and not s.allow_bad_input:   # no .so (act_link removed it); say so
        log.error("%s: %s", shown(rel), shown_reason(s, skip))
        return False
    return True


def _bad_input_allowed(objs_json: str, allowed: bool) -> bool:
    """A link task's up-to-date check: an AIR of bad input is never up to date for a run that does
    not allow bad input (its link fails again and says so), whatever an earlier run allowed."""
    skip = (actions.read_json(Path(objs_json)) or {}).get("skip") or ""
    return allowed or not skip.startswith(BAD_INPUT)


def _settle_action(s: Settings) -> bool:
    """An embedded build's last action (settle.settle): a `.so` that is not current for the files
    on disk now (a JSON edited while the build ran) is removed, and the task fails saying so."""
    stale = settle(s)
    for air, why in stale:
        log.error("STALE %s: %s", air, why)
    return not stale


def _refused_action(rel: str, reason: str) -> bool:
    """An AIR discovery refused (an unreadable or unsafe file): bad input, fails the build."""
    log.error("%s: %s", rel, reason)
    return False


def _clean_so(so_path: str, stamp: str, dryrun: bool = False) -> None:
    """Remove a `.so` only if our link made it (its stamp says placed)."""
    st = actions.read_json(Path(stamp))
    if st and st.get("so") and Path(so_path).exists():
        print(f"{'would remove' if dryrun else 'removed'} {shown(so_path)}")
        if not dryrun:
            Path(so_path).unlink()
    if not dryrun:
        Path(stamp).unlink(missing_ok=True)


def _absent(path) -> bool:
    return not os.path.lexists(path)


def orphan_name(b) -> str:
    """Task name of a stale `.so` (its path may not be UTF-8: never a doit name or file_dep)."""
    return path_name(b.so_path)


def path_name(path: Path) -> str:
    """A task name from a real path's bytes (two paths that print alike stay two names)."""
    return hashlib.sha256(os.fsencode(str(path))).hexdigest()[:16]


def exps_tasks(s: Settings, emit_only: bool = False):
    """Yield every task of the build of `s.pk` (the stages in BASENAMES, plus `gone` for a
    stale `.so` whose AIR became unreadable or vanished)."""
    sc = scan(s.pk)
    places = sc.placements
    kmap = kernels(places)
    tmpl = _templates()
    cfg_ir = {"emitter": EMITTER_VERSION, "cap": s.cap, "expr_cap": s.expr_cap}
    docs = {
        "ir": "parse a kernel's JSON, lower it to IR (skips with reasons)",
        "tune": "choose the fastest zero-spill chunking of Q (autotune, probes via the object cache)",
        "emit": "render the kernel's CUDA sources from templates/ into the build dir",
        "cc": "compile the kernel's sources with nvcc: device TUs to fatbins, its launch table (object cache)",
        "link": "link an AIR's <base>.exps.so next to its starkinfo (or remove it when skipped)",
        "gone": "remove the .so of an AIR that became unreadable or vanished",
    }
    for b in BASENAMES + ("gone",):
        if emit_only and b in ("cc", "link", "gone"):
            continue
        yield {"basename": s.stage(b), "name": None, "doc": docs[b]}
    if s.namespace:   # `doit exps` in an embedding pipeline: the whole build (or the sources)
        last = ("emit",) if emit_only else ("link", "gone")
        yield {"basename": s.namespace, "name": None, "doc": "every kernel of the provingKey (exps-codegen)",
               "task_dep": [s.stage(b) for b in last]}
        if not emit_only:   # the end-of-build check, which our reporter makes for the CLI and dodo.py
            yield {"basename": s.namespace, "name": "check", "actions": [(_settle_action, [s])],
                   "doc": "remove every .so that is not of the files on disk now (edited during the build)",
                   "task_dep": [s.stage(b) for b in last], "verbosity": 2}
    if not emit_only:
        for r in sc.refused:     # bad input the build cannot even start on: fails it, unless allowed
            yield {"basename": s.stage("gone"), "name": "refused-" + path_name(r.path),
                   "doc": r.reason, "actions": [(_refused_action, [r.rel, r.reason])],
                   "uptodate": [s.allow_bad_input]}
        for b in sc.broken:
            yield {"basename": s.stage("gone"), "name": orphan_name(b), "doc": b.reason,
                   "actions": [(actions.act_remove_orphan, [str(b.so_path), b.reason])],
                   "uptodate": [(_absent, [str(b.so_path)])], "verbosity": 2}
    for key, ps in sorted(kmap.items()):
        kd = kernel_dir(s, key)
        first = ps[0]
        so_paths = [str(p.so_path) for p in ps]
        airs = [p.rel for p in ps]
        ir_json, tune_json = kd / "ir.json", kd / "tune.json"
        manifest, objs = kd / "manifest.json", kd / "objs.json"
        if first.error:
            yield _bad_air_task(s, key, first, ir_json, so_paths, emit_only)
        else:
            # no file_dep on the JSON: doit would checksum it when the task ends, so an edit made
            # while the task ran would pass as done. ir.json records the content of the bytes it
            # parsed, and the task is current while discovery finds that content on disk
            yield {"basename": s.stage("ir"), "name": key, "doc": f"{key}: {', '.join(map(shown, airs))}",
                   "actions": [(actions.act_ir, [key, str(first.starkinfo), str(first.expressions),
                                           str(ir_json), so_paths, s.cap, s.expr_cap, not emit_only])],
                   "targets": [str(ir_json)], "clean": True,
                   "uptodate": [config_changed(cfg_ir), (actions.ir_current, [str(ir_json), first.content])]}
        yield {"basename": s.stage("tune"), "name": key,
               "actions": [(_tune_action, [s, key, str(ir_json), str(tune_json), str(kd / "probe"),
                                           emit_only, so_paths])],
               "file_dep": [str(ir_json)], "targets": [str(tune_json)],
               "uptodate": [lazy_config_changed(lambda: {
                   "emitter": EMITTER_VERSION, "chunk": s.chunk, "slots_cap": s.slots_cap,
                   "archs": s.archs(), **s.toolchain(), "chunk_bounds": s.chunk_bounds})], "clean": True}
        yield {"basename": s.stage("emit"), "name": key,
               "actions": [(actions.act_emit, [key, str(ir_json), str(tune_json), str(kd / "src"),
                                         str(manifest), s.hashed(), None if emit_only else so_paths,
                                         s.chunk_bounds])],
               "file_dep": [str(ir_json), str(tune_json), *tmpl], "targets": [str(manifest)],
               "uptodate": [config_changed({"emitter": EMITTER_VERSION, **s.hashed(),
                                            "chunk_bounds": s.chunk_bounds})],
               "clean": [(_rm_tree, [str(kd / "src")]), (_rm_file, [str(manifest)])]}
        if emit_only:
            continue
        yield {"basename": s.stage("cc"), "name": key,
               "actions": [(_cc_action, [s, key, str(manifest), str(kd / "obj"), str(objs), so_paths, airs])],
               "file_dep": [str(manifest), *(str(TEMPLATES / n) for n in COMMON_FILES)], "targets": [str(objs)],
               "uptodate": [lazy_config_changed(lambda: {"archs": s.archs(), **s.toolchain(),
                                                         "flags": " ".join(kernelcc.HIDDEN)})],
               "clean": [(_rm_tree, [str(kd / "obj")]), (_rm_file, [str(objs)])]}
        for p in ps:
            stamp = stamp_path(s, p)
            yield {"basename": s.stage("link"), "name": p.rel, "doc": shown(p.so_path),
                   "actions": [(_link_action, [s, p.rel, str(objs), str(p.so_path), str(stamp)])],
                   "file_dep": [str(objs)], "targets": [str(stamp)],
                   "uptodate": [(actions.link_uptodate, [str(stamp), str(p.so_path)]),
                                (_bad_input_allowed, [str(objs), s.allow_bad_input]),
                                lazy_config_changed(s.toolchain)],
                   "clean": [(_clean_so, [str(p.so_path), str(stamp)])]}


def _bad_air_task(s: Settings, key: str, p: Placement, ir_json: Path, so_paths: list[str],
                  emit_only: bool = False) -> dict:
    deps = [str(x) for x in (p.starkinfo, p.expressions) if Path(x).is_file()]
    return {"basename": s.stage("ir"), "name": key, "doc": f"{key}: {p.rel} (bad input)",
            "actions": [(_write_skip, [key, str(ir_json), p.error, so_paths, not emit_only])],
            "file_dep": deps, "targets": [str(ir_json)],
            "uptodate": [config_changed({"emitter": EMITTER_VERSION, "error": p.error})], "clean": True}


def _write_skip(key: str, out: str, reason: str, so_paths: list[str], remove_stale: bool = True) -> bool:
    """ir of an AIR whose starkinfo is unusable: its old `.so` goes first (as in act_ir; not
    for `doit emit`, which leaves the provingKey alone), then the skip is recorded."""
    if remove_stale:
        try:
            actions.remove_so(so_paths)
        except OSError as e:
            log.error("%s: cannot remove the stale .so: %s", key, e)
            return False
    actions._write_json(Path(out), {"format": actions.FORMAT, "key": key, "air_skip": f"bad input: {reason}",
                              "q": None, "exprs": [], "skipped_exprs": [], "q_ops": 0})
    return True


def _rm_tree(path: str, dryrun: bool = False) -> None:
    import shutil
    if Path(path).exists() and not dryrun:
        shutil.rmtree(path, ignore_errors=True)


def _rm_file(path: str, dryrun: bool = False) -> None:
    if not dryrun:
        Path(path).unlink(missing_ok=True)


# ----------------------------------------------------------------------------------- locking
def lock_build(s: Settings, wait: bool = True) -> None:
    """Create the build dir and hold its lock for this process's life (buildlock.py: a second
    build waits with a message; a dead owner's lock is taken over)."""
    Path(s.build).mkdir(parents=True, exist_ok=True)
    try:
        buildlock.acquire(s.build, wait=wait)
    except buildlock.LockBusy as e:
        raise RuntimeError(str(e)) from None


def unlock_build(s: Settings) -> None:
    """Release the lock of `lock_build` (an embedding process runs more than one build)."""
    buildlock.release(s.build)


BAD_INPUT = "bad input"


def shown_reason(s: Settings, text: str) -> str:
    """A reason as a table shows it: paths inside the provingKey relative to it."""
    text = str(text or "")
    for root in {str(s.pk), os.path.realpath(s.pk)}:
        text = text.replace(root.rstrip(os.sep) + os.sep, "")
    return text
