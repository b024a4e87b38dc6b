"""Trace-domain expression kernels, before vs after, from two `bench/exprs.py` runs of the same
round (same GPU, same inputs: same --seed and --rows).

    python3 bench/exprs_compare.py AFTER/exprs.json BEFORE/exprs.json > compare.md

Per launch kind and per AIR: the generated kernels' summed medians before and after, the speed-up,
and whether every launch was bit-identical (interpreter on all rows, oracle) on both sides.
"""
from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def cases(path: str) -> dict[tuple, dict]:
    out = {}
    for r in json.load(open(path))["results"]:
        for c in r.get("cases", []):
            out[(r["rel"], c["exp_id"], c["label"], c.get("stage_pos"))] = c
    return out


def table(head: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
                     + ["| " + " | ".join(r) + " |" for r in rows])


def main() -> int:
    after, before = cases(sys.argv[1]), cases(sys.argv[2])
    both = [k for k in after if k in before and after[k].get("gen_ms") and before[k].get("gen_ms")]
    ok = all(after[k].get("identical") and before[k].get("identical") for k in both)
    by_kind, by_air = defaultdict(lambda: [0.0, 0.0, 0]), defaultdict(lambda: [0.0, 0.0, 0])
    ratios = []
    for k in both:
        b, a = before[k]["gen_ms"], after[k]["gen_ms"]
        ratios.append(b / a)
        for d, key in ((by_kind, k[2]), (by_air, k[0].split("/")[-1])):
            d[key][0] += b
            d[key][1] += a
            d[key][2] += 1
    rows = lambda d: [[name, str(n), f"{b:.3f}", f"{a:.3f}", f"{b / a:.2f}x"]  # noqa: E731
                      for name, (b, a, n) in sorted(d.items())]
    print(table(["launch", "launches", "before ms", "after ms", "speed-up"], rows(by_kind)))
    print()
    print(table(["AIR", "launches", "before ms", "after ms", "speed-up"], rows(by_air)))
    print()
    print(f"{len(both)} launches on both sides; per launch before/after: median "
          f"{statistics.median(ratios):.2f}x, min {min(ratios):.2f}x, max {max(ratios):.2f}x; "
          f"bit-identical on both sides: {'yes' if ok else 'NO'}")
    return 0 if ok and both else 1


if __name__ == "__main__":
    sys.exit(main())
