#!/usr/bin/env python3
"""SASS instructions by integer pipe, registers and spills of the field ops or of an emitted key's
kernels (host only: nvcc and cuobjdump, no GPU).

    python3 bench/sass_pipes.py probe             # bench/sass_probe.cu: k_add, k_sub, k_mul, k_mul3, k_mul3v, k_accmul
    python3 bench/sass_pipes.py probe FILE.cu     # the one-op kernels of another .cu (FP64 counted apart)
    python3 bench/sass_pipes.py tus DIR           # every DIR/*/src/*.cu (`exps-codegen emit PK
                                                  #   --keep-dir DIR`): per kernel and in total

Compiles with nvcc -cubin -arch=sm_XX -O3 (-Xptxas=-v for the registers) and reads cuobjdump -sass.
Pipes as on the H100/H200: IMAD.WIDE and IMAD.HI the FMA-heavy half of the FMA pipe, other IMAD*
(IMAD.X, IMAD.MOV, IMAD.IADD, ...) the FMA pipe, the rest (IADD3, SEL, SHF, LOP3, MOV, ...) ALU.
`probe` leaves out each kernel's loads, stores, constant loads and address arithmetic, so what it
prints is the op's own count (the figures templates/gen_common.cuh quotes); `tus` counts whole
kernels. A count is a static figure, not a timing: forms with fewer instructions on the busier pipe
have run no faster in real kernels (docs/BENCHMARKS.md, "Levers tried and rejected").
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_INS = re.compile(r"\s+/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)(.*)")
_OVERHEAD = re.compile(r"^(LDC|S2R|ULDC|LDG|STG|EXIT|BRA)|^IMAD\.WIDE$")
_FP64 = re.compile(r"^D(FMA|ADD|MUL|SETP|MNMX)")


def compile_cubin(src: Path, out: Path, flags: list[str], arch: str) -> str:
    argv = ["nvcc", "-cubin", f"-arch=sm_{arch}", "-O3", "-std=c++17", "-DGL64_PARTIALLY_REDUCED",
            "-Xptxas=-v", *flags, "-I", str(REPO / "templates"), str(src), "-o", str(out)]
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


def fmt(c: collections.Counter) -> str:
    return (f"{c['total']:6d} total  {c['alu']:6d} ALU ({c['mov']} MOV)  {c['fma']:6d} FMA  {c['heavy']:5d} FMA-heavy"
            + (f"  {c['fp64']:4d} FP64" if c["fp64"] else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("probe", "tus"))
    ap.add_argument("dir", nargs="?", help="tus: the --keep-dir of `exps-codegen emit`; "
                    "probe: another .cu than bench/sass_probe.cu")
    ap.add_argument("--arch", default="90")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if a.what == "probe":
            src = Path(a.dir) if a.dir else REPO / "bench" / "sass_probe.cu"
            cub = Path(tmp) / "probe.cubin"
            compile_cubin(src, cub, [], a.arch)
            for fn, c in sorted(pipes(cub, True).items()):
                print(f"{fn:8s} {fmt(c)}")
            return 0
        if not a.dir:
            ap.error("tus needs DIR")
        tus = sorted(Path(a.dir).glob("*/src/*.cu"))
        tot: collections.Counter = collections.Counter()
        n = 0
        for tu in tus:
            cub = Path(tmp) / f"{tu.stem}.cubin"
            regs, spills = registers(compile_cubin(tu, cub, [], a.arch))
            for fn, c in sorted(pipes(cub, False).items()):
                print(f"{tu.stem} {fn[-24:]}: {regs.get(fn, 0):3d} regs, {spills.get(fn, 0)} B spilled  {fmt(c)}")
                tot.update(c)
                tot["regs"] += regs.get(fn, 0)
                tot["spill"] += spills.get(fn, 0)
                n += 1
        print(f"{n} kernels in {len(tus)} TUs")
        print(f"{fmt(tot)}  registers summed {tot['regs']}, spill stores {tot['spill']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
