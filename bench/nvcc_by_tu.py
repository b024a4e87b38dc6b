"""nvcc CPU by kind of TU, from bench/nvcc_log.sh's log: a markdown table.
Usage: python3 bench/nvcc_by_tu.py LOG"""
from __future__ import annotations

import re
import sys
from collections import defaultdict

#: the TU kinds of a build (codegen/emit.py's file names), the first that matches
KINDS = [
    (r"_qprobe\.cu$|/probe\d*\.cu$", "tune probes"),
    (r"_q\d+_x\d+\.cu$", "a kernel's Q + expressions"),
    (r"_x\d+\.cu$", "expressions only"),
    (r"_q\d+\.cu$", "Q chunks only"),
    (r"exps_xinv\.cu$", "the generic inverse kernel"),
    (r"exps_prelude_probe\.cu$", "the device prelude's check"),
    (r"_abi\.cpp$", "launch tables (host)"),
    (r"exps_runtime\.cpp$", "the launcher (host)"),
]


def kind(args: str) -> str:
    srcs = re.findall(r"(\S+\.(?:cu|cpp))(?:\s|$)", args)
    if not srcs:
        words = args.split()
        return "links" if "-shared" in words else ("toolchain queries" if words[:1] in (["--version"], ["--list-gpu-arch"]) else "other")
    for pat, name in KINDS:
        if re.search(pat, srcs[-1]):
            return name
    return "other"


def main(path: str) -> None:
    cpu: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    with open(path) as f:
        for line in f:
            c, _wall, args = line.rstrip("\n").split(" ", 2)
            k = kind(args)
            cpu[k] += float(c)
            calls[k] += 1
    print("| nvcc calls | calls | CPU |\n| --- | --- | --- |")
    for k in sorted(cpu, key=lambda k: -cpu[k]):
        print(f"| {k} | {calls[k]} | {cpu[k]:.1f} s |")
    print(f"| **all** | {sum(calls.values())} | **{sum(cpu.values()):.1f} s** |")


if __name__ == "__main__":
    main(sys.argv[1])
