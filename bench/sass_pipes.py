#!/usr/bin/env python3
"""SASS instructions by integer pipe and registers, per variant of gl_mul (issue #13); host only.

    python3 bench/sass_pipes.py probe             # bench/sass_probe.cu: k_add, k_sub, k_mul, k_mul3, k_mul3v, k_accmul
    python3 bench/sass_pipes.py probe FILE.cu --variants cur   # any other (bench/fp64_pipe.cu: FP64 counted apart)
    python3 bench/sass_pipes.py tus DIR           # every DIR/*/src/*.cu (`exps-codegen emit PK
                                                  #   --keep-dir DIR`): per kernel and in total

    python3 bench/sass_pipes.py cubins DIR OUT    # every DIR/*/src/*.cu -> OUT/<DIR name>_*.cubin, with
                                                  #   the header emitted beside it (emit with each tree)
    python3 bench/sass_pipes.py dirs A B          # two such OUTs (two trees' templates), kernel by kernel

`dirs` is a static pre-screen of a field-op change (session 23; issue #14): per kernel, the hot path
(its instructions up to the first unpredicated EXIT: the value path's fast rows, not the exact
fallback) in issue slots and in cycles of each integer pipe of one SM sub-partition, from session
11's H200 rates (bench/data/fma-pipe-h200-s11.txt: IMAD.WIDE / IMAD.HI 4 cycles a warp
instruction, other IMAD* 2, ALU 2), and the larger of the three as the kernel's model; printed as
B / A medians per kind (Q chunks, expression WRITE kernels `_k`, inverse kernels `_ki`). Register
loops on the GPU have run such counts' winners no faster (session 6's mw5), and in full kernels
neither form it favoured was faster (session 24: the IMAD.WIDE halves, model 0.889, ran 0.99x; the
ALU reduction tail, model 0.928, ran 0.97x): a model, not a timing, and not a predictor either.

Variants: cur (templates/gen_common.cuh as it is), m050 (-DEXPS_GL_MUL_V050: gl_mul of emitter
0.5.0), mw5 (-DEXPS_GL_MUL_W5); --variants picks. Compiles with nvcc -cubin -arch=sm_XX -O3
(-Xptxas=-v for the registers) and reads cuobjdump -sass. Pipes as on the H100/H200: IMAD.WIDE and
IMAD.HI the FMA-heavy half of the FMA pipe, other IMAD* (IMAD.X, IMAD.MOV, IMAD.IADD, ...) the FMA
pipe, the rest (IADD3, SEL, SHF, LOP3, MOV, ...) ALU. `probe` leaves out loads, stores, constant
loads and address arithmetic as bench/sass_count.sh does; `tus` counts whole kernels.
"""
from __future__ import annotations

import argparse
import collections
import math
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {"cur": [], "m050": ["-DEXPS_GL_MUL_V050"], "mw5": ["-DEXPS_GL_MUL_W5"]}
_INS = re.compile(r"\s+/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)(.*)")
_OVERHEAD = re.compile(r"^(LDC|S2R|ULDC|LDG|STG|EXIT|BRA)|^IMAD\.WIDE$")
_FP64 = re.compile(r"^D(FMA|ADD|MUL|SETP|MNMX)")


def compile_cubin(src: Path, out: Path, flags: list[str], arch: str) -> str:
    argv = ["nvcc", "-cubin", f"-arch=sm_{arch}", "-O3", "-std=c++17", "-DGL64_PARTIALLY_REDUCED",
            "-Xptxas=-v", *flags, "-I", str(REPO / "templates"), "-I", str(REPO / "bench" / "baseline"), str(src), "-o", str(out)]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"{' '.join(argv)}:\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


def registers(ptxas_log: str) -> tuple[dict[str, int], dict[str, int]]:
    """({kernel: registers}, {kernel: spill-store bytes}) from ptxas -v."""
    regs, spills, cur = {}, {}, None
    for ln in ptxas_log.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", ln) or re.search(r"Function properties for (\w+)", ln)
        if m:
            cur = m.group(1)
        m = re.search(r"(\d+) bytes spill stores", ln)
        if m and cur:
            spills[cur] = int(m.group(1))
        m = re.search(r"Used (\d+) registers", ln)
        if m and cur:
            regs[cur] = int(m.group(1))
    return regs, spills


