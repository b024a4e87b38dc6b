"""How often would the value path (docs/DESIGN-value-path.md) fall back on plausible inputs? (no GPU)

    python3 bench/fallback_rate.py

For every AIR: Q's words (numpy oracle, 1024 extended rows) with uniform zi and uniform scalars, and
  A) every committed column 0 (an all-zero instance), constants uniform;
  B) every committed column 0 and constants 0/1;
  C) stage-1 columns small ints / selectors, later stages uniform (a busy instance).
Counts the rows whose Q has a component (of out_dim) below EPS: the rows that would run the exact
program. (B is not a real extended domain: fixed columns there are low-degree extensions, not 0/1.)"""
import json
import sys
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from codegen.discover import discover
from codegen.model import load_air
from codegen.coverage import cover
from codegen.check import hostcheck, reference
EPS = np.uint64(0xFFFFFFFF); P = np.uint64(0xFFFFFFFF00000001)
def canon(w): return np.where(w >= P, w - P, w)
rng = np.random.default_rng(3)
rows = []
ROOT = Path(__file__).resolve().parents[1]
for pk in [ROOT / "provingkey-sample"] + sorted((ROOT.parent / "shared" / "pk").glob("*/provingKey")):
    seen = set()
    for p in discover(pk):
        if p.key in seen: continue
        seen.add(p.key)
        si, ei = load_air(p.starkinfo, p.expressions)
        cov = cover(si, ei)
        if cov.q is None: continue
        sij, eij = json.loads(p.starkinfo.read_text()), json.loads(p.expressions.read_text())
        n_ext = 1024
        buf = hostcheck.make_buffers(si, n_ext, 256, rng)
        for k in buf.scalars: buf.scalars[k][:] = rng.integers(1, 1 << 63, size=buf.scalars[k].size, dtype=np.uint64)
        buf.aux[buf.off_zi: buf.off_zi + n_ext] = rng.integers(1, 1 << 63, size=n_ext, dtype=np.uint64)
        out = []
        for case in "ABC":
            cols = hostcheck.stage_cols(si)
            for s, c in cols.items():
                o = buf.off_ext[s]; seg = buf.aux[o: o + c * n_ext]
                if case in "AB": seg[:] = 0
                else: seg[:] = rng.integers(0, 17, size=seg.size).astype(np.uint64) if s == 1 else rng.integers(1, 1 << 63, size=seg.size, dtype=np.uint64)
            if buf.const_ext.size:
                buf.const_ext[:] = rng.integers(0, 2, size=buf.const_ext.size).astype(np.uint64) if case == "B" else rng.integers(1, 1 << 63, size=buf.const_ext.size, dtype=np.uint64)
            q = reference.eval_q(sij, eij, buf.domain(si, True, n_ext)).reshape(3, n_ext)
            d = cov.q.out_dim
            small = (canon(q[:d]) < EPS).any(axis=0)
            out.append(int(small.sum()))
        rows.append((pk.parent.name if pk.name == "provingKey" else "sample", p.base, len(cov.q.ops), *out))
print("| key | AIR | Q ops | A: all zero, constants uniform | B: all zero, constants 0/1 | C: busy |")
print("| --- | --- | --- | --- | --- | --- |")
for r in rows: print("| " + " | ".join(map(str, r)) + " |")
