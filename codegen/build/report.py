"""The build report: `<build>/report.json` (strict JSON, schema below) and `<build>/report.html`
(one self-contained page: tables and inline SVG plots, no script, no network), written after
every build and by `exps-codegen report PK`.

report.json, format 1:
    {"format": 1, "tool": "exps-codegen", "emitter_version": str, "pk": str, "build_dir": str,
     "wall_s": float | null, "cpu_s": float | null,       # this run (null: rebuilt from stage files)
     "totals": {"airs", "kernels_generated", "compiled", "linked" (by this run), "placed",
                "skipped", "bad_input", "failed" (the AIRs' state), "tus", "cache_hits": int},
     "airs": [{"air", "kernel", "result", "reason": str (paths relative to the key), "seconds": float}],
     "kernels": [{"key": str, "airs": [str], "q_ops": int (Q's operations as the JSON gives them:
                  what cap compares), "ops_run": int (what its kernels run, after the IR passes),
                  "max_live": int (64-bit words live at once in Q, after the passes),
                  "exprs": int, "not_covered": int,
                  "chunks": int, "slots": int, "min_scratch": int,
                  "chunking": {"how": "probed" | "fixed" | "estimated" | "not probed" | "",
                               "arch": int | null, "ops_per_chunk": int, "min_blocks": int},
                  "probes": [{"ops_per_chunk", "n_chunks", "slots", "regs": [int],
                              "spills" (bytes of the Q kernels that store more than
                              autotune.SPILL_SLACK_BYTES: the spills that rule the plan out),
                              "cost": float | null, "estimated": bool}],
                  "regs_per_chunk": [int] (as emitted), "bounded": {chunk: min blocks} (the chunks
                  whose bounded twin runs: build/bounds.py), "spill_bytes": int (ptxas's, every function),
                  "tus": int (device TUs), "cache_hits": int (of them from the object cache),
                  "compiled": bool,
                  "stage_seconds": {"ir", "tune", "emit", "cc": float}, "skip": str}]}
"""
from __future__ import annotations

import html
import resource
from pathlib import Path

from codegen import EMITTER_VERSION
from codegen.build.actions import _write_json, read_json
from codegen.build.cache import atomic_write
from codegen.build.autotune import SPILL_SLACK_BYTES
from codegen.build.summary import summary_rows
from codegen.discover import kernels, scan
from codegen.emit import Q_KERNEL_RE, device_tus
from codegen.tasks import shown_reason

FORMAT = 1


