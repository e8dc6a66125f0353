"""Import cycles among lpviz's and the app's own modules.

Reads the source (nothing is imported) and builds the graph "module A imports module B" from
every ``import`` statement, then lists the elementary cycles. Two graphs:

- ``module``: only the imports that run when the module is imported (top level, including
  ``try``/``if`` blocks there, excluding ``if TYPE_CHECKING:``). A cycle here is one Python has
  to resolve while half the modules are initialised.
- ``all``: the module-level imports plus the deferred ones inside functions. A deferred import
  that closes a loop is a cycle hidden from the interpreter, not removed: the two modules still
  need each other. One exception: a module-level ``__getattr__`` (PEP 562) that serves a name
  which moved to another module (``lpviz.engine.run`` -> ``lpviz.driver.run``) is an alias for
  old callers, not code the module runs for itself; its imports are not edges.

``from package import name`` points at ``package.name`` when that is a module, else at the
package itself; the implicit import of a package's ``__init__`` on the way to a submodule is not
an edge (every module would then sit in a loop through its package).

Usage: ``python tools/import_cycles.py [--graph module|all] [ROOT ...]`` (default: lpviz app).
Exit status 1 when a cycle is found.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def module_files(roots: list[str], base: Path = REPO) -> dict[str, Path]:
    """{dotted module name: file} for every .py file below the package roots (folders in ``base``)."""
    modules = {}
    for root in roots:
        for path in sorted((base / root).rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module, deferred: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of a module: top level only, or (deferred) also inside functions."""
    pending: list[ast.AST] = [
        node for node in tree.body if not (isinstance(node, ast.FunctionDef) and node.name == "__getattr__")
    ]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)  # annotations only: never imported at run time
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            if deferred:
                pending.extend(ast.iter_child_nodes(node))
        else:
            pending.extend(ast.iter_child_nodes(node))


def _resolve(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    targets = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            targets.add(owner(alias.name))
        return {t for t in targets if t}
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        targets.add(submodule if submodule in known else owner(base))
    return {t for t in targets if t}


def import_graph(roots: list[str], deferred: bool, base: Path = REPO) -> dict[str, set[str]]:
    """{module: the own modules it imports}."""
    files = module_files(roots, base)
    known = set(files)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _imports(tree, deferred):
            edges |= _resolve(module, is_package, node, known)
        edges.discard(module)
        graph[module] = edges
    return graph


def elementary_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every simple cycle once, started at its smallest module name (the graph is small)."""
    cycles = []
    for start in sorted(graph):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    cycles.append(path)
                elif nxt > start and nxt not in path:
                    stack.append((nxt, [*path, nxt]))
    return sorted(cycles, key=lambda c: (len(c), c))


def tangles(cycles: list[list[str]]) -> list[list[str]]:
    """The groups of modules tied together by cycles (the graph's non-trivial strongly connected parts)."""
    groups: list[set[str]] = []
    for cycle in cycles:
        merged = set(cycle)
        for group in [g for g in groups if g & merged]:
            merged |= group
            groups.remove(group)
        groups.append(merged)
    return sorted(sorted(group) for group in groups)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*", default=["lpviz", "app"])
    parser.add_argument("--graph", choices=["module", "all"], default="all")
    args = parser.parse_args(argv)
    cycles = elementary_cycles(import_graph(args.roots, deferred=args.graph == "all"))
    groups = tangles(cycles)
    print(
        f"{len(groups)} tangle(s) of modules, {len(cycles)} elementary cycle(s) ({args.graph} imports)"
        f" among {' '.join(args.roots)}"
    )
    for group in groups:
        print("  tangle: " + ", ".join(group))
    for cycle in cycles:
        print("  " + " -> ".join([*cycle, cycle[0]]))
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
