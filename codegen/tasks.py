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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from doit.reporter import ConsoleReporter
from doit.tools import config_changed

from codegen import EMITTER_VERSION
from codegen.build import buildlock
from codegen.build import knobs
from codegen.build import procs
from codegen.build import statedb
from codegen.build import actions
from codegen.build import kernelcc
from codegen.build import toolchain
from codegen.discover import Placement, kernels, scan, shown
from codegen.emit import COMMON_FILES, NotRegularError, open_so, read_so_identity, source_hash
from codegen.coverage import CAP, EXPR_CAP, SLOTS_CAP
from codegen.resources import SAMPLE, TEMPLATES

log = logging.getLogger("exps_codegen")
BASENAMES = ("ir", "tune", "emit", "cc", "link")


def default_build_dir(pk: Path) -> Path:
    """The build dir of a key when none is given, the same for `doit` and `exps-codegen`
    whatever the current directory: `$EXPS_BUILD_ROOT` (default `~/.cache/exps-codegen/builds`)
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


def _kdir(s: Settings, key: str) -> Path:
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
        log.error("%s: %s", rel, shown_reason(s, skip))
        return False
    return True


def _bad_input_allowed(objs_json: str, allowed: bool) -> bool:
    """A link task's up-to-date check: an AIR of bad input is never up to date for a run that does
    not allow bad input (its link fails again and says so), whatever an earlier run allowed."""
    skip = (actions.read_json(Path(objs_json)) or {}).get("skip") or ""
    return allowed or not skip.startswith(BAD_INPUT)


def _refused_action(rel: str, reason: str) -> bool:
    """An AIR discovery refused (an unreadable or unsafe file): bad input, fails the build."""
    log.error("%s: %s", rel, reason)
    return False


def _clean_so(so_path: str, stamp: str, dryrun: bool = False) -> None:
    """Remove a `.so` only if our link made it (its stamp says placed)."""
    st = actions.read_json(Path(stamp))
    if st and st.get("so") and Path(so_path).exists():
        print(f"{'would remove' if dryrun else 'removed'} {so_path}")
        if not dryrun:
            Path(so_path).unlink()
    if not dryrun:
        Path(stamp).unlink(missing_ok=True)


def _absent(path) -> bool:
    return not os.path.lexists(path)


def orphan_name(b) -> str:
    """Task name of a stale `.so` (its path may not be UTF-8: never a doit name or file_dep)."""
    return hashlib.sha256(os.fsencode(str(b.so_path))).hexdigest()[:16]


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
    if not emit_only:
        for r in sc.refused:     # bad input the build cannot even start on: fails it, unless allowed
            yield {"basename": s.stage("gone"), "name": "refused-" + hashlib.sha256(r.rel.encode()).hexdigest()[:16],
                   "doc": r.reason, "actions": [(_refused_action, [r.rel, r.reason])],
                   "uptodate": [s.allow_bad_input]}
        for b in sc.broken:
            yield {"basename": s.stage("gone"), "name": orphan_name(b), "doc": b.reason,
                   "actions": [(actions.act_remove_orphan, [str(b.so_path), b.reason])],
                   "uptodate": [(_absent, [str(b.so_path)])], "verbosity": 2}
    for key, ps in sorted(kmap.items()):
        kd = _kdir(s, key)
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
                   "archs": s.archs(), "nvcc": s.nvcc_text(), "chunk_bounds": s.chunk_bounds})], "clean": True}
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
               "uptodate": [lazy_config_changed(lambda: {"archs": s.archs(), "nvcc": s.nvcc_text(),
                                                         "flags": " ".join(kernelcc.HIDDEN)})],
               "clean": [(_rm_tree, [str(kd / "obj")]), (_rm_file, [str(objs)])]}
        for p in ps:
            stamp = stamp_path(s, p)
            yield {"basename": s.stage("link"), "name": p.rel, "doc": shown(p.so_path),
                   "actions": [(_link_action, [s, p.rel, str(objs), str(p.so_path), str(stamp)])],
                   "file_dep": [str(objs)], "targets": [str(stamp)],
                   "uptodate": [(actions.link_uptodate, [str(stamp), str(p.so_path)]),
                                (_bad_input_allowed, [str(objs), s.allow_bad_input])],
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


# --------------------------------------------------------------------------------- reporting
def _stage_files(s: Settings, p: Placement) -> tuple[dict, dict, dict, dict, dict]:
    kd = _kdir(s, p.key)
    return (actions.read_json(kd / "ir.json") or {}, actions.read_json(kd / "tune.json") or {},
            actions.read_json(kd / "manifest.json") or {}, actions.read_json(kd / "objs.json") or {},
            actions.read_json(stamp_path(s, p)) or {})


def so_state(s: Settings, p: Placement) -> tuple[str, str]:
    """What the AIR's placed `.so` is against its files on disk now: ("current", ""), ("missing",
    "") or ("stale", why). Current means it carries the identity (emitter version, source hash)
    a build of the AIR's present bytes with these settings embeds. Only lstat, and a read of a
    regular file (emit.open_so: never a FIFO or a device)."""
    if not os.path.lexists(p.so_path):
        return "missing", ""
    try:
        open_so(p.so_path).close()
    except NotRegularError as e:
        return "stale", f"its .so {e.strerror}"
    except OSError as e:
        return "stale", f"its .so cannot be read: {e.strerror or e}"
    ident = read_so_identity(p.so_path)
    if ident is None:
        return "stale", "its .so carries no identity of ours"
    if p.error:
        return "stale", "its inputs are no longer usable"
    if ident[0] != EMITTER_VERSION:
        return "stale", f"its .so is of emitter {ident[0]} (this is {EMITTER_VERSION})"
    if ident[1] != source_hash(p.content, s.hashed()):
        return "stale", "its .so was built from other JSON or settings"
    return "current", ""


def settle(s: Settings) -> list[tuple[str, str]]:
    """After a build: every placed `.so` that is not current for the files on disk now (a JSON
    edited while the build ran, whatever the moment) is removed, so the key holds the `.so` of
    what is on disk or none. Returns [(AIR, why)] of those AIRs (the next build makes them)."""
    out = []
    for p in scan(s.pk).placements:
        state, why = so_state(s, p)
        if state == "stale":
            try:
                actions.remove_so([str(p.so_path)])
                out.append((shown(p.rel), f"{why}: removed (its JSON changed during the build; rerun)"))
            except OSError as e:
                out.append((shown(p.rel), f"{why}, and it cannot be removed: {e.strerror or e}"))
    return out


BAD_INPUT = "bad input"


def shown_reason(s: Settings, text: str) -> str:
    """A reason as a table shows it: paths inside the provingKey relative to it."""
    text = str(text or "")
    for root in {str(s.pk), os.path.realpath(s.pk)}:
        text = text.replace(root.rstrip(os.sep) + os.sep, "")
    return text


def summary_rows(s: Settings, seconds: dict[str, float] | None = None,
                 failed: dict[str, str] | None = None, emit_only: bool = False) -> list[dict]:
    """One row per AIR from the stage files and what is on disk. `seconds` / `failed` are keyed
    by doit task name (`ir:<key>`, `link:<rel>`, ...) from this run's reporter: a task in
    `seconds` ran in this run (`generated_now`, `compiled_now`, `linked_now`)."""
    seconds, failed = seconds or {}, failed or {}
    sc = scan(s.pk)
    rows = []
    for p in sc.placements:
        ir, tune, man, objs, st = _stage_files(s, p)
        skip = p.error and f"{BAD_INPUT}: {p.error}" or ir.get("air_skip") or tune.get("skip") \
            or man.get("skip") or st.get("skip") or ""
        own = [f"{s.stage(b)}:{p.key}" for b in ("ir", "tune", "emit", "cc")] + [f"{s.stage('link')}:{p.rel}"]
        fail = next((f"{n.split(':')[0]} failed: {failed[n]}" for n in own if n in failed), "")
        plan = man.get("plan", {})
        state, why = ("missing", "") if emit_only else so_state(s, p)
        placed = state == "current" and bool(st.get("so")) and not fail
        generated = bool(man.get("files")) and not man.get("skip")
        compiled = bool(objs.get("objects")) and not objs.get("skip")
        if not p.error and ir and ir.get("content") != p.content:   # the files changed since ir read them
            skip, result = "", "stale"
            fail = "its JSON changed during the build: rerun" + (f" ({why})" if state == "stale" else "")
        elif state == "stale":
            result, fail = "stale", why
        elif skip.startswith(BAD_INPUT):
            result = BAD_INPUT
        elif skip:
            result = "skipped"
        elif fail:
            result = "failed"
        elif emit_only:
            result = "emitted" if generated else "not emitted"
        elif placed:
            result = "placed"
        else:
            result, fail = "failed", "not built (an earlier stage failed or was interrupted)"
        rows.append({
            "air": shown(p.rel), "kernel": p.key,
            # Q ops: the Q expression's operations as the JSON gives them (what cap compares);
            # ops run: what its kernels run after the IR passes
            "q_ops": ir.get("q_ops", "") if not skip else "",
            "ops_run": man.get("q_ops", "") if not skip else "",
            "chunks": plan.get("chunks", ""), "slots": plan.get("slots", ""),
            "exprs": man.get("exprs", ""), "not_covered": len(ir.get("skipped_exprs", [])) if ir else "",
            "min_scratch": man.get("min_scratch", ""), "spill": objs.get("spill_bytes", ""),
            "generated": generated, "compiled": compiled, "placed": placed,
            "generated_now": generated and f"{s.stage('emit')}:{p.key}" in seconds,
            "compiled_now": compiled and f"{s.stage('cc')}:{p.key}" in seconds,
            "linked_now": placed and f"{s.stage('link')}:{p.rel}" in seconds,
            "result": result, "skip": shown_reason(s, skip), "reason": shown_reason(s, skip or fail),
            "seconds": sum(seconds.get(n, 0.0) for n in own),
        })
    none = {"kernel": "", "q_ops": "", "ops_run": "", "chunks": "", "slots": "", "exprs": "", "not_covered": "",
            "min_scratch": "", "spill": "", "generated": False, "compiled": False, "placed": False,
            "generated_now": False, "compiled_now": False, "linked_now": False}
    for r in sc.refused:
        rows.append({**none, "air": r.rel, "result": "refused", "skip": r.reason, "reason": r.reason,
                     "seconds": 0.0})
    for b in sc.broken:
        gone = not os.path.lexists(b.so_path)
        rows.append({**none, "air": b.rel,
                     "result": "removed" if gone else ("stale" if emit_only else "failed"),
                     "skip": "", "reason": b.reason + ("" if gone else "; its .so is still there"),
                     "seconds": seconds.get(f"{s.stage('gone')}:{orphan_name(b)}", 0.0)})
    return rows


LEGEND = ("Q ops: operations of the quotient (Q) expression as the JSON gives them (what cap= / --cap "
          "compares); chunks: Q kernels it is cut into; slots: scratch slots for values that cross a "
          "cut; exprs: trace-domain expressions with a kernel; not cov.: expressions left to the "
          "prover's interpreter; s: seconds this run spent on the AIR (its kernel's stages and its "
          "link; a kernel shared by AIRs counts for each); generated, compiled: kernels this run "
          "made; bad input: an AIR whose JSON cannot be used (no .so; the build exits 1 unless "
          "bad input is allowed)")
#: the widest line of the legend and of a reason in the table
WIDTH = 100


def clip(text: str, width: int) -> str:
    """`text` cut at a word boundary to at most `width` characters, with an ellipsis."""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    if " " in cut[width // 2:]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "\u2026"


def count_line(rows: list[dict], emit_only: bool = False) -> str:
    """`N AIRs: ...`: what this run generated, compiled and placed, and the state of the others."""
    n = lambda res: sum(r["result"] == res for r in rows)   # noqa: E731
    kernels_of = lambda f: len({r["kernel"] for r in rows if r.get(f)})   # noqa: E731
    airs = sum(1 for r in rows if r["result"] not in ("removed",))
    if emit_only:
        counts = f"{airs} AIRs: {kernels_of('generated_now')} kernels generated (sources only)"
    else:
        placed, linked = n("placed"), sum(1 for r in rows if r.get("linked_now"))
        counts = (f"{airs} AIRs: {kernels_of('generated_now')} kernels generated, "
                  f"{kernels_of('compiled_now')} compiled, {placed} .so placed"
                  + ("" if linked == placed else " (already current)" if not linked
                     else f" ({linked} linked, {placed - linked} already current)"))
    counts += f", {n('skipped')} skipped, {n('failed')} failed"
    for what in (BAD_INPUT, "stale", "refused"):
        if n(what):
            counts += f", {n(what)} {what}"
    if n("removed"):
        counts += f"; {n('removed')} stale .so removed"
    return counts


def format_summary(rows: list[dict], emit_only: bool = False) -> str:
    import textwrap
    head = ["AIR", "kernel", "Q ops", "chunks", "slots", "exprs", "not cov.", "result", "s", "reason"]
    table = [[r["air"], r["kernel"], str(r["q_ops"]), str(r["chunks"]), str(r["slots"]),
              str(r["exprs"]), str(r["not_covered"]), r["result"], f"{r['seconds']:.1f}",
              clip(r["reason"] or "", WIDTH)] for r in rows]
    w = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w[i]) for i, h in enumerate(head)).rstrip()]
    lines += ["  ".join(c.ljust(w[i]) for i, c in enumerate(t)).rstrip() for t in table]
    scratch = [int(r["min_scratch"]) for r in rows if str(r["min_scratch"]).isdigit()]
    lines.append(count_line(rows, emit_only) + f"; max exps_min_scratch {max(scratch) if scratch else 0} elements")
    lines += textwrap.wrap(LEGEND, WIDTH)
    return "\n".join(lines)


def _one_line_failure(fail) -> str:
    """The last meaningful line of a doit failure (an exception's message, not its traceback)."""
    try:
        msg = fail.get_msg()
    except Exception:   # noqa: BLE001
        msg = str(fail)
    lines = [x.strip() for x in str(msg).splitlines() if x.strip()]
    if not lines:
        return "failed"
    last = lines[-1]
    if "returned False" in last or "Python Task failed" in last:
        return "see the error above"
    return last[:300]


class _ErrorLines(logging.Handler):
    """The ERROR lines logged on this thread while an action runs (its task's failure says why)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.thread = threading.get_ident()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            try:
                self.lines.append(record.getMessage())
            except Exception:   # noqa: BLE001
                pass


def _said(fn, *args):
    """Run action `fn`; when it fails (returns False), the failure carries the first line of the
    error it logged, so the FAILED line, the summary and the report say why (not "see above")."""
    from doit.exceptions import TaskFailed
    h = _ErrorLines()
    log.addHandler(h)
    try:
        r = fn(*args)
    finally:
        log.removeHandler(h)
    if r is False and h.lines:
        return TaskFailed(" ".join(h.lines[-1].splitlines()[0].split()))
    return r


def reported(tasks):
    """`exps_tasks` with every Python action wrapped by `_said` (the front ends' graph)."""
    for t in tasks:
        if t.get("actions"):
            t = {**t, "actions": [(_said, [a[0], *(a[1] if len(a) > 1 else ())]) if isinstance(a, tuple)
                                  and callable(a[0]) else a for a in t["actions"]]}
        yield t


class ProgressReporter(ConsoleReporter):
    """doit reporter: `[k/total] stage:name` as each task starts (k counts started and up-to-date
    tasks, so it never repeats under -n), one line per failure, then the summary table; a no-op
    build says `N AIRs up to date`; an interrupted one says nothing more (procs.py said it)."""

    settings: Settings | None = None
    emit_only = False
    show_summary = True

    def initialize(self, tasks, selected_tasks):
        super().initialize(tasks, selected_tasks)
        self._t0 = time.monotonic()
        from codegen.build.report import cpu_seconds
        self._cpu0 = cpu_seconds()
        self._total = sum(1 for t in tasks.values() if t.actions and not t.name.startswith("_")) or 1
        self._seen = 0
        self._ran = 0
        self._start: dict[str, float] = {}
        self.seconds: dict[str, float] = {}
        self.failed: dict[str, str] = {}
        if self.settings is not None:   # doit's end-of-run save fails soft (statedb.py)
            from doit.globals import Globals
            statedb.guard(Globals.dep_manager)

    def execute_task(self, task):
        if task.actions and not task.name.startswith("_"):
            self._ran += 1
            self._seen += 1
            self._start[task.name] = time.monotonic()
            self.outstream.write(f"[{self._seen}/{self._total}] {shown(task.name)}  "
                                 f"(at {time.monotonic() - self._t0:.1f} s)\n")
            self.outstream.flush()

    def _finish(self, task):
        t = self._start.pop(task.name, None)
        if t is not None:
            self.seconds[task.name] = time.monotonic() - t

    def add_success(self, task):
        self._finish(task)

    def add_failure(self, task, fail):
        from doit.exceptions import UnmetDependency
        self._finish(task)
        why = _one_line_failure(fail)
        self.failed[task.name] = why
        if isinstance(fail, UnmetDependency):   # (a task after a failed one: that one has its line)
            return
        self.outstream.write(f"FAILED {shown(task.name)}: {why}\n")
        self.outstream.flush()

    def skip_uptodate(self, task):
        if task.actions and not task.name.startswith("_"):
            self._seen += 1

    def skip_ignore(self, task):
        pass

    def runtime_error(self, msg):
        self.outstream.write("exps-codegen: doit: " + " ".join(str(msg).split()) + "\n")

    def complete_run(self):
        stale = self._settle()
        rows = self._rows()
        self._summary(rows)
        bad = [r for r in rows or [] if r["result"] in (BAD_INPUT, "refused")]
        allowed = self.settings is not None and self.settings.allow_bad_input
        if bad and not allowed and not procs.interrupted():
            self.outstream.write(f"ERROR: {len(bad)} AIR(s) have bad input and get no .so (the other AIRs "
                                 "are built; `exps-codegen status` says why): fix their JSON, or accept them with "
                                 "--allow-bad-input / allow_bad_input=1\n")
            self.outstream.flush()
        if stale and not procs.interrupted():
            self.outstream.write(f"ERROR: {len(stale)} AIR(s) changed while the build ran; their .so "
                                 "files were removed: rerun the build\n")
            self.outstream.flush()
        if (err := statedb.save_error()) is not None:
            self.outstream.write(f"ERROR: {err}\n")
            self.outstream.flush()
        if (stale or err is not None or (bad and not allowed) or self.failed) and not procs.interrupted():
            # what is placed is sound, the run is not complete: say so by the exit code (1, also
            # where doit would say 2 for the tasks after a failed one: 2 is a user's mistake)
            raise SystemExit(1)

    def _rows(self) -> list[dict] | None:
        if procs.interrupted() or self.settings is None:
            return None
        try:
            return summary_rows(self.settings, self.seconds, self.failed, self.emit_only)
        except Exception as e:   # noqa: BLE001 — a summary must never turn a build red
            self.outstream.write(f"(no summary: {e})\n")
            return None

    def _settle(self) -> list:
        """`settle` after a build that may place (never after `emit`, which leaves the key alone)."""
        if self.settings is None or self.emit_only or procs.interrupted():
            return []
        try:
            stale = settle(self.settings)
        except Exception as e:   # noqa: BLE001 — reported, never a traceback
            self.outstream.write(f"(the end-of-build check failed: {e})\n")
            return []
        for air, why in stale:
            self.outstream.write(f"STALE {air}: {why}\n")
        return stale

    def _summary(self, rows: list[dict] | None):
        if rows is None or not self.show_summary:
            return
        try:
            if not self._ran:
                placed = sum(r["result"] == "placed" for r in rows)
                skipped = sum(r["result"] == "skipped" for r in rows)
                bad = sum(r["result"] == BAD_INPUT for r in rows)
                what = "sources" if self.emit_only else f"{placed} .so placed, {skipped} skipped"
                what += f", {bad} bad input" if bad else ""
                self.outstream.write(f"{len(rows)} AIRs up to date ({what}); nothing to do\n")
            else:
                from codegen.build import report
                self.outstream.write(format_summary(rows, self.emit_only) + "\n")
                wall = time.monotonic() - self._t0
                _, page = report.write(self.settings, report.collect(
                    self.settings, rows, self.seconds, wall, report.cpu_seconds() - self._cpu0))
                self.outstream.write(f"build dir: {shown(self.settings.build)}  ({wall:.1f} s)\n"
                                     f"report: {shown(page)}\n")
        except Exception as e:   # noqa: BLE001 — a summary must never turn a build red
            self.outstream.write(f"(no summary: {e})\n")
        self.outstream.flush()