def instructions(cubin: Path):
    """(kernel, opcode, operands, predicated) of each SASS instruction of `cubin` but NOPs, in order;
    (kernel, None, "", False) first for each kernel (cuobjdump -sass)."""
    text = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    name = None
    for ln in text.splitlines():
        if "Function :" in ln:
            name = ln.split("Function :")[1].strip()
            yield name, None, "", False
            continue
        m = _INS.match(ln)
        if m and name is not None and not m.group(2).startswith("NOP"):
            yield name, m.group(2), m.group(3), m.group(1) is not None


def pipes(cubin: Path, skip_overhead: bool) -> dict[str, collections.Counter]:
    res: dict[str, collections.Counter] = {}
    for name, op, rest, _pred in instructions(cubin):
        if op is None:
            res[name] = collections.Counter()
            continue
        # address arithmetic of the probe kernels: IMAD.WIDE Rd, Ri, 0x8 / 0x18 (element sizes)
        if skip_overhead and (_OVERHEAD.match(op) and (not op.startswith("IMAD") or re.search(r", 0x(8|18),", rest))):
            continue
        c = res[name]
        c["total"] += 1
        if re.match(r"IMAD\.(WIDE|HI)", op):
            c["fma"] += 1
            c["heavy"] += 1
        elif op.startswith("IMAD"):
            c["fma"] += 1
        elif _FP64.match(op):
            c["fp64"] += 1
        else:
            c["alu"] += 1
            c["mov"] += op == "MOV"
    return res


_UNTIMED = re.compile(r"^(U|R2UR|S2UR|LD|ST|S2R|BRA|EXIT|CALL|RET|BAR|BSSY|BSYNC|WARPSYNC)")


def hot_path(cubin: Path) -> dict[str, collections.Counter]:
    """{kernel: Counter(issue, fma, alu)}: the hot path's issue slots and pipe cycles (module doc)."""
    res: dict[str, collections.Counter] = {}
    done: set[str] = set()
    for name, op, _rest, pred in instructions(cubin):
        if op is None:
            res[name] = collections.Counter()
            continue
        if name in done:
            continue
        c = res[name]
        c["issue"] += 1
        if re.match(r"IMAD\.(WIDE|HI)", op):
            c["fma"] += 4
        elif op.startswith("IMAD"):
            c["fma"] += 2
        elif not _UNTIMED.match(op):
            c["alu"] += 2
        if op == "EXIT" and not pred:
            done.add(name)
    return res


def kind_of(kernel: str) -> str | None:
    if "_q_c" in kernel:
        return "Q chunk"
    if "_x_e" in kernel:
        return "expression _ki" if re.search(r"_x_e\d+_ki", kernel) else "expression _k"
    return None


def compare_dirs(a: Path, b: Path) -> list[str]:
    """B against A, per kind: the model's median ratio (range), FMA / ALU / issue medians, summed."""
    rows: dict[str, list[tuple[collections.Counter, collections.Counter]]] = collections.defaultdict(list)
    for ca in sorted(a.glob("*.cubin")):
        cb = b / ca.name
        if not cb.is_file():
            continue
        ka, kb = hot_path(ca), hot_path(cb)
        for k, x in ka.items():
            if k in kb and kind_of(k):
                rows[kind_of(k)].append((x, kb[k]))
    model = lambda c: max(c["fma"], c["alu"], c["issue"])  # noqa: E731
    out = []
    for kind, pairs in sorted(rows.items()):
        r = [model(y) / model(x) for x, y in pairs]
        med = lambda f: statistics.median(f(y) / max(f(x), 1) for x, y in pairs)  # noqa: E731
        sa, sb = sum(model(x) for x, _ in pairs), sum(model(y) for _, y in pairs)
        out.append(f"{kind}: {len(pairs)} kernels, model B/A median {statistics.median(r):.3f} "
                   f"({min(r):.3f}-{max(r):.3f}); FMA {med(lambda c: c['fma']):.3f}, ALU {med(lambda c: c['alu']):.3f}, "
                   f"issue {med(lambda c: c['issue']):.3f}; summed {sa} -> {sb} ({sb / sa:.3f})")
    return out


