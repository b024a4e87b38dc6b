"""Plant one bug at a time in a copy of the checkout and run the tests that must catch it.

    python3 tests/plant_bugs.py [NAME ...]       # default: every bug below

For each bug: the checkout is copied to a temporary directory (codegen/, templates/, tests/,
bench/, dodo.py, the sample's JSON; never this checkout's files; ../shared beside it, a link), the copy's file is edited (the text
must occur exactly once), and the bug's tests run there with `python3 -m pytest` (the copy first
on PYTHONPATH, so its codegen is the one imported, also by the `exps-codegen` and `doit`
subprocesses); then the same tests run in an unedited copy. A line per bug says whether the tests
failed with the bug and passed without it. docs/RELIABILITY.md ("Planted bugs and the tests that
catch them") lists the results. Nothing here is a test: pytest does not collect this file.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Bug:
    what: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


BUGS = {
    "cc-keeps-old-so": Bug(
        "act_cc no longer removes the kernel's old .so before compiling",
        "codegen/build/actions.py",
        "    try:\n        remove_so(so_paths)\n        Path(out).unlink(missing_ok=True)\n",
        "    try:\n        Path(out).unlink(missing_ok=True)\n",
        ("tests/test_tasks.py::test_a_failed_compile_that_runs_alone_leaves_no_so",
         "tests/test_tasks.py::test_a_failed_compile_after_a_template_change_leaves_no_so")),
    "tune-ignores-emitter": Bug(
        "the emitter version dropped from the tune task's config",
        "codegen/tasks.py",
        '"emitter": EMITTER_VERSION, "chunk": s.chunk, "slots_cap": s.slots_cap,',
        '"chunk": s.chunk, "slots_cap": s.slots_cap,',
        ("tests/test_tasks.py::test_emitter_version_bump_reemits_all_recompiles_only_changed_tus",)),
    "cse-add-commutative": Bug(
        "CSE keys an add on its operands as a set (add taken as commutative)",
        "codegen/passes.py",
        "    return (op.arith, op.shape, op.dim, op.a, op.b)\n",
        "    if op.arith == \"add\":\n        return (op.arith, op.shape, op.dim, frozenset((op.a, op.b)))\n"
        "    return (op.arith, op.shape, op.dim, op.a, op.b)\n",
        ("tests/test_operand_order.py::test_adds_of_both_orders_end_to_end",
         "tests/test_operand_order.py::test_passes_and_remat_keep_every_term_on_random_irs",
         "tests/test_operand_order.py::test_every_sample_kernel_keeps_its_terms_through_the_passes")),
    "rank-swapped": Bug(
        "two entries of the operand rank table swapped (public 3, number 2)",
        "codegen/operands.py",
        '"public": (2, 2), "number": (3, 3),',
        '"public": (3, 3), "number": (2, 2),',
        ("tests/test_operands.py",)),
    "cost-no-chunk-term": Bug(
        "the cost model's per-chunk term dropped",
        "codegen/build/autotune.py",
        "scratch_words(ir, pl) * m.WORD + pl.n_chunks * m.CHUNK",
        "scratch_words(ir, pl) * m.WORD",
        ("tests/test_costmodel.py",)),
    "neg-of-p": Bug(
        "gl_neg's comparison `a <= p` written `a < p` (neg(p) = p instead of 0)",
        "templates/gen_common.cuh",
        "return a <= EXPS_P ? EXPS_P - a : 2 * EXPS_P - a;",
        "return a < EXPS_P ? EXPS_P - a : 2 * EXPS_P - a;",
        ("tests/test_field_ops_host.py",)),
    "fast-ok-v2": Bug(
        "the value path's rule no longer checks the third component",
        "templates/gen_common.cuh",
        "(gl_canon(r.v1) >= EXPS_EPS && gl_canon(r.v2) >= EXPS_EPS)",
        "(gl_canon(r.v1) >= EXPS_EPS)",
        ("tests/test_value_path.py::test_value_path_stores_the_production_word_at_the_edges_of_its_rule",)),
    "slot-reused-too-early": Bug(
        "a scratch slot handed to a value defined one op before its owner's last load (that load "
        "then reads the new value)",
        "codegen/plan.py",
        "            if busy_until < start:",
        "            if busy_until <= start + 1:",
        ("tests/test_operand_order.py::test_passes_and_remat_keep_every_term_on_random_irs",
         "tests/test_operand_order.py::test_every_sample_kernel_keeps_its_terms_through_the_passes",
         "tests/test_hostcheck.py::test_sample_q_in_small_chunks")),
    # bugs of the tests themselves: what tests/conftest.py catches
    "test-writes-the-sample": Bug(
        "a test fixture hands out the checkout's own sample key instead of a copy (its tests then "
        "write into the checkout)",
        "tests/test_discover.py",
        '    return copy_sample(tmp_path / "pk")',
        "    return SAMPLE",
        ("tests/test_discover.py",)),
    "test-skips-itself": Bug(
        "a test skips by itself (pytest.skip) where it cannot run, bypassing tests/require.py",
        "tests/test_hostile.py",
        '    require("tmpfs")      # skip, or fail under EXPS_REQUIRE (tests/require.py)',
        '    pytest.skip("no tmpfs here")',
        ("tests/test_hostile.py::test_full_disk_one_line_per_air_no_partial_so",)),
}


def copy_checkout(dst: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.tmp", ".hypothesis", ".pytest_cache")
    dst.mkdir(parents=True)
    for name in ("codegen", "templates", "tests", "bench", "provingkey-sample", "docs"):
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, dst / name, ignore=ignore)
    for name in ("dodo.py", "pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dst / name)
    return dst


def run_tests(root: Path, tests: tuple[str, ...]) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPS_") or k == "EXPS_REQUIRE"}
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["EXPS_BUILD_ROOT"] = str(root) + "-builds"      # beside the copy: the tests never write into it
    env["EXPS_CACHE_DIR"] = str(root) + "-cache"
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "-rfE",
                        *tests], cwd=root, env=env, capture_output=True, text=True)
    lines = p.stdout.splitlines()
    last = [ln for ln in lines if re.search(r"\d+ (passed|failed|error)", ln)]
    failed = sorted({ln.split()[1].split("::", 1)[1] for ln in lines if ln.startswith(("FAILED ", "ERROR "))})
    summary = re.sub(r" in [0-9.]+s.*", "", last[-1].strip("= ")) if last else \
        (p.stdout[-2000:] + p.stderr[-2000:]).strip()
    return p.returncode, summary + (f" ({', '.join(failed)})" if failed else "")


def plant(name: str, bug: Bug, work: Path) -> tuple[bool, bool]:
    """(the tests failed with the bug, the tests passed without it)."""
    clean = copy_checkout(work / f"{name}-clean")
    rc_clean, line_clean = run_tests(clean, bug.tests)
    planted = copy_checkout(work / f"{name}-planted")
    f = planted / bug.file
    text = f.read_text()
    assert text.count(bug.old) == 1, f"{name}: the text to replace occurs {text.count(bug.old)} times in {bug.file}"
    f.write_text(text.replace(bug.old, bug.new))
    rc_bug, line_bug = run_tests(planted, bug.tests)
    print(f"{name}: {bug.what}\n  tests: {' '.join(bug.tests)}\n  with the bug: {line_bug.strip()} (exit {rc_bug})"
          f"\n  without it:   {line_clean.strip()} (exit {rc_clean})", flush=True)
    return rc_bug != 0, rc_clean == 0


def main(argv: list[str]) -> int:
    names = argv or list(BUGS)
    unknown = [n for n in names if n not in BUGS]
    if unknown:
        print(f"unknown bug(s) {unknown}; known: {', '.join(BUGS)}", file=sys.stderr)
        return 2
    bad = []
    with tempfile.TemporaryDirectory(prefix="exps-plant-") as d:
        if (REPO.parent / "shared").is_dir():      # the copies find ../shared/pk as the checkout does
            (Path(d) / "shared").symlink_to(REPO.parent / "shared")
        for n in names:
            caught, clean = plant(n, BUGS[n], Path(d))
            if not (caught and clean):
                bad.append(n)
    print(f"{len(names) - len(bad)} of {len(names)} planted bugs caught (tests pass without them)"
          + (f"; not: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
