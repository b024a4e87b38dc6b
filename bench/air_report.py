#!/usr/bin/env python3
"""Per-AIR Q report (issue #13): ops before/after the IR passes, largest number of live words,
and, from a bench/run.py result file, the chunks/slots, registers and launches per exps_launch of
the build that was timed.

    python3 bench/air_report.py bench/data/before-after-h200-final.json provingkey-sample ../shared/pk/*/provingKey

Prints a markdown table. The IR figures are computed here (host); the GPU figures come from the
json (its `rel` field matches the AIRs found under the given keys).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from codegen.discover import discover  # noqa: E402
from codegen.coverage import cover  # noqa: E402
from codegen.model import ModelError, load_air  # noqa: E402
from codegen.passes import optimize  # noqa: E402
from codegen.plan import max_live  # noqa: E402


def main(argv: list[str]) -> int:
    res = {r["rel"]: r for r in json.loads(Path(argv[0]).read_text())["results"]}
    head = ["AIR", "Q ops", "after passes (CSE/dead)", "max live words before/after", "chunks/slots",
            "regs per chunk kernel", "launches at 2^22"]
    print("| " + " | ".join(head) + " |\n| " + " | ".join("---" for _ in head) + " |")
    for pk in argv[1:]:
        for p in discover(pk):
            r = res.get(p.rel)
            if r is None:
                continue
            try:
                si, ei = load_air(p.starkinfo, p.expressions)
            except ModelError:
                continue
            cov = cover(si, ei)
            if cov.q is None:
                continue
            o, st = optimize(cov.q)
            print(f"| {r['air']} | {st.ops_in} | {st.ops_out} ({st.cse_removed}/{st.dce_removed}) | "
                  f"{max_live(cov.q)}/{max_live(o)} | {r.get('chunks_slots', '?')} | {r.get('regs', '?')} | "
                  f"{r.get('launches', '?')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
