"""The house reads as the data flows: product stages (codegen/*.py), the build
machinery (codegen/build/), the checks (codegen/check/) and the samples (codegen/sample/).
No import cycle; no product or build module imports check/, sample/ or bench at module level
(the CLI's `verify` / `gpucheck` commands import the checks lazily, inside the command)."""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "codegen"


def modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = modules()


def top_level_imports(path: Path) -> set[str]:
    """The codegen modules a file imports at module level (not inside functions)."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("codegen"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("codegen"):
                    found.add(a.name)
    return {m for m in found if m in MODULES and m != "codegen"}


GRAPH = {m: top_level_imports(p) for m, p in MODULES.items()}


def layer(m: str) -> str:
    parts = m.split(".")
    if m in ("codegen", "codegen.build", "codegen.check", "codegen.sample"):
        return "package"
    return parts[1] if len(parts) > 2 else ("front" if parts[-1] in ("cli", "tasks") else "stage")


def test_the_subpackages() -> None:
    assert {m for m in MODULES if layer(m) == "stage"} == {
        "codegen.model", "codegen.discover", "codegen.operands", "codegen.ir", "codegen.passes",
        "codegen.plan", "codegen.remat", "codegen.program", "codegen.coverage", "codegen.render_model",
        "codegen.emit", "codegen.resources"}
    assert {m.split(".")[-1] for m in MODULES if layer(m) == "check"} == {
        "gl64", "reference", "binfile", "hostcheck", "gpucheck", "ptxsim"}
    assert {m.split(".")[-1] for m in MODULES if layer(m) == "sample"} == {"synth"}


@pytest.mark.parametrize("mod", sorted(MODULES))
def test_every_module_imports(mod: str) -> None:
    importlib.import_module(mod)


def test_no_import_cycle() -> None:
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        if state.get(m) == 1:
            raise AssertionError("import cycle: " + " -> ".join(path + [m]))
        if state.get(m) == 2:
            return
        state[m] = 1
        for d in sorted(GRAPH[m]):
            visit(d, path + [m])
        state[m] = 2

    for m in sorted(GRAPH):
        visit(m, [])


def test_product_never_imports_checks_samples_or_bench() -> None:
    bad = {m: sorted(d for d in deps if layer(d) in ("check", "sample"))
           for m, deps in GRAPH.items() if layer(m) in ("stage", "build", "front")}
    assert {m: d for m, d in bad.items() if d} == {}
    for m, p in MODULES.items():
        if layer(m) in ("stage", "build", "front"):
            assert "import bench" not in p.read_text() and "from bench" not in p.read_text(), m


def test_stages_flow_one_way() -> None:
    """model -> discover / ir -> passes / plan -> coverage -> render_model -> emit: a stage imports
    only stages before it (and the operand table, and resources: where the templates and the sample
    lie); never the build machinery or the front ends."""
    order = ["codegen.resources", "codegen.operands", "codegen.model", "codegen.discover", "codegen.ir",
             "codegen.passes", "codegen.plan", "codegen.remat", "codegen.program", "codegen.coverage",
             "codegen.render_model", "codegen.emit"]
    for i, m in enumerate(order):
        later = set(order[i:])
        assert not (GRAPH[m] & later), (m, GRAPH[m] & later)
        assert all(layer(d) == "stage" for d in GRAPH[m]), (m, GRAPH[m])


def test_knobs_are_read_in_one_place() -> None:
    """Only codegen/build/knobs.py reads the environment."""
    for m, p in MODULES.items():
        text = p.read_text()
        if m in ("codegen.build.knobs",):
            continue
        reads = [ln for ln in text.splitlines() if "os.environ.get(" in ln or "os.getenv(" in ln
                 or ("os.environ[" in ln and "] =" not in ln)]
        assert reads == [], (m, reads)


def test_the_data_folders_are_found_in_one_place() -> None:
    """Only codegen/resources.py knows where templates/ and provingkey-sample/ lie (a checkout's
    folders, or the wheel's copies inside the package): every other module takes TEMPLATES and
    SAMPLE from it."""
    pattern = re.compile(r"""(["'](?:templates|provingkey[-_]sample)["']|__file__)""")
    found = {m: sorted(set(pattern.findall(p.read_text()))) for m, p in MODULES.items() if m != "codegen.resources"}
    assert {m: f for m, f in found.items() if f} == {}