def fmt(c: collections.Counter) -> str:
    return (f"{c['total']:6d} total  {c['alu']:6d} ALU ({c['mov']} MOV)  {c['fma']:6d} FMA  {c['heavy']:5d} FMA-heavy"
            + (f"  {c['fp64']:4d} FP64" if c["fp64"] else ""))


def blocks_per_sm(regs: int, threads: int = 256) -> int:
    """Resident 256-thread blocks per SM on sm_90 (65536 registers, 64 warps; 8-register granules)."""
    return min(64 * 32 // threads, 65536 // (threads * math.ceil(max(regs, 1) / 8) * 8))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("probe", "tus", "cubins", "dirs"))
    ap.add_argument("dir", nargs="?", help="tus, cubins: the --keep-dir of `exps-codegen emit`; dirs: A; "
                    "probe: another .cu than bench/sass_probe.cu")
    ap.add_argument("out", nargs="?", help="cubins: where the .cubin files go; dirs: B")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--arch", default="90")
    a = ap.parse_args(argv)
    variants = a.variants.split(",")
    if a.what == "dirs":
        if not (a.dir and a.out):
            ap.error("dirs needs A and B")
        print("\n".join(compare_dirs(Path(a.dir), Path(a.out))))
        return 0
    if a.what == "cubins":
        if not (a.dir and a.out):
            ap.error("cubins needs DIR and OUT")
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        for tu in sorted(Path(a.dir).glob("*/src/*.cu")):
            if tu.name != "exps_xinv.cu":
                compile_cubin(tu, out / f"{Path(a.dir).name}_{tu.parent.parent.name}_{tu.stem}.cubin", [], a.arch)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        if a.what == "probe":
            src = Path(a.dir) if a.dir else REPO / "bench" / "sass_probe.cu"
            for v in variants:
                cub = Path(tmp) / f"{v}.cubin"
                compile_cubin(src, cub, VARIANTS[v], a.arch)
                for fn, c in sorted(pipes(cub, True).items()):
                    print(f"{v:5s} {fn:8s} {fmt(c)}")
            return 0
        if not a.dir:
            ap.error("tus needs DIR")
        tus = sorted(Path(a.dir).glob("*/src/*.cu"))
        tot = {v: collections.Counter() for v in variants}
        per = {v: {} for v in variants}
        for tu in tus:
            for v in variants:
                cub = Path(tmp) / f"{v}_{tu.stem}.cubin"
                regs, spills = registers(compile_cubin(tu, cub, VARIANTS[v], a.arch))
                for fn, c in pipes(cub, False).items():
                    per[v][(tu.stem, fn)] = (regs.get(fn, 0), c)
                    tot[v].update(c)
                    tot[v]["regs"] += regs.get(fn, 0)
                    tot[v]["spill"] += spills.get(fn, 0)
        base = variants[0]
        for key in sorted(per[base]):
            print(f"{key[0]} {key[1][-24:]}: " + " | ".join(
                f"{v} {per[v][key][0]:3d} regs {per[v][key][1]['total']:5d} ins" for v in variants))
        print(f"{len(per[base])} kernels in {len(tus)} TUs")
        for v in variants:
            print(f"{v:5s} {fmt(tot[v])}  registers summed {tot[v]['regs']}, spill stores {tot[v]['spill']} bytes")
        for v in variants[1:]:
            d = [per[v][k][0] - per[base][k][0] for k in per[base]]
            occ = [blocks_per_sm(per[v][k][0]) - blocks_per_sm(per[base][k][0]) for k in per[base]]
            print(f"{v} vs {base}: registers up in {sum(x > 0 for x in d)} kernels (at most +{max(d)}), down in "
                  f"{sum(x < 0 for x in d)} (at most {min(d)}); 256-thread blocks per SM fewer in "
                  f"{sum(x < 0 for x in occ)}, more in {sum(x > 0 for x in occ)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
