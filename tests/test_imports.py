"""The import graph of ``rlaudit`` has no cycle: stages depend on each other one way (docs/internals.md).

Every ``import``/``from … import`` of an ``rlaudit`` module counts, at module level or inside a function
(a lazy import inside a function is still a dependency of that module; hiding a cycle behind it is what this
test is for). ``if TYPE_CHECKING:`` blocks are left out: they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rlaudit

PACKAGE_DIR = Path(rlaudit.__file__).parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE_DIR.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(path: Path, modules: set[str]) -> set[str]:
    """rlaudit modules that ``path`` imports (a package counts as its ``__init__``)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:
                # `from pkg import module` depends on the module; `from pkg import name` on pkg itself
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    out = set()
    for mod in found:
        # `import a.b.c` depends on a.b.c (and runs a/__init__, a/b/__init__, which are parents: not edges)
        while mod and mod not in modules:
            mod = mod.rpartition(".")[0]
        if mod and mod != name:
            out.add(mod)
    return out


def import_graph() -> dict[str, set[str]]:
    """``module -> rlaudit modules it imports`` for every module of the package."""
    paths = sorted(PACKAGE_DIR.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _imports(p, modules) for p in paths}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_find_cycles_sees_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "rlaudit.scores" in graph["rlaudit.sources"]  # module level
    assert "rlaudit.store" in graph["rlaudit.sources"]  # inside a function
    assert "rlaudit.importers" in graph["rlaudit.importers.data_section"]  # a submodule on its package
    assert "rlaudit.report.plots" in graph["rlaudit.report.render"]  # `from package import module`
    assert "rlaudit.report" not in graph["rlaudit.report.render"]


def test_rlaudit_import_graph_has_no_cycle():
    cycles = find_cycles(import_graph())
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_checking_a_protocol_does_not_load_the_bootstrap_engine():
    """`rlaudit validate` / `run` check the protocol's [audit] settings by name only: the bootstrap engine
    (and SciPy with it) is loaded by the audit, never by a sweep's start-up."""
    import subprocess
    import sys

    repo = Path(rlaudit.__file__).resolve().parents[1]
    code = ("import sys; from rlaudit.protocol import load_protocol; load_protocol('protocols/dqn-family-minatar-250k.toml');"
            "import rlaudit.audit, rlaudit.stats; print(sorted(m for m in ('rlaudit.audit.engine', "
            "'rlaudit.stats.bootstrap', 'scipy.stats') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
