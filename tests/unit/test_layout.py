"""The house as the README draws it: every folder its Layout map names exists, every folder of the package is
named, and the size limits hold in the package and the bench (a module of at most 600 lines, a function of at
most 80)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers import REPO

PACKAGE = REPO / "src" / "kafka_rebalancer"
BENCH = REPO / "bench"
MODULE_LINES, FUNCTION_LINES = 600, 80
# What may be over a limit, by path from the repository: nothing (the test fails when one is added, and when one
# listed here is fixed).
OVER_LIMIT: set[str] = set()


def layout_map() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Layout\n", 1)[1]
    return section.split("```", 2)[1].strip("\n").splitlines()


def named_folders(lines: list[str]) -> set[Path]:
    """The folders the map names, each as a path from the repository: an entry's indent says its parent."""
    folders: set[Path] = set()
    parents: list[tuple[int, Path]] = []
    for line in lines:
        match = re.match(r"^( *)([\w.-]+(?:/[\w.-]+)*/)(?:\s|$)", line)
        if not match:
            continue
        indent = len(match.group(1))
        parents = [(i, p) for i, p in parents if i < indent]
        path = (parents[-1][1] if parents else REPO) / match.group(2).rstrip("/")
        folders.add(path)
        parents.append((indent, path))
    return folders


def test_every_folder_the_layout_names_exists() -> None:
    missing = sorted(str(p.relative_to(REPO)) for p in named_folders(layout_map()) if not p.is_dir())
    assert not missing, f"README's Layout names folders that are not there: {missing}"


def test_every_folder_of_the_package_is_in_the_layout() -> None:
    lines = layout_map()
    named = named_folders(lines)
    text = "\n".join(lines)
    for init in sorted(PACKAGE.rglob("__init__.py")):
        folder = init.parent
        if folder == PACKAGE:
            continue
        # An entry of its own, or named with its parent's entry (as `planner/` is under `balance/`).
        assert folder in named or f"{folder.name}/" in text, f"README's Layout does not name {folder}"


def long_functions(node: ast.AST, prefix: str = "") -> list[str]:
    """The functions (and methods, and functions inside them) over FUNCTION_LINES, by their dotted names."""
    found = []
    for child in ast.iter_child_nodes(node):
        name = f"{prefix}{getattr(child, 'name', '')}"
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) \
                and child.end_lineno - child.lineno + 1 > FUNCTION_LINES:  # type: ignore[operator]
            found.append(name)
        if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found += long_functions(child, f"{name}.")
    return found


def over_limit() -> set[str]:
    found = set()
    for path in sorted([*PACKAGE.rglob("*.py"), *BENCH.rglob("*.py")]):
        relative = str(path.relative_to(REPO))
        source = path.read_text()
        if len(source.splitlines()) > MODULE_LINES:
            found.add(relative)
        found.update(f"{relative}:{name}" for name in long_functions(ast.parse(source)))
    return found


def test_modules_and_functions_stay_within_their_limits() -> None:
    found = over_limit()
    assert found - OVER_LIMIT == set(), f"over {MODULE_LINES} lines a module or {FUNCTION_LINES} a function"
    assert OVER_LIMIT - found == set(), "split since: take it off OVER_LIMIT"


def test_every_type_ignore_names_its_error_and_says_why() -> None:
    """mypy runs over src/ (`make lint`, `make test`); a silenced error names its code and, on the same line, why
    it is silenced (`# type: ignore[code]  # why`)."""
    said = re.compile(r"# type: ignore\[[a-z-]+(, [a-z-]+)*\]  # \S")
    unsaid = [f"{path.relative_to(REPO)}:{number}" for folder in ("src", "dags", "plugins")
              for path in sorted((REPO / folder).rglob("*.py"))
              for number, line in enumerate(path.read_text().splitlines(), 1)
              if "type: ignore" in line and not said.search(line)]
    assert not unsaid, f"a type: ignore without its code or reason: {unsaid}"
