"""What the column and scratch address arithmetic of the Q chunk kernels costs (issue #13): static
SASS instructions (sm_90, NOPs left out) of the Q kernels (`_q_c<i>_k`) of emitted TUs, compiled
three ways, host only (nvcc and cuobjdump):

* base:  as emitted: `X.cm[s] + ((uint64_t)c << X.lg) + row`, `scratch[k * wave + lo]`
* param: every column and scratch slot at a byte offset from one per-thread base, the offsets
         read from a constant table (`exps_off[]` in `__constant__` memory, standing in for
         offsets the launcher would compute once per launch and pass as kernel parameters)
* const: the domain size and the wave compiled in (2^22): the floor of any addressing scheme

    python3 bench/addr_insts.py BUILD/KERNEL/src/KERNEL_q0.cu [...]

(docs/BENCHMARKS.md "Session 17"; docs/DESIGN-column-offsets.md.)
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.sass_diff import functions  # noqa: E402

COL = re.compile(r"X\.(cm\[\d\]|cst) \+ \(\(uint64_t\)(\d+) << X\.lg\) \+ (row|EXPS_ROW\(-?\d+\))")
SCRATCH = re.compile(r"scratch\[(\d+) \* wave \+ lo\]")
TABLE = ("#ifdef __CUDA_ARCH__\n__constant__ uint64_t exps_off[1024];\n#else\n"
         "static uint64_t exps_off[1024];\n#endif\n")


def variant(src: str, kind: str) -> str:
    if kind == "base":
        return src
    if kind == "const":
        s = src.replace("X.lg", "22u").replace("X.mask", "((1ull << 22) - 1)")
        return re.sub(r"(\d+) \* wave \+ lo\]", r"\1 * (1ull << 22) + lo]", s)

    def col(m: re.Match) -> str:
        sec, c, r = m.group(1), int(m.group(2)), m.group(3)
        if sec == "cst":
            return f"((const uint64_t*)((const char*)X.cst + ((uint64_t)({r}) << 3) + exps_off[256 + {c}]))"
        return f"((const uint64_t*)((const char*)X.cm[1] + ((uint64_t)({r}) << 3) + exps_off[{int(sec[3]) * 64 + c}]))"
    s = COL.sub(col, src)
    s = SCRATCH.sub(r"(*(uint64_t*)((char*)scratch + (lo << 3) + exps_off[512 + \1]))", s)
    i = s.index("\n", s.index("#include"))
    return s[:i + 1] + TABLE + s[i + 1:]


def q_instructions(cu: str) -> int:
    d = os.path.dirname(cu)
    subprocess.run(["nvcc", "-cubin", "-O1", "-std=c++17", "-DGL64_PARTIALLY_REDUCED", "-arch=sm_90", cu,
                    "-o", cu + ".cubin"], check=True, cwd=d)
    return sum(1 for (_, name), body in functions(Path(cu + ".cubin")).items() if re.search(r"_q_c\d+_k", name)
               for line in body.splitlines() if re.search(r"/\*[0-9a-f]{4,}\*/ \S", line) and "NOP" not in line)


def main() -> int:
    print("| TU | base | param | const |")
    print("| --- | --- | --- | --- |")
    for src in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as w:
            for f in glob.glob(os.path.join(os.path.dirname(src), "*.cuh")) + \
                    glob.glob(os.path.join(os.path.dirname(src), "*.h")):
                shutil.copy(f, w)
            text = open(src).read()
            got = {}
            for kind in ("base", "param", "const"):
                p = os.path.join(w, f"{kind}.cu")
                with open(p, "w") as f:
                    f.write(variant(text, kind))
                got[kind] = q_instructions(p)
        b = got["base"]
        print(f"| {os.path.basename(src)} | {b} | {got['param']} ({got['param'] / b - 1:+.1%}) "
              f"| {got['const']} ({got['const'] / b - 1:+.1%}) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
