"""The folders are the design, and a test holds them there.

* The import-linter contract in ``pyproject.toml``, bottom to top:
  ``rota.core``, ``rota.migrations``, ``rota.producer`` | ``rota.runtime``,
  ``rota.scheduler`` | ``rota.executor``, ``rota.operations``, ``rota.api``,
  ``rota.cli``; siblings never import each other, no layer imports upward.
* No import cycles between modules, imports inside functions included (a
  lazy import is still a dependency).
* Installing rota adds one top-level import name: ``rota``.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import grimp
from importlinter.application.use_cases import lint_imports
from importlinter.configuration import configure

ROOT = Path(__file__).resolve().parents[2]


def test_layers_contract_holds() -> None:
    configure()  # what the lint-imports command does first
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_logo=True, cache_dir=None)


def _imports(graph: grimp.ImportGraph, module: str) -> Iterator[str]:
    return iter(sorted(graph.find_modules_directly_imported_by(module)))


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, _imports(graph, start))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, _imports(graph, child)))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles() -> None:
    graph = grimp.build_graph("rota", cache_dir=None)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(m)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.c")
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_the_distribution_installs_only_rota() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    find = config["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == ["rota*"]
    assert config["project"]["scripts"] == {"rota": "rota.cli.main:main"}
    top_level = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    # Only `rota` matches the include pattern; tests, bench and examples stay in the checkout.
    assert {name for name in top_level if name.startswith("rota")} == {"rota"}


LAYERS = [
    "rota.cli",
    "rota.api",
    "rota.operations",
    "rota.scheduler | rota.executor",
    "rota.producer | rota.runtime",
    "rota.migrations",
    "rota.core",
]


def test_the_contract_names_every_layer_in_order() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = config["tool"]["importlinter"]["contracts"]
    assert contract["type"] == "layers"
    assert contract["layers"] == LAYERS
    components = {p.name for p in (ROOT / "rota").iterdir() if (p / "__init__.py").exists()}
    named = {m.strip().removeprefix("rota.") for layer in LAYERS for m in layer.split("|")}
    assert components == named  # every top-level package sits in a layer; no grab bag


def test_every_package_says_what_lives_there() -> None:
    for init in sorted((ROOT / "rota").rglob("__init__.py")):
        if "versions" in init.parts:
            continue  # Alembic's revisions: a folder of files, not a package anyone imports
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init.relative_to(ROOT)} has no docstring"
    for layer in ROOT.joinpath("rota").iterdir():
        init = layer / "__init__.py"
        if init.exists():
            doc = ast.get_docstring(ast.parse(init.read_text())) or ""
            where = init.relative_to(ROOT)
            assert "may import" in doc.lower(), f"{where} does not say what it may import"
