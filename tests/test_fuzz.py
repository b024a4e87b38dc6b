"""Fuzzing: hostile and broken proving-key JSON and file names.

The real JSON of provingkey-sample/ and ../shared/pk (when present) is mutated by hypothesis (fields
deleted or retyped, boundary / huge / negative integers, hostile strings with C-injection markers,
unknown ops and types, non-SSA code, changed dims, openings, boundaries, literals, shuffled,
duplicated and truncated lists, deep nesting, huge values ...) and every mutated AIR runs the
generator's stages in-process: `model.parse_starkinfo / parse_expressionsinfo` -> `kernel.cover`
-> `plan.plan` (one kernel and a small chunk) -> `emit.render` (also from the coverage as the build
stores it in ir.json). Properties:

* the only exception is `ModelError`, whose message names the file and a JSON path that exists in the
  mutated document (for "missing field": its parent does), on one printable line;
* a kernel's C text holds no injected string: it is ASCII, every identifier comes from the templates
  or emit.py (with numbers normalized), its string literals are the baseline's, and none of the
  hostile markers appear — only validated integers vary;
* for every `EXPS_FUZZ_HOST_EVERY`-th input that gives a kernel, the TUs compile with g++ (no
  warnings) and `hostcheck.check_kernel` finds zero mismatches against the numpy oracle, i.e. the
  kernel is right for whatever valid input survived the mutation.

Discovery is fuzzed on a temporary key with hostile file and directory names and symlinks leaving
the key; `load_json` on hostile bytes. The slow test runs >= 10,000 mutated inputs and prints (and,
with EXPS_FUZZ_REPORT=path, writes) the counts quoted in docs/RELIABILITY.md.

Knobs: EXPS_FUZZ_EXAMPLES (default 300), EXPS_FUZZ_HOST_EVERY (default 20; slow test: 50),
EXPS_FUZZ_SLOW_EXAMPLES (default 10000), EXPS_FUZZ_REPORT; pytest --hypothesis-seed=N.
"""
from __future__ import annotations

import ast
import collections
import functools
import json
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codegen import emit, model, plan
from codegen.check import hostcheck
from codegen import coverage as kernel
from codegen.check import reference
from codegen.build.cache import atomic_write
from codegen.discover import discover
from codegen.model import ModelError
from fuzzkit import MARKERS, ROOT, SAMPLE, Fuzz, R, _nested, corpus, update

TEMPLATES = ROOT / "templates"
TINY = SAMPLE / "synth" / "Basic" / "airs" / "Tiny" / "air"

EXAMPLES = int(os.environ.get("EXPS_FUZZ_EXAMPLES", "300"))
HOST_EVERY = int(os.environ.get("EXPS_FUZZ_HOST_EVERY", "20"))
SLOW_EXAMPLES = int(os.environ.get("EXPS_FUZZ_SLOW_EXAMPLES", "10000"))
SLOW_HOST_EVERY = int(os.environ.get("EXPS_FUZZ_HOST_EVERY", "50"))

KEY = "fz"
HASH = "0" * 64
SI_FILE = "fuzz/Air.starkinfo.json"
EI_FILE = "fuzz/Air.expressionsinfo.json"
#: host check only when the buffers stay small and the oracle fast
HOST_MAX_WORDS = 1 << 23
HOST_MAX_Q_OPS = 700

FUZZ_SETTINGS = dict(deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example,
    HealthCheck.function_scoped_fixture])

# ============================================================================ C text checks
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STRING_LIT = re.compile(r'"(?:[^"\\\n]|\\.)*"')
#: a kernel's name (emit.kernel_name): a digest of its content, never text of the input
KERNEL_NAME = r"k[0-9a-f]{16}_(?:q_c|x_e)\d+"
#: a kernel symbol of the launch table (emit.kernel_symbol): its length prefix, the kernel's name
KERNEL_SYMBOL = re.compile(rf'"_Z(\d+)({KERNEL_NAME}_k[ib]?|exps_x_inv_k)(?:{emit.Q_PARAMS}|{emit.X_PARAMS}|{emit.XINV_PARAMS})"')


def _norm(tok: str) -> str:
    return re.sub(r"\d+", "#", tok)


@functools.cache
def c_vocabulary() -> frozenset[str]:
    """Identifiers the emitted C may contain: those of the templates and of emit.py (digits
    normalized), and the kernel key."""
    text = "".join(p.read_text() for p in sorted(TEMPLATES.iterdir()) if p.is_file())
    text = re.sub(r"\{\{-?\s*key\s*-?\}\}", KEY, text)
    text = re.sub(r"\{\{.*?\}\}", "0", text)              # other substitutions are numbers
    text += (ROOT / "codegen" / "emit.py").read_text()
    return frozenset(_norm(t) for t in IDENT.findall(text)) | {KEY}


@functools.cache
def template_non_ascii() -> frozenset[str]:
    """Non-ASCII characters of the templates' own text (comments such as 'spec §5')."""
    return frozenset(c for p in TEMPLATES.iterdir() if p.is_file() for c in p.read_text() if not c.isascii())


@functools.cache
def baseline_strings() -> frozenset[str]:
    """String literals of the unmutated corpus' kernels."""
    out: set[str] = set()
    for a in corpus():
        si = model.parse_starkinfo(a.si, SI_FILE)
        cov = kernel.cover(si, model.parse_expressionsinfo(a.ei, EI_FILE, si))
        for chunk in (0, 3) if cov.q is not None else ():
            for text in emit.render(emit.KernelSource(KEY, cov.q, plan.plan(cov.q, chunk), cov.exprs, HASH)).values():
                out.update(STRING_LIT.findall(text))
    return frozenset(out)