def cpu_seconds() -> float:
    """User + system CPU of this process and its waited-for children so far."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _how(tune: dict) -> str:
    """How the chunking was chosen; "not probed" for a kernel autotune never compiled a probe of."""
    if not tune or tune.get("skip"):
        return ""
    how = tune.get("how", "probed")
    return "not probed" if how == "probed" and not tune.get("probes") else how


def regs_per_chunk(key: str, n_chunks: int, reports: dict) -> list[int]:
    """Per Q chunk kernel, the most registers over archs (from the ptxas reports of cc)."""
    regs = [0] * n_chunks
    for rep in reports.values():        # (kernel `key`'s TUs: every Q chunk kernel in them is its own)
        for name, per_arch in rep.items():
            m = Q_KERNEL_RE.search(name)
            if m and int(m[1]) < n_chunks:
                for st in per_arch.values():
                    regs[int(m[1])] = max(regs[int(m[1])], int(st.get("registers", 0)))
    return regs


def collect(s, rows: list[dict], seconds: dict[str, float] | None = None,
            wall_s: float | None = None, cpu_s: float | None = None, sc=None) -> dict:
    """The report of build `s` from its stage files, the summary rows (summary.summary_rows) and
    this run's per-task seconds (doit task name -> seconds); `sc`: the key's scan, when at hand."""
    seconds = seconds or {}
    kmap = kernels((sc or scan(s.pk)).placements)
    ks = []
    for key, ps in sorted(kmap.items()):
        kd = Path(s.build) / key
        ir, tune = read_json(kd / "ir.json") or {}, read_json(kd / "tune.json") or {}
        man, objs = read_json(kd / "manifest.json") or {}, read_json(kd / "objs.json") or {}
        plan = man.get("plan", {})
        n_chunks = int(plan.get("chunks", 0) or 0)
        ks.append({
            "key": key, "airs": [p.rel for p in ps],
            "q_ops": int(ir.get("q_ops", 0) or 0), "ops_run": int(man.get("q_ops", 0) or 0),
            "max_live": int(man.get("max_live", 0) or 0),
            "exprs": int(man.get("exprs", 0) or 0), "not_covered": len(ir.get("skipped_exprs", [])),
            "chunks": n_chunks, "slots": int(plan.get("slots", 0) or 0),
            "min_scratch": int(man.get("min_scratch", 0) or 0),
            "chunking": {"how": _how(tune), "arch": tune.get("arch"),
                         "ops_per_chunk": int(tune.get("ops_per_chunk", 0) or 0),
                         "min_blocks": int(tune.get("min_blocks", 0) or 0)},
            "probes": tune.get("probes", []),
            "regs_per_chunk": regs_per_chunk(key, n_chunks, objs.get("reports", {})),
            "spill_bytes": int(objs.get("spill_bytes", 0) or 0),
            "bounded": {str(c): int(b) for c, b in (objs.get("bounded") or {}).items()},
            "tus": len(device_tus(man.get("files", {}))), "cache_hits": int(objs.get("hits", 0) or 0),
            "compiled": bool(objs.get("objects")) and not objs.get("skip"),
            "stage_seconds": {b: round(seconds.get(f"{s.stage(b)}:{key}", 0.0), 3)
                              for b in ("ir", "tune", "emit", "cc")},
            "skip": shown_reason(s, ir.get("air_skip") or tune.get("skip") or man.get("skip") or ""),
        })
    n = lambda res: sum(r["result"] == res for r in rows)   # noqa: E731
    return {
        "format": FORMAT, "tool": "exps-codegen", "emitter_version": EMITTER_VERSION,
        "pk": str(s.pk), "build_dir": str(s.build),
        "wall_s": None if wall_s is None else round(wall_s, 3),
        "cpu_s": None if cpu_s is None else round(cpu_s, 3),
        "totals": {"airs": len(rows),
                   "kernels_generated": len({r["kernel"] for r in rows if r.get("generated_now")}),
                   "compiled": len({r["kernel"] for r in rows if r.get("compiled_now")}),
                   "linked": sum(1 for r in rows if r.get("linked_now")),
                   "placed": n("placed"), "skipped": n("skipped"), "bad_input": n("bad input"),
                   "failed": n("failed"),
                   "tus": sum(k["tus"] for k in ks), "cache_hits": sum(k["cache_hits"] for k in ks)},
        "airs": [{"air": r["air"], "kernel": r["kernel"], "result": r["result"],
                  "reason": r["reason"] or "", "seconds": round(float(r["seconds"]), 3)} for r in rows],
        "kernels": ks,
    }


# ------------------------------------------------------------------------------------ html
def _bars(title: str, items: list[tuple[str, float]], unit: str, width: int = 640) -> str:
    """A horizontal bar chart as inline SVG."""
    if not items:
        return ""
    h, left = 18, 230
    top = max(v for _, v in items) or 1.0
    rows = []
    for i, (label, v) in enumerate(items):
        w = (width - left - 80) * v / top
        y = 24 + i * h
        rows.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{html.escape(label[-34:])}</text>'
                    f'<rect x="{left}" y="{y + 2}" width="{w:.1f}" height="{h - 5}" fill="#4a7bd0"/>'
                    f'<text x="{left + w + 4:.1f}" y="{y + 12}">{v:g} {html.escape(unit)}</text>')
    return (f'<figure><svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{30 + len(items) * h}" '
            f'font-family="sans-serif" font-size="11" role="img" aria-label="{html.escape(title)}">'
            f'<text x="0" y="12" font-weight="bold">{html.escape(title)}</text>{"".join(rows)}</svg></figure>')


def _scatter(title: str, pts: list[tuple[str, float, float]], xlab: str, ylab: str,
             width: int = 640, height: int = 260) -> str:
    if not pts:
        return ""
    mx, my = max(p[1] for p in pts) or 1.0, max(p[2] for p in pts) or 1.0
    l, b = 60, 40
    dots = "".join(
        f'<circle cx="{l + (width - l - 20) * x / mx:.1f}" cy="{height - b - (height - b - 30) * y / my:.1f}" '
        f'r="4" fill="#d0704a"><title>{html.escape(k)}: {x:g} {html.escape(xlab)}, {y:g} {html.escape(ylab)}'
        f'</title></circle>' for k, x, y in pts)
    return (f'<figure><svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="sans-serif" font-size="11" role="img" aria-label="{html.escape(title)}">'
            f'<text x="0" y="12" font-weight="bold">{html.escape(title)}</text>'
            f'<line x1="{l}" y1="{height - b}" x2="{width - 10}" y2="{height - b}" stroke="#333"/>'
            f'<line x1="{l}" y1="30" x2="{l}" y2="{height - b}" stroke="#333"/>'
            f'<text x="{width - 10}" y="{height - 10}" text-anchor="end">{html.escape(xlab)} (max {mx:g})</text>'
            f'<text x="4" y="26">{html.escape(ylab)} (max {my:g})</text>{dots}</svg></figure>')


def _table(head: list[str], rows: list[list]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def render_html(rep: dict) -> str:
    t = rep["totals"]
    ks = rep["kernels"]
    kernel_time = [(k["key"], round(sum(k["stage_seconds"].values()), 2)) for k in ks]
    regs = [(f"{k['key']} c{i}", r) for k in ks for i, r in enumerate(k["regs_per_chunk"])][:60]
    pts = [(k["key"], k["q_ops"], round(sum(k["stage_seconds"].values()), 2)) for k in ks if k["q_ops"]]
    air_rows = [[a["air"], a["kernel"], a["result"], f"{a['seconds']:.1f}", a["reason"]] for a in rep["airs"]]
    def chunking(c: dict) -> str:
        what = f"{c['ops_per_chunk']} ops per chunk" if c["ops_per_chunk"] else "one kernel"
        what += f", {c['min_blocks']} blocks per SM" if c.get("min_blocks") else ""
        return f"{c['how']}: {what}" + (f" (sm_{c['arch']})" if c["arch"] else "")

    def chosen(k: dict, p: dict) -> bool:
        c = k["chunking"]
        return p.get("ops_per_chunk") == c["ops_per_chunk"] and int(p.get("min_blocks") or 0) == c.get("min_blocks", 0)

    k_rows = [[k["key"], k["q_ops"], k["ops_run"], k["max_live"], k["chunks"], k["slots"], k["exprs"],
               k["not_covered"], "\u2014" if k["skip"] else chunking(k["chunking"]),
               len(k["probes"]), max(k["regs_per_chunk"] or [0]), len(k["bounded"]), k["spill_bytes"],
               f"{k['cache_hits']}/{k['tus']}",
               " ".join(f"{b} {v:.1f}" for b, v in k["stage_seconds"].items()), k["skip"]] for k in ks]
    probe_rows = [[k["key"], p.get("ops_per_chunk") or "one kernel", p.get("min_blocks") or "",
                   p.get("n_chunks"), p.get("slots"), max(p.get("regs") or [0]), p.get("spills"),
                   "ruled out: spills" if p.get("cost") is None else f"{p['cost']:.0f}",
                   "yes" if chosen(k, p) else ""]
                  for k in ks for p in k["probes"]]
    wall = "" if rep["wall_s"] is None else f"{rep['wall_s']:.1f} s wall, {rep['cpu_s']:.1f} s CPU; "
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>exps-codegen build report</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1200px}}table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #bbb;padding:2px 6px;font-size:12px;text-align:left}}th{{background:#eee}}
figure{{margin:1em 0}}.note{{font-size:12px;color:#444;max-width:900px}}</style></head><body>
<h1>exps-codegen build report</h1>
<p id="summary">{html.escape(rep['pk'])} &rarr; {html.escape(rep['build_dir'])}<br>
{wall}{t['airs']} AIRs: {t['kernels_generated']} kernels generated, {t['compiled']} compiled,
{t.get('linked', 0)} .so linked by this run; {t['placed']} .so placed, {t['skipped']} skipped,
{t.get('bad_input', 0)} bad input, {t['failed']} failed; {t['cache_hits']} of {t['tus']}
translation units from the object cache. Emitter {html.escape(rep['emitter_version'])}.</p>
<h2>AIRs</h2>{_table(["AIR", "kernel", "result", "s", "reason"], air_rows)}
<h2>Kernels</h2>{_table(["kernel", "Q ops", "ops run", "max live words", "chunks", "slots", "exprs", "not cov.",
                         "chunking", "probes", "max regs", "bounded chunks", "spill B", "cache hits",
                         "stage seconds", "skip"], k_rows)}
<p class="note">Q ops: the operations of the quotient expression as the JSON gives them (what cap
compares); ops run: what its kernels run after the IR passes (values recomputed across chunk cuts
count again). spill B: the bytes ptxas spilled, over every function and arch of the kernel's device
TUs. Autotune keeps a chunking only where no Q kernel stores more than {SPILL_SLACK_BYTES} B on the
arch it probes (a word ptxas spills to fit one more block per SM runs faster than a cut), so a few
bytes here are those words, or an arch that was compiled but not probed.</p>
<h2>Autotune probes</h2>{_table(["kernel", "ops/chunk", "blocks per SM", "kernels", "slots", "max regs",
                                  "spill B (ruling out)", "model cost", "chosen"], probe_rows)}
<h2>Plots</h2>
{_bars("build seconds per kernel (this run)", kernel_time, "s")}
{_bars("registers per Q chunk (ptxas, most over archs)", regs, "regs")}
{_scatter("Q ops vs build seconds", pts, "Q ops", "s")}
</body></html>
"""


