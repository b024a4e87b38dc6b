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

import fcntl
import hashlib
import logging
import os
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from doit.reporter import ConsoleReporter
from doit.tools import config_changed

from . import EMITTER_VERSION
from . import build as B
from . import toolchain as tc
from .discover import Placement, discover, kernels
from .emit import COMMON_HEADER, TEMPLATES
from .kernel import CAP, EXPR_CAP, SLOTS_CAP

log = logging.getLogger("exps_codegen")
BASENAMES = ("ir", "tune", "emit", "cc", "link")
SAMPLE = Path(__file__).resolve().parent.parent / "provingkey-sample"


@dataclass
class Settings:
    pk: str | Path = SAMPLE
    build: str | Path | None = None
    arch: str = "auto"
    cap: int = CAP
    expr_cap: int = EXPR_CAP
    slots_cap: int = SLOTS_CAP
    chunk: int | None = None
    launcher: str | None = None
    compile_timeout: float | None = None
    _archs: list[int] | None = field(default=None, repr=False)
    _nvcc_text: str | None = field(default=None, repr=False)

    def __post_init__(self):
        self.pk = Path(self.pk).resolve()
        if self.build is None:
            tag = hashlib.sha256(str(self.pk).encode()).hexdigest()[:8]
            self.build = Path("build") / "exps" / f"{self.pk.name}-{tag}"
        self.build = Path(self.build).resolve()
        for name in ("cap", "expr_cap", "slots_cap"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.chunk is not None and int(self.chunk) < 0:
            raise ValueError("chunk must be >= 0 (0 = a single kernel)")
        if self.launcher:   # nvcc runs in the TU's dir: a relative launcher path must not depend on it
            argv = shlex.split(self.launcher)
            if "/" in argv[0] and not os.path.isabs(argv[0]):
                self.launcher = shlex.join([os.path.abspath(argv[0]), *argv[1:]])

    def launcher_argv(self) -> list[str] | None:
        return shlex.split(self.launcher) if self.launcher else None

    def archs(self) -> list[int]:
        """Resolved arch list; [] when nvcc is absent (cc/tune tasks then fail with the reason)."""
        if self._archs is None:
            try:
                self._archs = tc.resolve_archs(self.arch, tc.find_nvcc())
            except tc.ToolchainError as e:
                log.debug("no toolchain: %s", e)
                self._archs = []
        return self._archs

    def nvcc_text(self) -> str:
        if self._nvcc_text is None:
            try:
                self._nvcc_text = tc.nvcc_version(tc.find_nvcc()).text
            except tc.ToolchainError:
                self._nvcc_text = "absent"
        return self._nvcc_text

    def hashed(self) -> dict:
        """Settings that change what a `.so` computes or covers (part of exps_source_hash).
        Archs and chunking change only speed, so `status` answers the same for any of them."""
        return {"cap": self.cap, "expr_cap": self.expr_cap, "slots_cap": self.slots_cap}


def _kdir(s: Settings, key: str) -> Path:
    return Path(s.build) / key


def stamp_path(s: Settings, p: Placement) -> Path:
    return Path(s.build) / "link" / (p.rel + ".json")


def _templates() -> list[str]:
    return sorted(str(p) for p in TEMPLATES.iterdir() if p.is_file())


def _need_toolchain(s: Settings) -> None:
    if not s.archs():
        tc.find_nvcc()   # raises the ToolchainError that says what to install
        raise tc.ToolchainError(f"no usable GPU arch for spec {s.arch!r}")


def _tune_action(s: Settings, key, ir_json, out, work):
    _need_toolchain(s)
    return B.act_tune(key, ir_json, out, work, s.archs(), s.chunk, s.slots_cap, s.launcher_argv())


def _cc_action(s: Settings, key, manifest, obj_dir, out, so_paths, airs):
    m = B.read_json(Path(manifest))
    if m is not None and not m.get("skip"):
        _need_toolchain(s)
    return B.act_cc(key, manifest, obj_dir, out, s.archs(), so_paths, airs, s.launcher_argv(),
                    s.compile_timeout)


def _link_action(s: Settings, rel, objs_json, so_path, stamp):
    return B.act_link(rel, objs_json, so_path, stamp, s.archs(), s.launcher_argv(), s.compile_timeout)


def _clean_so(so_path: str, stamp: str, dryrun: bool = False) -> None:
    """Remove a `.so` only if our link made it (its stamp says placed)."""
    st = B.read_json(Path(stamp))
    if st and st.get("so") and Path(so_path).exists():
        print(f"{'would remove' if dryrun else 'removing'} {so_path}")
        if not dryrun:
            Path(so_path).unlink()
    if not dryrun:
        Path(stamp).unlink(missing_ok=True)


def exps_tasks(s: Settings, emit_only: bool = False):
    """Yield every task of the build of `s.pk` (the stages in BASENAMES)."""
    places = discover(s.pk)
    kmap = kernels(places)
    tmpl = _templates()
    cfg_ir = {"emitter": EMITTER_VERSION, "cap": s.cap, "expr_cap": s.expr_cap}
    docs = {
        "ir": "parse a kernel's JSON, lower it to IR (skips with reasons)",
        "tune": "choose the fastest zero-spill chunking of Q (autotune, probes via the object cache)",
        "emit": "render the kernel's CUDA sources from templates/ into the build dir",
        "cc": "compile the kernel's translation units with nvcc (object cache)",
        "link": "link an AIR's <base>.exps.so next to its starkinfo (or remove it when skipped)",
    }
    for b in BASENAMES:
        if emit_only and b in ("cc", "link"):
            continue
        yield {"basename": b, "name": None, "doc": docs[b]}
    for key, ps in sorted(kmap.items()):
        kd = _kdir(s, key)
        first = ps[0]
        so_paths = [str(p.so_path) for p in ps]
        airs = [p.rel for p in ps]
        ir_json, tune_json = kd / "ir.json", kd / "tune.json"
        manifest, objs = kd / "manifest.json", kd / "objs.json"
        if first.error:
            yield _bad_air_task(s, key, first, ir_json, so_paths)
        else:
            yield {"basename": "ir", "name": key, "doc": f"{key}: {', '.join(airs)}",
                   "actions": [(B.act_ir, [key, str(first.starkinfo), str(first.expressions),
                                           str(ir_json), so_paths, s.cap, s.expr_cap])],
                   "file_dep": [str(first.starkinfo), str(first.expressions)],
                   "targets": [str(ir_json)], "uptodate": [config_changed(cfg_ir)], "clean": True}
        yield {"basename": "tune", "name": key,
               "actions": [(_tune_action, [s, key, str(ir_json), str(tune_json), str(kd / "probe")])],
               "file_dep": [str(ir_json)], "targets": [str(tune_json)],
               "uptodate": [config_changed({"emitter": EMITTER_VERSION, "chunk": s.chunk,
                                            "slots_cap": s.slots_cap, "archs": s.archs(),
                                            "nvcc": s.nvcc_text()})], "clean": True}
        yield {"basename": "emit", "name": key,
               "actions": [(B.act_emit, [key, str(ir_json), str(tune_json), str(kd / "src"),
                                         str(manifest), first.content, s.hashed()])],
               "file_dep": [str(ir_json), str(tune_json), *tmpl], "targets": [str(manifest)],
               "uptodate": [config_changed({"emitter": EMITTER_VERSION, **s.hashed()})],
               "clean": [(_rm_tree, [str(kd / "src")]), (_rm_file, [str(manifest)])]}
        if emit_only:
            continue
        yield {"basename": "cc", "name": key,
               "actions": [(_cc_action, [s, key, str(manifest), str(kd / "obj"), str(objs), so_paths, airs])],
               "file_dep": [str(manifest), str(TEMPLATES / COMMON_HEADER)], "targets": [str(objs)],
               "uptodate": [config_changed({"archs": s.archs(), "nvcc": s.nvcc_text(),
                                            "flags": " ".join(B.HIDDEN)})],
               "clean": [(_rm_tree, [str(kd / "obj")]), (_rm_file, [str(objs)])]}
        for p in ps:
            stamp = stamp_path(s, p)
            yield {"basename": "link", "name": p.rel, "doc": f"{p.so_path}",
                   "actions": [(_link_action, [s, p.rel, str(objs), str(p.so_path), str(stamp)])],
                   "file_dep": [str(objs)], "targets": [str(stamp)],
                   "uptodate": [(B.link_uptodate, [str(stamp), str(p.so_path)])],
                   "clean": [(_clean_so, [str(p.so_path), str(stamp)])]}


def _bad_air_task(s: Settings, key: str, p: Placement, ir_json: Path, so_paths: list[str]) -> dict:
    deps = [str(x) for x in (p.starkinfo, p.expressions) if Path(x).exists()]
    return {"basename": "ir", "name": key, "doc": f"{key}: {p.rel} (bad input)",
            "actions": [(_write_skip, [key, str(ir_json), p.error, so_paths])],
            "file_dep": deps, "targets": [str(ir_json)],
            "uptodate": [config_changed({"emitter": EMITTER_VERSION, "error": p.error})], "clean": True}


def _write_skip(key: str, out: str, reason: str, so_paths: list[str]) -> bool:
    """ir of an AIR whose starkinfo is unusable. Like act_ir it leaves the provingKey alone; the
    cc and link stages remove the AIR's old `.so`."""
    B._write_json(Path(out), {"format": B.FORMAT, "key": key, "air_skip": f"bad input: {reason}",
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
_LOCKS: dict[str, int] = {}


def lock_build(s: Settings, wait: bool = True) -> None:
    """Hold an exclusive lock on the build dir for this process's life (two builds of one key
    in one build dir serialize; the `.so` writes are atomic in any case)."""
    d = Path(s.build)
    d.mkdir(parents=True, exist_ok=True)
    path = str(d / ".lock")
    if path in _LOCKS:
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        raise RuntimeError(f"another build holds {path}") from None
    _LOCKS[path] = fd


def unlock_build(s: Settings) -> None:
    """Release the lock of `lock_build` (an embedding process runs more than one build)."""
    fd = _LOCKS.pop(str(Path(s.build) / ".lock"), None)
    if fd is not None:
        os.close(fd)   # closing the only descriptor drops the flock


# --------------------------------------------------------------------------------- reporting
def summary_rows(s: Settings) -> list[dict]:
    """One row per placement from the stage files (what was generated, skipped, placed)."""
    rows = []
    for p in discover(s.pk):
        kd = _kdir(s, p.key)
        ir = B.read_json(kd / "ir.json") or {}
        man = B.read_json(kd / "manifest.json") or {}
        objs = B.read_json(kd / "objs.json") or {}
        st = B.read_json(stamp_path(s, p)) or {}
        skip = ir.get("air_skip") or man.get("skip") or st.get("skip") or ""
        plan = man.get("plan", {})
        rows.append({
            "air": p.rel, "kernel": p.key, "q_ops": ir.get("q_ops", 0),
            "chunks": plan.get("chunks", ""), "slots": plan.get("slots", ""),
            "exprs": man.get("exprs", ""), "skipped_exprs": len(ir.get("skipped_exprs", [])),
            "min_scratch": man.get("min_scratch", ""), "spill": objs.get("spill_bytes", ""),
            "placed": bool(st.get("so")) and p.so_path.exists(), "skip": skip,
        })
    return rows


def format_summary(rows: list[dict]) -> str:
    head = ["AIR", "kernel", "Q ops", "chunks", "slots", "exprs", "placed", "skip reason"]
    table = [[r["air"], r["kernel"], str(r["q_ops"]), str(r["chunks"]), str(r["slots"]),
              f"{r['exprs']}" + (f" (+{r['skipped_exprs']} not)" if r["skipped_exprs"] else ""),
              "yes" if r["placed"] else "no", r["skip"] or ""] for r in rows]
    w = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w[i]) for i, h in enumerate(head))]
    lines += ["  ".join(c.ljust(w[i]) for i, c in enumerate(t)) for t in table]
    placed = sum(r["placed"] for r in rows)
    skipped = sum(bool(r["skip"]) for r in rows)
    kernels_n = len({r["kernel"] for r in rows if not r["skip"]})
    scratch = [int(r["min_scratch"]) for r in rows if str(r["min_scratch"]).isdigit()]
    lines.append(f"{len(rows)} AIRs: {kernels_n} kernels generated, {placed} .so placed, {skipped} skipped; "
                 f"max exps_min_scratch {max(scratch) if scratch else 0} elements")
    return "\n".join(lines)


class ProgressReporter(ConsoleReporter):
    """doit reporter: `[done/total] stage:name (elapsed)` lines, then the summary table."""

    settings: Settings | None = None
    show_summary = True

    def initialize(self, tasks, selected_tasks):
        super().initialize(tasks, selected_tasks)
        self._t0 = time.monotonic()
        self._total = sum(1 for t in tasks.values() if not t.subtask_of and t.actions) or 1
        self._total = sum(1 for t in tasks.values() if t.actions)
        self._done = 0
        self._ran = 0

    def execute_task(self, task):
        if task.actions and not task.name.startswith("_"):
            self._ran += 1
            self.outstream.write(f"[{self._done + 1}/{self._total}] {task.name}  "
                                 f"({time.monotonic() - self._t0:.1f}s)\n")
            self.outstream.flush()

    def add_success(self, task):
        self._done += 1

    def skip_uptodate(self, task):
        self._done += 1

    def complete_run(self):
        super().complete_run()
        if self.settings is not None and self.show_summary and self._ran:
            try:
                self.outstream.write(format_summary(summary_rows(self.settings)) + "\n")
            except Exception as e:   # a summary must never turn a build red
                self.outstream.write(f"(no summary: {e})\n")