def check_c(files: dict[str, str]) -> None:
    vocab, strings = c_vocabulary(), baseline_strings()
    for name, text in files.items():
        # a device TU is one part or consecutive parts joined (emit.pack: e.g. <key>_q0_x0.cu), or
        # the generic inverse kernel's (exps_xinv.cu, alone); and the launch table
        assert re.fullmatch(rf"{KEY}_(q\d+|x\d+)(_(q\d+|x\d+))*\.cu|exps_xinv\.cu|{KEY}_abi\.cpp", name), name
        assert {c for c in text if not c.isascii()} <= template_non_ascii(), f"{name}: non-ASCII text"
        assert "\x00" not in text and "\r" not in text, name
        for m in MARKERS:
            assert m not in text, f"{name}: hostile marker {m!r} reached the C text"
        # identifiers outside comments must come from the templates / emit.py
        code = re.sub(r"//[^\n]*", "", text)
        for lit in STRING_LIT.findall(code):
            m = KERNEL_SYMBOL.fullmatch(lit)
            if m and int(m[1]) == len(m[2]):      # a kernel's symbol in the launch table
                continue
            assert lit in strings, f"{name}: unexpected string literal {lit[:80]}"
        code = STRING_LIT.sub('""', code)
        bad = {t for t in IDENT.findall(code) if _norm(t) not in vocab and not re.fullmatch(r"\d+\w*", t)
               and not re.fullmatch(rf"{KERNEL_NAME}(?:_k|_kb|_ki|_h|_prog|_res)?", t)}
        # hex digits of numbers such as 0x... and suffixes like 'ull' follow digits: drop those tokens
        bad = {t for t in bad if not re.search(rf"\d{re.escape(t)}", code)}
        assert not bad, f"{name}: identifiers not from the templates: {sorted(bad)[:5]}"


# ============================================================================ ModelError checks
_TOKEN = re.compile(r"""\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")(\.\.\.)?\]""")


def _path_tokens(path: str) -> list:
    toks, pos = [], 0
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        assert m, f"unparsable JSON path {path!r} at {pos}"
        if m.group(1) is not None:
            toks.append(m.group(1))
        elif m.group(2) is not None:
            toks.append(int(m.group(2)))
        else:
            key = ast.literal_eval(m.group(3))
            toks.append((key, "prefix") if m.group(4) else key)
        pos = m.end()
    return toks


def _step(node: Any, tok) -> tuple[bool, Any]:
    if isinstance(tok, int):
        if isinstance(node, list) and 0 <= tok < len(node):
            return True, node[tok]
        return False, None
    if not isinstance(node, dict):
        return False, None
    if isinstance(tok, tuple):
        hits = [k for k in node if isinstance(k, str) and k.startswith(tok[0])]
        return (True, node[hits[0]]) if hits else (False, None)
    return (True, node[tok]) if tok in node else (False, None)


def check_model_error(e: ModelError, docs: dict[str, Any]) -> None:
    msg = str(e)
    assert e.file in docs, f"ModelError names an unknown file: {msg[:200]}"
    assert msg.startswith(f"{e.file}: "), msg[:200]
    assert e.path, f"ModelError without a JSON path: {msg[:200]}"
    assert msg.isprintable() and len(msg) < 600, f"ModelError message is not one short line: {msg[:200]!r}"
    node, toks = docs[e.file], _path_tokens(e.path)
    for i, tok in enumerate(toks):
        ok, nxt = _step(node, tok)
        if not ok:
            assert i == len(toks) - 1 and e.msg == "missing field", \
                f"JSON path {e.path} does not exist in the document ({msg[:200]})"
            return
        node = nxt


# ============================================================================ the pipeline
@dataclass
class Stats:
    inputs: int = 0
    model_error: int = 0
    air_skip: int = 0
    kernel: int = 0
    renders: int = 0
    expr_skips: int = 0
    host_checked: int = 0
    host_words: int = 0
    host_too_big: int = 0
    oracle_refused: int = 0
    mutations: collections.Counter = field(default_factory=collections.Counter)
    error_files: collections.Counter = field(default_factory=collections.Counter)
    skip_reasons: collections.Counter = field(default_factory=collections.Counter)
    oracle_reasons: collections.Counter = field(default_factory=collections.Counter)
    seconds: float = 0.0

    def to_json(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if not isinstance(v, collections.Counter)}
        d.update({k: dict(v.most_common()) for k, v in self.__dict__.items() if isinstance(v, collections.Counter)})
        d["tracebacks"] = 0      # any other exception fails the test before the counts are printed
        return d


def _reason_class(s: str) -> str:
    s = s.replace(SI_FILE, "<si>").replace(EI_FILE, "<ei>")
    s = re.sub(r"\[\d+\]", "[N]", s)
    return re.sub(r"-?\d+", "N", s)[:110]


def _host_words(si: model.StarkInfo) -> int:
    n_ext = min(max(1 << si.n_bits_ext, 1024), 1 << 13)
    n = min(max(1 << si.n_bits, 64), 1 << 13)
    cols = sum(hostcheck.stage_cols(si).values())
    scal = si.n_publics + 3 * (si.n_challenges + si.n_evals + len(si.airvalue_stages)
                               + len(si.airgroupvalue_stages) + len(si.proofvalue_stages))
    return (cols + si.n_constants) * (n_ext + n) + n_ext + scal


def host_check(si: model.StarkInfo, si_doc: dict, ei_doc: dict, cov: kernel.Coverage, opc: int, seed: int,
               stats: Stats, key: str = KEY) -> None:
    """The rendered TUs compile with g++ (no warnings) and the kernel matches the oracle.

    Only the oracle's documented refusals (`reference.OracleRefusal`, raised by the oracle itself
    for a valid input it does not model) count as "not comparable"; any other exception -- from
    the oracle, the harness, the host build or the ctypes call -- fails the test."""
    if _host_words(si) > HOST_MAX_WORDS or cov.q_ops > HOST_MAX_Q_OPS:
        stats.host_too_big += 1
        return
    ks = hostcheck.kernel_source(key, cov, opc, HASH)
    with tempfile.TemporaryDirectory(prefix="exps-fuzz-") as d:
        lib = hostcheck._load(hostcheck.build_host_library(emit.render(ks), Path(d)))
        try:
            res = hostcheck.check_kernel(si, si_doc, ei_doc, ks, lib, seed=seed)
        except reference.OracleRefusal as e:
            stats.oracle_refused += 1
            stats.oracle_reasons[f"{type(e).__name__}: {_reason_class(str(e))}"] += 1
            return
    assert res.mismatches == [], res.mismatches[:3]
    assert res.q_words > 0 and res.expr_checks == 13 * len(ks.exprs), (res.q_words, res.expr_checks)
    stats.host_checked += 1
    stats.host_words += res.q_words + res.expr_words


