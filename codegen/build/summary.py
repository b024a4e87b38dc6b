"""What a build left on disk, AIR by AIR: the summary table of a run (`summary_rows`,
`format_summary`), which the reporter prints and the report reads; each placed `.so` judged by
settle.so_state.
"""
from __future__ import annotations

import os
import textwrap

from codegen.build import actions
from codegen.build.settle import so_state
from codegen.discover import Placement, Scan, scan, shown
from codegen.tasks import BAD_INPUT, Settings, kernel_dir, orphan_name, shown_reason, stamp_path


def _stage_files(s: Settings, p: Placement) -> tuple[dict, dict, dict, dict, dict]:
    kd = kernel_dir(s, p.key)
    return (actions.read_json(kd / "ir.json") or {}, actions.read_json(kd / "tune.json") or {},
            actions.read_json(kd / "manifest.json") or {}, actions.read_json(kd / "objs.json") or {},
            actions.read_json(stamp_path(s, p)) or {})


def summary_rows(s: Settings, seconds: dict[str, float] | None = None,
                 failed: dict[str, str] | None = None, emit_only: bool = False,
                 sc: Scan | None = None) -> list[dict]:
    """One row per AIR from the stage files and what is on disk. `seconds` / `failed` are keyed
    by doit task name (`ir:<key>`, `link:<rel>`, ...) from this run's reporter: a task in
    `seconds` ran in this run (`generated_now`, `compiled_now`, `linked_now`)."""
    seconds, failed = seconds or {}, failed or {}
    sc = sc or scan(s.pk)
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


