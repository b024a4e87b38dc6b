#!/usr/bin/env python3
"""SASS of every kernel of two builds, function by function: a change of the build or launch path
must leave the device code of every kernel as it was (no GPU needed).

    python3 bench/sass_diff.py [--names] BEFORE_DIR AFTER_DIR

Every `*.exps.so` under AFTER_DIR is matched to the one at the same relative path under BEFORE_DIR;
`cuobjdump -sass` of each is cut into functions (`Function : <name>` to the next), per arch, and
the instruction text compared (addresses and encodings included; runs of blanks count as one). Exit 1 on any difference or a
function present on one side only. `--names`: a kernel is matched by its kind and number only
(`_q_c<c>_k`, `_x_e<expId>_k`, whatever precedes it: two trees that name kernels differently, e.g.
by key or by a digest of their content), in function names and in the instruction text.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path


_KERNEL = re.compile(r"_Z\d+\w*?(_q_c\d+|_x_e\d+)_k(?=PK11StepsParams)")


def unnamed(text: str) -> str:
    """`text` with every chunk / expression kernel's name reduced to its kind and number."""
    return _KERNEL.sub(r"KERNEL\1_k", text)


def functions(so: Path, names: bool = False) -> dict[tuple[str, str], str]:
    """{(arch, function name): SASS text} of a .so (cuobjdump -sass); trailing blank lines are not
    the function's (the last function of a fatbin is followed by one more when another follows)."""
    out = subprocess.run([shutil.which("cuobjdump") or "cuobjdump", "-sass", str(so)], capture_output=True,
                         text=True, check=True).stdout
    out = unnamed(out) if names else out
    funcs: dict[tuple[str, str], str] = {}
    arch, name, body = "", None, []
    for line in out.splitlines():
        if m := re.match(r"\s*arch = (sm_\d+)", line):
            arch = m[1]
        if m := re.match(r"\s*Function : (\S+)", line):
            if name is not None:
                funcs[(arch, name)] = "\n".join(body).rstrip()
            name, body = m[1], []
            continue
        if name is not None:
            if line.startswith("Fatbin ") or line.startswith("====="):
                funcs[(arch, name)] = "\n".join(body).rstrip()
                name, body = None, []
            else:   # runs of blanks collapsed: cuobjdump pads columns to its cubin's widest line
                body.append(" ".join(line.split()))
    if name is not None:
        funcs[(arch, name)] = "\n".join(body).rstrip()
    return funcs


def main() -> int:
    args = sys.argv[1:]
    names = "--names" in args
    before, after = (Path(a) for a in args if a != "--names")
    bad = n_so = n_fn = n_instr = 0
    for so in sorted(after.rglob("*.exps.so")):
        rel = so.relative_to(after)
        old = before / rel
        if not old.exists():
            print(f"{rel}: no .so before")
            bad += 1
            continue
        a, b = functions(old, names), functions(so, names)
        n_so += 1
        diff = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
        only = sorted(a.keys() ^ b.keys())
        n_fn += len(b)
        n_instr += sum(len(re.findall(r"^\s*/\*[0-9a-f]{4,}\*/\s+\S", t, re.M)) for t in b.values())
        if diff or only:
            bad += 1
            print(f"{rel}: {len(diff)} functions differ {diff[:3]}, {len(only)} on one side only {only[:3]}")
    print(f"{n_so} .so, {n_fn} functions, {n_instr} SASS instructions: "
          f"{'all identical' if not bad else f'{bad} .so differ'}")
    return 1 if bad or not n_so else 0


if __name__ == "__main__":
    sys.exit(main())