def run_pipeline(si_doc: Any, ei_doc: Any, stats: Stats, opc: int, host: bool, seed: int = 1) -> str:
    """model -> cover -> plan -> render of one (mutated) AIR; returns the outcome."""
    stats.inputs += 1
    docs = {SI_FILE: si_doc, EI_FILE: ei_doc}
    try:
        si = model.parse_starkinfo(si_doc, SI_FILE)
        ei = model.parse_expressionsinfo(ei_doc, EI_FILE, si)
    except ModelError as e:
        check_model_error(e, docs)
        stats.model_error += 1
        stats.error_files["starkinfo" if e.file == SI_FILE else "expressionsinfo"] += 1
        return "model_error"
    cov = kernel.cover(si, ei)
    for s in [cov.air_skip] + [x.reason for x in cov.skipped_exprs]:     # ir.json, logs, `status`
        assert isinstance(s, str) and s.isprintable() and len(s) < 600, s[:200]
    if cov.air_skip:
        stats.air_skip += 1
        stats.skip_reasons[_reason_class(cov.air_skip)] += 1
        return "air_skip"
    stats.kernel += 1
    stats.expr_skips += len(cov.skipped_exprs)
    # the build stores the coverage in ir.json and emits from it: render both ways, same text
    stored = kernel.coverage_from_json(si, json.loads(json.dumps(kernel.coverage_to_json(cov))))
    for chunk in sorted({0, opc}):
        ks = emit.KernelSource(KEY, cov.q, plan.plan(cov.q, chunk), cov.exprs, HASH)
        files = emit.render(ks)
        check_c(files)
        assert emit.render(emit.KernelSource(KEY, stored.q, plan.plan(stored.q, chunk), stored.exprs, HASH)) == files
        stats.renders += 1
    if host:        # alternately one kernel and the small chunking (g++ is required: no silent skip)
        host_check(si, si_doc, ei_doc, cov, opc if stats.host_checked % 2 else 0, seed, stats)
    return "kernel"


def fuzz_one(data, stats: Stats, host_every: int) -> None:
    r = R(data)
    f = Fuzz(r, r.pick(corpus()))
    f.mutate()
    stats.mutations.update(f.labels)
    opc = r.pick((1, 2, 3, 7, 16))
    host = host_every > 0 and (stats.host_checked == 0 or (stats.kernel + 1) % host_every == 0)
    run_pipeline(f.docs["si"], f.docs["ei"], stats, opc, host, seed=r.int(0, 1 << 16))


def _run_fuzz(n: int, host_every: int, **extra) -> Stats:
    stats = Stats()
    t0 = time.perf_counter()

    @settings(max_examples=n, **FUZZ_SETTINGS, **extra)
    @given(data=st.data())
    def run(data):
        fuzz_one(data, stats, host_every)

    run()
    stats.seconds = round(time.perf_counter() - t0, 1)
    return stats


# ============================================================================ tests: JSON
def test_corpus() -> None:
    airs = corpus()
    assert len(airs) >= 4
    names = {a.name.split("/")[-1] for a in airs}
    assert {"Tiny.starkinfo.json", "Medium.starkinfo.json", "Skipped.starkinfo.json"} <= names


def test_unmutated_corpus_passes() -> None:
    """The properties hold for the unmutated AIRs (the check itself accepts good kernels)."""
    stats = Stats()
    for a in corpus():
        out = run_pipeline(a.si, a.ei, stats, 7, host=False)
        assert out == ("air_skip" if "Skipped" in a.name else "kernel"), a.name


def test_check_c_catches_injection() -> None:
    """The C-text check is not vacuous: a string smuggled into a TU is caught."""
    a = corpus()[0]
    si = model.parse_starkinfo(a.si, SI_FILE)
    cov = kernel.cover(si, model.parse_expressionsinfo(a.ei, EI_FILE, si))
    files = emit.render(emit.KernelSource(KEY, cov.q, plan.plan(cov.q, 0), cov.exprs, HASH))
    check_c(files)
    name = sorted(files)[0]
    for evil in ('system("x");', "evil_call();", "/* PWNED */", 'const char* s = "x";'):
        with pytest.raises(AssertionError):
            check_c({**files, name: files[name].replace("#include", evil + "\n#include", 1)})


def test_check_model_error_catches_bad_paths() -> None:
    doc = {"a": [{"b": 1}]}
    check_model_error(ModelError(SI_FILE, "a[0].b", "integer out of range"), {SI_FILE: doc})
    check_model_error(ModelError(SI_FILE, "a[0].c", "missing field"), {SI_FILE: doc})
    for bad in (ModelError(SI_FILE, "a[1].b", "x"), ModelError(SI_FILE, "", "x"),
                ModelError("other.json", "a", "x"), ModelError(SI_FILE, "a[0].b", "two\nlines")):
        with pytest.raises(AssertionError):
            check_model_error(bad, {SI_FILE: doc})


def test_fuzz_json() -> None:
    """EXPS_FUZZ_EXAMPLES mutated AIRs (default 300): only ModelError, clean C, host-checked subset."""
    stats = _run_fuzz(EXAMPLES, HOST_EVERY)
    print(json.dumps(stats.to_json(), indent=1))
    assert stats.inputs >= EXAMPLES
    assert stats.model_error > 0 and stats.kernel > 0
    assert stats.host_checked > 0, stats.to_json()
    assert stats.host_checked + stats.oracle_refused + stats.host_too_big >= stats.kernel // HOST_EVERY - 1


@pytest.mark.slow
def test_fuzz_json_10k() -> None:
    """>= 10,000 mutated AIRs (the figure of docs/RELIABILITY.md); deterministic (derandomize)."""
    stats = _run_fuzz(SLOW_EXAMPLES, SLOW_HOST_EVERY, derandomize=True, database=None)
    report = stats.to_json()
    print(json.dumps(report, indent=1))
    if os.environ.get("EXPS_FUZZ_REPORT"):
        Path(os.environ["EXPS_FUZZ_REPORT"]).write_text(json.dumps(report, indent=1) + "\n")
    assert stats.inputs >= SLOW_EXAMPLES
    assert stats.model_error + stats.air_skip + stats.kernel == stats.inputs
    assert stats.host_checked > 0, report