def write(s, rep: dict) -> tuple[Path, Path]:
    b = Path(s.build)
    _write_json(b / "report.json", rep)
    atomic_write(b / "report.html", render_html(rep).encode())
    return b / "report.json", b / "report.html"


def rebuild(s) -> dict:
    """`exps-codegen report PK`: from the stage files, keeping the last run's timings when its
    report.json is there."""
    old = read_json(Path(s.build) / "report.json") or {}
    secs = {}
    for k in old.get("kernels", []):
        for b, v in k.get("stage_seconds", {}).items():
            secs[f"{s.stage(b)}:{k['key']}"] = v
    rows = summary_rows(s)
    by_air = {a["air"]: a["seconds"] for a in old.get("airs", [])}
    for r in rows:
        r["seconds"] = by_air.get(r["air"], 0.0)
    rep = collect(s, rows, secs, old.get("wall_s"), old.get("cpu_s"))
    last = old.get("totals") or {}          # what the last run did; without its report, the build dir
    t = rep["totals"]
    t["kernels_generated"] = int(last.get("kernels_generated", sum(1 for k in rep["kernels"] if k["tus"] and not k["skip"])))
    t["compiled"] = int(last.get("compiled", sum(1 for k in rep["kernels"] if k["compiled"])))
    t["linked"] = int(last.get("linked", t["placed"]))
    return rep
