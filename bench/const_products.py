#!/usr/bin/env python3
"""Base-field products of each Q (after the IR passes) by the numbers p - 1, 1 and 0, the ones
`emit.value_op` runs as a negation or a copy on the value path (p - 1, 1), out of all its base
products (3x3 = 6, 3x1 = 3, 1x1 = 1, as the anchors count them).

    python3 bench/const_products.py provingkey-sample ../shared/pk/*/provingKey
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from codegen.build.autotune import MULS  # noqa: E402
from codegen.coverage import cover  # noqa: E402
from codegen.discover import discover, kernels  # noqa: E402
from codegen.emit import GL_P, value_op  # noqa: E402
from codegen.ir import Leaf  # noqa: E402
from codegen.model import load_air  # noqa: E402
from codegen.passes import optimize  # noqa: E402


def main(keys: list[str]) -> int:
    print("| AIR | base products | by p - 1 | by 1 | by 0 | run as no product (value_op) |")
    print("| --- | --- | --- | --- | --- | --- |")
    tot = [0] * 5
    for pk in keys:
        for key, ps in sorted(kernels(discover(Path(pk))).items()):
            si, ei = load_air(ps[0].starkinfo, ps[0].expressions)
            cov = cover(si, ei)
            if cov.q is None:
                continue
            q, _ = optimize(cov.q)
            row = [0] * 5
            for op in q.ops:
                w = MULS.get((op.arith, op.shape), 0)
                row[0] += w
                nums = [a.value for a in op.args() if isinstance(a, Leaf) and a.kind == "number"]
                if w and nums:
                    for k, v in ((1, GL_P - 1), (2, 1), (3, 0)):
                        row[k] += w * (v in nums)
                row[4] += w * (w > 0 and value_op(op).arith != "mul")
            tot = [a + b for a, b in zip(tot, row)]
            print(f"| {Path(ps[0].starkinfo).name.removesuffix('.starkinfo.json')} | " + " | ".join(map(str, row)) + " |")
    print("| all | " + " | ".join(map(str, tot)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["provingkey-sample"]))