# ------------------------------------------------------------ every field deleted or replaced
def _first_fields(part: str) -> list[tuple[str, Any, str, tuple, str]]:
    """The fields of one part of the corpus' AIRs, each at its first occurrence: (label, AIR, "si" or
    "ei", the path of the object holding it, the field). Parts: "code" (expressionsCode: each field of
    an operand by operand type, of a dest by dest type, of a step, of an expression), "starkinfo"
    (top level, and one level down: an object's fields and those of a list's first element) and
    "hints" (each field of a hint value, by hint name and value op)."""
    first: dict[tuple, tuple] = {}
    for a in corpus():
        if part == "code":
            for i, e in enumerate(a.ei["expressionsCode"]):
                for f in e:
                    first.setdefault(("expr", f), (a, "ei", ("expressionsCode", i)))
                for k, st in enumerate(e.get("code", [])):
                    at = ("expressionsCode", i, "code", k)
                    for f in st:
                        first.setdefault(("step", f), (a, "ei", at))
                    for f in st["dest"]:
                        first.setdefault(("dest", st["dest"]["type"], f), (a, "ei", at + ("dest",)))
                    for j, src in enumerate(st["src"]):
                        for f in src:
                            first.setdefault(("src", src["type"], f), (a, "ei", at + ("src", j)))
        elif part == "starkinfo":
            for f, v in a.si.items():
                first.setdefault((f,), (a, "si", ()))
                if isinstance(v, dict):
                    for g in v:
                        first.setdefault((f, g), (a, "si", (f,)))
                elif isinstance(v, list) and v and isinstance(v[0], dict):
                    for g in v[0]:
                        first.setdefault((f, "[0]", g), (a, "si", (f, 0)))
        else:
            for h, hint in enumerate(a.ei.get("hintsInfo", [])):
                for i, fld in enumerate(hint.get("fields", [])):
                    for j, val in enumerate(fld.get("values", [])):
                        for f in val if isinstance(val, dict) else ():
                            first.setdefault((hint["name"], str(val.get("op")), f),
                                             (a, "ei", ("hintsInfo", h, "fields", i, "values", j)))
    return [("/".join(label), a, doc, at, label[-1]) for label, (a, doc, at) in sorted(first.items())]


def _outcomes(part: str) -> tuple[Stats, dict[str, str]]:
    """run_pipeline (host check on) of each field of `part` deleted: {label: outcome}."""
    stats, outcome = Stats(), {}
    for label, a, doc, at, f in _first_fields(part):
        docs = {"si": a.si, "ei": a.ei}
        docs[doc] = update(docs[doc], at, lambda n, f=f: {k: v for k, v in n.items() if k != f})
        outcome[label] = run_pipeline(docs["si"], docs["ei"], stats, 3, host=True)
    return stats, outcome


@pytest.mark.requires("pk", "gxx")
def test_every_deleted_code_field_is_refused_or_checked_against_the_oracle() -> None:
    """Exhaustive where the fuzzing samples (a field whose deletion passes the model can crash the
    oracle, and a sampled host-check rate finds it only by chance): every
    field of an operand, a dest, a step or an expression of the corpus' code (63), deleted. Each
    input ends in a ModelError naming that field's path, or its kernel is host-compiled and matches
    the oracle. The fields the model ignores are pinned, so that a change of what it accepts shows."""
    stats, outcome = _outcomes("code")
    accepted = sorted(k for k, v in outcome.items() if v == "kernel")
    assert accepted == sorted([
        "dest/q/id", "dest/tmp/prime", "expr/dest", "expr/line", "expr/stage", "expr/tmpUsed",
        "src/airgroupvalue/stage", "src/airvalue/stage", "src/challenge/stage", "src/challenge/stageId",
        "src/cm/expId", "src/proofvalue/stage", "src/tmp/expId", "src/tmp/prime", "src/xDivXSubXi/opening"]), accepted
    assert stats.host_checked == len(accepted) and stats.oracle_refused == 0
    assert {k for k, v in outcome.items() if v == "model_error"} >= {"src/number/dim", "src/Zi/dim", "src/cm/dim",
                                                                     "src/number/value", "src/cm/prime", "dest/tmp/dim"}


@pytest.mark.requires("pk", "gxx")
def test_every_deleted_starkinfo_field_is_refused_or_checked_against_the_oracle() -> None:
    """The same for the starkinfo (78 fields on the corpus): a ModelError, or a kernel host-checked
    against the oracle; the fields the kernels depend on are refused."""
    stats, outcome = _outcomes("starkinfo")
    assert stats.host_checked == sum(v == "kernel" for v in outcome.values()) > 0 and stats.oracle_refused == 0
    assert {k for k, v in outcome.items() if v == "model_error"} == {
        "airId", "airValuesMap/[0]/stage", "airgroupId", "airgroupValuesMap/[0]/stage", "boundaries",
        "boundaries/[0]/name", "cExpId", "challengesMap", "cmPolsMap", "cmPolsMap/[0]/dim", "cmPolsMap/[0]/stage",
        "cmPolsMap/[0]/stagePos", "evMap", "mapSectionsN", "nConstants", "nStages", "openingPoints",
        "proofValuesMap/[0]/stage", "qDim", "starkStruct", "starkStruct/nBits", "starkStruct/nBitsExt"}


@pytest.mark.requires("pk", "gxx")
def test_every_deleted_hint_field_is_refused_or_checked_against_the_oracle() -> None:
    """The same for the hints (which expressions the prover evaluates and with which numerator dim;
    121 fields on the corpus): a ModelError, or a kernel host-checked against the oracle."""
    stats, outcome = _outcomes("hints")
    assert stats.host_checked == sum(v == "kernel" for v in outcome.values()) > 100 and stats.oracle_refused == 0
    assert {k for k, v in outcome.items() if v == "model_error"} == {
        "gprod_col/number/op", "gprod_col/tmp/id", "gprod_col/tmp/op", "gsum_col/tmp/id", "gsum_member_data/tmp/id",
        "im_col/number/op", "im_col/tmp/id", "im_col/tmp/op"}


