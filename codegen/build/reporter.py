"""The doit reporter of our front ends (dodo.py, the CLI): a progress line per task, one line per
failure with the error's first line, the summary table of the run (summary.py), the end-of-build
check (settle.settle) and the report (report.py).
"""
from __future__ import annotations

import logging
import threading
import time

from doit.reporter import ConsoleReporter

from codegen.build import procs, report, statedb
from codegen.build.settle import settle
from codegen.build.summary import format_summary, summary_rows
from codegen.discover import Scan, scan, shown
from codegen.tasks import BAD_INPUT, Settings

log = logging.getLogger("exps_codegen")


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
        self._cpu0 = report.cpu_seconds()
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
        # one scan of the key (it hashes every JSON) for the check, the rows and the report; again
        # only where the check removed a `.so` (an AIR whose files broke is then a refused one)
        self._scan = self._scan_key()
        stale = self._settle()
        if stale:
            self._scan = self._scan_key()
        rows = self._rows()
        self._summary(rows)
        bad = [r for r in rows or [] if r["result"] in (BAD_INPUT, "refused")]
        allowed = self.settings is not None and self.settings.allow_bad_input
        if bad and not allowed and not procs.interrupted():
            self.outstream.write(f"ERROR: {len(bad)} AIR(s) have bad input and get no .so (the other AIRs "
                                 "are built; `exps-codegen status` says why): fix their JSON, or accept them with "
                                 "--allow-bad-input / allow_bad_input=1\n")
            self.outstream.flush()
        changed = {air for air, _ in stale} | {r["air"] for r in rows or [] if r["result"] == "stale"}
        if changed and not procs.interrupted():
            self.outstream.write(f"ERROR: {len(changed)} AIR(s) changed while the build ran and have no "
                                 ".so of their files on disk: rerun the build\n")
            self.outstream.flush()
        if (err := statedb.save_error()) is not None:
            self.outstream.write(f"ERROR: {err}\n")
            self.outstream.flush()
        if (changed or err is not None or (bad and not allowed) or self.failed) and not procs.interrupted():
            # what is placed is sound, the run is not complete: say so by the exit code (1, also
            # where doit would say 2 for the tasks after a failed one: 2 is a user's mistake)
            raise SystemExit(1)

    def _scan_key(self) -> Scan | None:
        if self.settings is None or procs.interrupted():
            return None
        try:
            return scan(self.settings.pk)
        except Exception:   # noqa: BLE001 — the check and the rows scan again and say why
            return None

    def _rows(self) -> list[dict] | None:
        if procs.interrupted() or self.settings is None:
            return None
        try:
            return summary_rows(self.settings, self.seconds, self.failed, self.emit_only, sc=self._scan)
        except Exception as e:   # noqa: BLE001 — a summary must never turn a build red
            self.outstream.write(f"(no summary: {e})\n")
            return None

    def _settle(self) -> list:
        """`settle` after a build that may place (never after `emit`, which leaves the key alone)."""
        if self.settings is None or self.emit_only or procs.interrupted():
            return []
        try:
            stale = settle(self.settings, self._scan)
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
                self.outstream.write(format_summary(rows, self.emit_only) + "\n")
                wall = time.monotonic() - self._t0
                _, page = report.write(self.settings, report.collect(
                    self.settings, rows, self.seconds, wall, report.cpu_seconds() - self._cpu0, self._scan))
                self.outstream.write(f"build dir: {shown(self.settings.build)}  ({wall:.1f} s)\n"
                                     f"report: {shown(page)}\n")
        except Exception as e:   # noqa: BLE001 — a summary must never turn a build red
            self.outstream.write(f"(no summary: {e})\n")
        self.outstream.flush()