#: what each field is set to in turn by the slow sweep: boundary integers, field edges, wrong types
ALTERNATES = (0, 1, 2, 3, -1, 7, 64, 0xFFFFFFFF00000000, 0xFFFFFFFF00000001, (1 << 64) - 1, 1 << 64, "3", None,
              [], {}, True, 1.5, [0], ["everyRow"])


@pytest.mark.slow
@pytest.mark.requires("pk", "gxx")
def test_every_field_set_to_each_alternate_value() -> None:
    """Every field of the three parts above set in turn to each of ALTERNATES (4,978
    inputs, 1,568 ModelErrors, 3,385 kernels host-checked, 945 M words): only
    ModelErrors, clean C and kernels that match the oracle (run_pipeline's properties); any other
    exception fails."""
    stats = Stats()
    for part in ("code", "starkinfo", "hints"):
        for label, a, doc, at, f in _first_fields(part):
            for alt in ALTERNATES:
                docs = {"si": a.si, "ei": a.ei}
                docs[doc] = update(docs[doc], at + (f,), lambda _v, alt=alt: alt)
                run_pipeline(docs["si"], docs["ei"], stats, 3, host=True)
    print(json.dumps(stats.to_json(), indent=1))
    assert stats.inputs == stats.model_error + stats.air_skip + stats.kernel
    assert stats.host_checked + stats.host_too_big + stats.oracle_refused == stats.kernel > 1000


# ------------------------------------------------------------------- targeted regressions
def _tiny() -> tuple[dict, dict]:
    return json.loads((TINY / "Tiny.starkinfo.json").read_text()), json.loads((TINY / "Tiny.expressionsinfo.json").read_text())


def _first_cm(ei: dict) -> tuple[int, int, int]:
    """(expression index, step, src) of the Q expression's first cm operand."""
    for i, e in enumerate(ei["expressionsCode"]):
        for k, s in enumerate(e["code"]):
            for j, x in enumerate(s["src"]):
                if x["type"] == "cm":
                    return i, k, j
    raise AssertionError("no cm operand")


@pytest.mark.parametrize("value", [10 ** 5000, -(10 ** 5000), _nested(5000), [10 ** 5000], "x" * 1_000_000,
                                   list(range(1_000_000))],
                         ids=["int-5000-digits", "neg-int-5000-digits", "nested-5000", "list-of-huge-int",
                              "str-1M", "list-1M"])
def test_huge_and_deep_values_give_model_error(value) -> None:
    """Values no JSON parser limit stops (Python objects handed to the model) are reported, not
    repr'd into a ValueError / RecursionError / megabyte message."""
    si, ei = _tiny()
    for path in (("starkStruct", "nBits"), ("cExpId",), ("openingPoints", 0)):
        with pytest.raises(ModelError) as ei_:
            model.parse_starkinfo(update(si, path, lambda _v: value), SI_FILE)
        check_model_error(ei_.value, {SI_FILE: update(si, path, lambda _v: value)})
    i, k, j = _first_cm(ei)
    si_m = model.parse_starkinfo(si, SI_FILE)
    doc = update(ei, ("expressionsCode", i, "code", k, "src", j, "id"), lambda _v: value)
    with pytest.raises(ModelError) as e2:
        model.parse_expressionsinfo(doc, EI_FILE, si_m)
    check_model_error(e2.value, {EI_FILE: doc})


def test_long_opening_list_in_message_is_bounded() -> None:
    """Found by the mutation loop: a 20,000-entry openingPoints went whole into the message of a
    bad `prime` (129 kB on one line)."""
    si, ei = _tiny()
    i, k, j = _first_cm(ei)
    s = model.parse_starkinfo(update(si, ("openingPoints",), lambda _v: list(range(20_000))), SI_FILE)
    doc = update(ei, ("expressionsCode", i, "code", k, "src", j, "prime"), lambda _v: -1)
    with pytest.raises(ModelError) as e:
        model.parse_expressionsinfo(doc, EI_FILE, s)
    check_model_error(e.value, {EI_FILE: doc})
    assert "opening -1 is not in openingPoints [0, 1, 2, 3, 4, 5, ...]" in str(e.value)


@pytest.mark.parametrize("key", ["cm1.x", "cm1[0]", "a\nb", "a'b\"c", "\x00", "x" * 5000, "\u202ecm1", ""],
                         ids=["dot", "bracket", "newline", "quotes", "nul", "x5000", "rtl-override", "empty"])
def test_hostile_keys_in_error_paths(key) -> None:
    """mapSectionsN is the one object whose keys the model iterates: a hostile key's path is
    quoted (one printable line, resolvable), never raw."""
    si, _ = _tiny()
    doc = update(si, ("mapSectionsN",), lambda m: {**m, key: "not an int"})
    with pytest.raises(ModelError) as e:
        model.parse_starkinfo(doc, SI_FILE)
    check_model_error(e.value, {SI_FILE: doc})


def test_cm_stage_beyond_abi_is_refused() -> None:
    """nStages 3 lets cmPolsMap hold stage 4, which the prover ABI cannot address (off_cm1..3):
    the expressions reading it are refused instead of emitting `X.cm[4]` (out of bounds)."""
    si, ei = _tiny()
    i, k, j = _first_cm(ei)
    cid = ei["expressionsCode"][i]["code"][k]["src"][j]["id"]
    si = update(si, ("nStages",), lambda _v: 3)
    si = update(si, ("cmPolsMap", cid, "stage"), lambda _v: 4)
    s = model.parse_starkinfo(si, SI_FILE)
    cov = kernel.cover(s, model.parse_expressionsinfo(ei, EI_FILE, s))
    reasons = [cov.air_skip] + [x.reason for x in cov.skipped_exprs]
    assert any("stage 4" in r for r in reasons), reasons
    for ks in ([emit.KernelSource(KEY, cov.q, plan.plan(cov.q, 0), cov.exprs, HASH)] if cov.q else []):
        assert "X.cm[4]" not in "".join(emit.render(ks).values())


@pytest.mark.parametrize("key", ["9air_a0_0", "a b", 'x"; system("PWNED"); //', "", "ä", "k" * 300],
                         ids=["leading-digit", "space", "injection", "empty", "non-ascii", "k300"])
def test_render_refuses_bad_kernel_keys(key) -> None:
    """The kernel key is the one name formatted into C: render refuses anything but a bounded C
    identifier (discovery only produces those)."""
    a = corpus()[0]
    si = model.parse_starkinfo(a.si, SI_FILE)
    cov = kernel.cover(si, model.parse_expressionsinfo(a.ei, EI_FILE, si))
    with pytest.raises(ValueError):
        emit.render(emit.KernelSource(key, cov.q, plan.plan(cov.q, 0), cov.exprs, HASH))


# ============================================================================ tests: bytes
def _write_pair(d: Path, si_bytes: bytes, ei_bytes: bytes) -> tuple[Path, Path]:
    d.mkdir(parents=True, exist_ok=True)
    (d / "A.starkinfo.json").write_bytes(si_bytes)
    (d / "A.expressionsinfo.json").write_bytes(ei_bytes)
    return d / "A.starkinfo.json", d / "A.expressionsinfo.json"


def _load_and_run(si_p: Path, ei_p: Path, stats: Stats | None = None, host: bool = False, seed: int = 1) -> str:
    try:
        si, ei = model.load_air(si_p, ei_p)
    except ModelError as e:
        assert e.file in (str(si_p), str(ei_p)), str(e)[:200]
        assert str(e).startswith(f"{e.file}: ") and str(e).isprintable() and len(str(e)) < 600, str(e)[:300]
        return "model_error"
    cov = kernel.cover(si, ei)
    if cov.air_skip:
        return "air_skip"
    check_c(emit.render(emit.KernelSource(KEY, cov.q, plan.plan(cov.q, 3), cov.exprs, HASH)))
    if host and stats is not None:
        host_check(si, model.load_json(si_p), model.load_json(ei_p), cov, 3, seed, stats)
    return "kernel"


HOSTILE_FILES = {
    "empty": b"",
    "bom": b"\xef\xbb\xbf{}",
    "invalid utf-8": b'{"nBits": "\xff\xfe"}',
    "utf-16": json.dumps({"x": 1}).encode("utf-16"),
    "truncated": b'{"starkStruct": {"nBits": 4',
    "deep nesting": b"[" * 100_000 + b"]" * 100_000,
    "deep nesting, unclosed": b"[" * 100_000,
    "deep object": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "5000-digit int": b'{"starkStruct": {"nBits": ' + b"1" * 5000 + b"}}",
    "NaN": b'{"starkStruct": {"nBits": NaN}}',
    "Infinity": b'{"starkStruct": {"nBits": Infinity}}',
    "1e999": b'{"starkStruct": {"nBits": 1e999}}',
    "duplicate keys": b'{"starkStruct": {"nBits": 4, "nBits": "4"}}',
    "NUL": b"\x00",
    "a list": b"[]",
    "null": b"null",
    "a string": b'"starkStruct"',
}


@pytest.mark.parametrize("which", ["si", "ei"])
@pytest.mark.parametrize("name", sorted(HOSTILE_FILES))
def test_hostile_files(tmp_path: Path, name: str, which: str) -> None:
    good_si, good_ei = (TINY / "Tiny.starkinfo.json").read_bytes(), (TINY / "Tiny.expressionsinfo.json").read_bytes()
    bad = HOSTILE_FILES[name]
    si_p, ei_p = _write_pair(tmp_path, bad if which == "si" else good_si, bad if which == "ei" else good_ei)
    assert _load_and_run(si_p, ei_p) == "model_error"


def test_unreadable_inputs(tmp_path: Path) -> None:
    good_si = (TINY / "Tiny.starkinfo.json").read_bytes()
    si_p, ei_p = _write_pair(tmp_path, good_si, b"{}")
    ei_p.unlink()
    ei_p.mkdir()                                   # a directory where the file should be
    assert _load_and_run(si_p, ei_p) == "model_error"
    ei_p.rmdir()                                   # missing
    assert _load_and_run(si_p, ei_p) == "model_error"


def test_fuzz_bytes(tmp_path_factory) -> None:
    """Byte-level damage to the files (cut, spliced, flipped, inserted): load_json + the pipeline;
    every HOST_EVERY // 4-th kernel is host-checked against the oracle."""
    stats = Stats()
    every = max(HOST_EVERY // 4, 1)

    @settings(max_examples=max(EXAMPLES // 3, 10), **FUZZ_SETTINGS)
    @given(data=st.data())
    def run(data) -> None:
        r = R(data)
        names = ("Tiny", "Skipped")
        base = SAMPLE / "synth" / "Basic" / "airs" / r.pick(names) / "air"
        files = {"si": bytearray(next(base.glob("*.starkinfo.json")).read_bytes()),
                 "ei": bytearray(next(base.glob("*.expressionsinfo.json")).read_bytes())}
        for _ in range(r.int(0, 3)):       # 0: an undamaged control (about 1 in 4)
            b = files[r.pick(("si", "ei"))]
            pos = r.int(0, len(b))
            how = r.int(0, 5)
            if how == 0:
                del b[pos:]
            elif how == 1:
                del b[pos: pos + r.int(1, 64)]
            elif how == 2 and pos < len(b):
                b[pos] = r.int(0, 255)
            elif how == 3:
                b[pos:pos] = r.pick((b"[" * 3000, b'"\\u0000"', b"\xff", b"1" * 5000, b"NaN", b",", b"}", b'"PWNED"',
                                     b"-", b"e9999", b"\\", b'\\"'))
            elif how == 4:
                src = r.int(0, len(b))
                b[pos:pos] = b[src: src + r.int(1, 200)]
            else:                                           # flip one digit: stays valid JSON more often
                digits = [i for i in range(max(0, pos - 200), min(len(b), pos + 200)) if 48 <= b[i] <= 57]
                if digits:
                    b[r.pick(digits)] = 48 + r.int(0, 9)
        d = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
        try:
            si_p, ei_p = _write_pair(d, bytes(files["si"]), bytes(files["ei"]))
            stats.inputs += 1
            host = stats.host_checked == 0 or (stats.kernel + 1) % every == 0
            out = _load_and_run(si_p, ei_p, stats, host=host, seed=r.int(0, 1 << 16))
            stats.kernel += out == "kernel"
            stats.model_error += out == "model_error"
            stats.air_skip += out == "air_skip"
        finally:
            shutil.rmtree(d, ignore_errors=True)

    run()
    print(json.dumps(stats.to_json(), indent=1))
    assert stats.inputs >= max(EXAMPLES // 3, 10) and stats.kernel > 0
    assert stats.host_checked > 0, stats.to_json()


# ============================================================================ tests: discovery
HOSTILE_NAMES = ("a b", "a;rm -rf x", "a'b", 'a"b', "ä", "日本", "..a", "a..", "...", "-x", "9air", "x\n",
                 "\n", "$(x)", "`x`", "a*b", "[x]", "~", " ", ".hidden", "air", "recursive1", "vadcop_final",
                 "x" * 200, "\u202eevil", "a\\b", "%s%n", "{{x}}", "\t", "\x7f", "CON", "-", "+", "__")
NAME = st.one_of(st.sampled_from(HOSTILE_NAMES),
                 st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"),
                         min_size=1, max_size=24)).filter(lambda s: s not in (".", "..") and len(s.encode()) <= 200)
C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,219}")     # emit.KEY_RE
SAFE_BASE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,119}")   # a letter, digit or _ first: no ".", "..", hidden names


def _mk_air(d: Path, base: str, content: str, si_text: str, ei_text: str) -> bool:
    try:
        d.mkdir(parents=True, exist_ok=True)
        s, e = d / f"{base}.starkinfo.json", d / f"{base}.expressionsinfo.json"
        if s.exists() or e.exists() or s.is_symlink() or e.is_symlink():
            return False
        s.write_text(si_text if content == "good" else '{"starkStruct": ')
        e.write_text(ei_text)
        return True
    except OSError:          # a name taken by a file / directory of another drawn AIR
        return False


def check_placements(pk: Path, places, expected: set[str]) -> None:
    root = pk.resolve()
    assert {p.rel for p in places} == expected
    for p in places:
        assert p.so_path.parent == p.air_dir and p.so_path.name == p.base + ".exps.so"
        assert "/" not in p.base and p.base not in ("", ".", "..")
        assert p.air_dir.resolve().is_relative_to(root)
        assert p.starkinfo.resolve().is_relative_to(root) and p.expressions.resolve().is_relative_to(root)
        if p.error:     # an AIR that cannot be built: a key of the broken AIRs' own namespace
            assert re.fullmatch(r"bad-[0-9a-f]{16}", p.key), f"broken AIR's key {p.key!r}"
        else:
            assert C_IDENT.fullmatch(p.key), f"kernel key {p.key!r} is not a bounded C identifier"
        if not SAFE_BASE.fullmatch(p.base):
            assert p.error, f"unsafe file name {p.base!r} accepted"
        if not p.error:
            assert C_IDENT.fullmatch(p.sym)


def test_fuzz_discover(tmp_path_factory) -> None:
    """A key with hostile directory and file names and symlinks out of (and within) the key:
    discovery does not crash; every placement is inside the key with a C-identifier kernel key;
    unsafe names are errors; nothing behind a symlink is picked up.
    Every 8th kernel found is host-checked under its (hostile-derived) key."""
    stats = Stats()
    every = 8

    @settings(max_examples=max(EXAMPLES // 4, 10), **FUZZ_SETTINGS)
    @given(data=st.data())
    def run(data) -> None:
        stats.inputs += 1
        si_text, ei_text = (TINY / "Tiny.starkinfo.json").read_text(), (TINY / "Tiny.expressionsinfo.json").read_text()
        work = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
        try:
            pk, outside = work / "pk", work / "outside"
            pk.mkdir()
            _mk_air(outside / "air", "Out", "good", si_text, ei_text)
            expected: set[str] = set()
            for _ in range(data.draw(st.integers(1, 3))):
                comps = data.draw(st.lists(NAME, min_size=1, max_size=3))
                base = data.draw(NAME)
                content = data.draw(st.sampled_from(("good", "good", "broken")))
                if _mk_air(pk.joinpath(*comps), base, content, si_text, ei_text):
                    expected.add("/".join(comps + [base]))
            links = data.draw(st.sets(st.sampled_from(("si_out", "ei_out", "dir_out", "dir_in", "loop", "dangling",
                                                       "so_out", "both_out"))))
            ln = pk / "zzlinks"
            ln.mkdir(exist_ok=True)
            if "si_out" in links:
                (ln / "S.starkinfo.json").symlink_to(outside / "air" / "Out.starkinfo.json")
                (ln / "S.expressionsinfo.json").write_text(ei_text)
            if "ei_out" in links:
                (ln / "E.starkinfo.json").write_text(si_text)
                (ln / "E.expressionsinfo.json").symlink_to(outside / "air" / "Out.expressionsinfo.json")
            if "both_out" in links:
                (ln / "B.starkinfo.json").symlink_to(outside / "air" / "Out.starkinfo.json")
                (ln / "B.expressionsinfo.json").symlink_to(outside / "air" / "Out.expressionsinfo.json")
            if "dir_out" in links:
                (ln / "outdir").symlink_to(outside / "air", target_is_directory=True)
            if "dir_in" in links and expected:
                first = sorted(expected)[0].rsplit("/", 1)[0]
                (ln / "indir").symlink_to(pk / first, target_is_directory=True)
            if "loop" in links:
                (ln / "L.starkinfo.json").symlink_to(ln / "L.starkinfo.json")
                (ln / "L.expressionsinfo.json").write_text(ei_text)
                (ln / "M.starkinfo.json").write_text(si_text)
                (ln / "M.expressionsinfo.json").symlink_to(ln / "M.expressionsinfo.json")
            if "dangling" in links:
                (ln / "D.starkinfo.json").symlink_to(work / "nowhere.json")
                (ln / "D.expressionsinfo.json").write_text(ei_text)
            if "so_out" in links:
                _mk_air(ln, "T", "good", si_text, ei_text)
                (ln / "T.exps.so").symlink_to(outside / "victim.so")
                expected.add("zzlinks/T")
            places = discover(pk)
            check_placements(pk, places, expected)
            for p in places:
                if not p.error:
                    si, ei = model.load_air(p.starkinfo, p.expressions)
                    cov = kernel.cover(si, ei)
                    check_c_key(emit.render(emit.KernelSource(p.key, cov.q, plan.plan(cov.q, 0), cov.exprs, HASH)), p.key)
                    stats.kernel += 1
                    if stats.host_checked == 0 or stats.kernel % every == 0:   # hostile-named kernel: right
                        host_check(si, model.load_json(p.starkinfo), model.load_json(p.expressions), cov, 0, 1,
                                   stats, key=p.key)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    run()
    print(json.dumps(stats.to_json(), indent=1))
    assert stats.kernel > 0 and stats.host_checked > 0, stats.to_json()


def check_c_key(files: dict[str, str], key: str) -> None:
    for name, text in files.items():
        assert (name.startswith(key + "_") or name == emit.XINV_TU) and "\x00" not in text
        assert {c for c in text if not c.isascii()} <= template_non_ascii()


def _discover_with_watchdog(pk: Path, fifo: Path | None = None, timeout: float = 20.0):
    """discover(pk) in a thread; a FIFO it blocks on is opened for writing after `timeout` so the
    thread ends, and the test fails."""
    out: dict = {}

    def run():
        try:
            out["places"] = discover(pk)
        except BaseException as e:  # noqa: BLE001 - reported below
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive() and fifo is not None:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        t.join(5)
        pytest.fail("discovery blocked on a FIFO named like a starkinfo")
    assert "error" not in out, repr(out.get("error"))
    return out["places"]


def test_discover_special_files(tmp_path: Path) -> None:
    """A FIFO, a symlink loop and a dangling link named like inputs: skipped, no hang, no crash."""
    si_text, ei_text = (TINY / "Tiny.starkinfo.json").read_text(), (TINY / "Tiny.expressionsinfo.json").read_text()
    pk = tmp_path / "pk"
    _mk_air(pk / "ok", "Ok", "good", si_text, ei_text)
    fifo = pk / "f" / "F.starkinfo.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    (pk / "f" / "F.expressionsinfo.json").write_text(ei_text)
    (pk / "l").mkdir()
    (pk / "l" / "L.starkinfo.json").symlink_to(pk / "l" / "L.starkinfo.json")
    (pk / "l" / "L.expressionsinfo.json").write_text(ei_text)
    places = _discover_with_watchdog(pk, fifo)
    check_placements(pk, places, {"ok/Ok"})


def test_discover_rejects_newline_in_base(tmp_path: Path) -> None:
    """`$` matches before a trailing newline: a base like 'Tiny\\n' must still be refused."""
    si_text, ei_text = (TINY / "Tiny.starkinfo.json").read_text(), (TINY / "Tiny.expressionsinfo.json").read_text()
    pk = tmp_path / "pk"
    assert _mk_air(pk / "air", "Tiny\n", "good", si_text, ei_text)
    [p] = discover(pk)
    assert p.error and "Tiny\\n" in p.error


def test_discover_invalid_utf8_names(tmp_path: Path) -> None:
    si_text, ei_text = (TINY / "Tiny.starkinfo.json").read_bytes(), (TINY / "Tiny.expressionsinfo.json").read_bytes()
    pk = tmp_path / "pk"
    d = os.fsencode(pk) + b"/\xff\xfe"
    os.makedirs(d)
    for base in (b"ok", b"bad\xff"):
        with open(d + b"/" + base + b".starkinfo.json", "wb") as f:
            f.write(si_text)
        with open(d + b"/" + base + b".expressionsinfo.json", "wb") as f:
            f.write(ei_text)
    # paths that are not UTF-8 cannot enter doit's database: refused per AIR with one line each
    #, never a crash of the whole build; nothing is a placement
    assert discover(pk) == []
    from codegen.discover import scan
    sc = scan(pk)
    assert {r.rel: r.reason for r in sc.refused} == {
        "\\xff\\xfe/ok": "refused: path is not valid UTF-8",
        "\\xff\\xfe/bad\\xff": "refused: path is not valid UTF-8"}
    assert sc.broken == []


@pytest.mark.parametrize("phase_dir", ["9air", "x" * 250, "a b;c", "日本"], ids=["digit", "x250", "semicolon", "cjk"])
def test_hostile_phase_dir_key_compiles(tmp_path: Path, phase_dir: str) -> None:
    """The phase (leaf directory) names the kernel: a leading digit, 250 characters or non-ASCII
    still give a bounded C identifier whose TUs compile."""
    si_text, ei_text = (TINY / "Tiny.starkinfo.json").read_text(), (TINY / "Tiny.expressionsinfo.json").read_text()
    pk = tmp_path / "pk"
    assert _mk_air(pk / "A" / phase_dir, "Tiny", "good", si_text, ei_text)
    [p] = discover(pk)
    assert not p.error and C_IDENT.fullmatch(p.key)
    si, ei = model.load_air(p.starkinfo, p.expressions)
    cov = kernel.cover(si, ei)
    files = emit.render(emit.KernelSource(p.key, cov.q, plan.plan(cov.q, 3), cov.exprs, HASH))
    assert max(len(n) for n in files) < 240             # file names stay below NAME_MAX (255)
    hostcheck.build_host_library(files, tmp_path / "build")


def test_atomic_write_replaces_a_symlink(tmp_path: Path) -> None:
    """A `.so` path that is a symlink out of the key is replaced, never written through (the one
    writer the `.so`, cache and build outputs use)."""
    victim = tmp_path / "outside" / "victim.so"
    victim.parent.mkdir()
    victim.write_bytes(b"original")
    so = tmp_path / "pk" / "A.exps.so"
    so.parent.mkdir()
    so.symlink_to(victim)
    atomic_write(so, b"new library")
    assert not so.is_symlink() and so.read_bytes() == b"new library"
    assert victim.read_bytes() == b"original"
    assert sorted(x.name for x in so.parent.iterdir()) == ["A.exps.so"]
