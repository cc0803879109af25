"""The layout's rules, read from the imports themselves (AST), so a reader can trust the folder names (issue 21):

- imports run one way: pages/ and streamlit_app.py -> explorer/ -> model/; model/ never imports explorer/;
- Streamlit is imported only by the web app: explorer/app/, pages/ and streamlit_app.py;
- a pure module (explorer/ outside app/) reaches neither Streamlit nor explorer/app/, directly or through another
  module, so every figure, table and text builder can be imported and tested anywhere;
- no import cycles.
"""
import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("model", "explorer")
APP = "explorer.app"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def project_files() -> dict[str, Path]:
    files = {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    files |= {f"pages.{p.stem}": p for p in (ROOT / "pages").glob("*.py")}
    files["streamlit_app"] = ROOT / "streamlit_app.py"
    return files


FILES = project_files()


@functools.cache
def syntax(path: Path) -> ast.Module:
    """A file's syntax tree, read once for every test here."""
    return ast.parse(path.read_text(), str(path))


@functools.cache
def imports_of(name: str) -> frozenset[str]:
    """Every module `name` imports (anywhere in the file, lazily inside a function too), as absolute names;
    `from package import module` counts as importing that module."""
    path = FILES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(syntax(path)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in FILES}
    return frozenset(found)


def internal(names: set[str]) -> set[str]:
    """The project's own modules among `names` (a submodule's import also imports its packages)."""
    out = set()
    for name in names:
        parts = name.split(".")
        out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in FILES}
    return out


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each project module -> the project modules it imports (built when a test first asks, not at collection)."""
    return {name: internal(imports_of(name)) - {name} for name in FILES}


def reach(name: str) -> set[str]:
    """Every project module `name` imports, directly or through others."""
    seen, todo = set(), [name]
    while todo:
        for other in graph()[todo.pop()]:
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


def is_app(name: str) -> bool:
    return name == APP or name.startswith(APP + ".") or name.startswith("pages.") or name == "streamlit_app"


def test_the_app_package_exists_and_the_graph_is_read():
    assert APP in FILES and "explorer.view" in FILES and "model.transformer" in FILES
    assert "model.transformer" in reach("explorer.view")


@pytest.mark.parametrize("name", sorted(n for n in FILES if n.startswith("model")))
def test_model_imports_neither_explorer_nor_streamlit(name):
    assert not {n for n in imports_of(name) if n.split(".")[0] in ("explorer", "pages", "streamlit")}


@pytest.mark.parametrize("name", sorted(FILES))
def test_streamlit_is_imported_only_by_the_web_app(name):
    if not is_app(name):
        assert not {n for n in imports_of(name) if n.split(".")[0] == "streamlit"}, \
            f"{name} imports streamlit; only explorer/app/, pages/ and streamlit_app.py may"


@pytest.mark.parametrize("name", sorted(n for n in FILES if n.startswith("explorer") and not is_app(n)))
def test_a_pure_module_reaches_no_streamlit_through_another_module(name):
    reached = reach(name)
    assert not [n for n in reached if is_app(n)], f"{name} reaches the web app: {sorted(n for n in reached if is_app(n))}"
    streamlit = [n for n in reached | {name} if any(i.split(".")[0] == "streamlit" for i in imports_of(n))]
    assert not streamlit


@pytest.mark.parametrize("name", sorted(n for n in FILES if n.startswith("explorer")))
def test_explorer_never_imports_pages(name):
    assert not [n for n in graph()[name] if n.startswith("pages.") or n == "streamlit_app"]


def test_there_is_no_import_cycle():
    cycles = []
    for name in FILES:
        for other in graph()[name]:
            if name in reach(other) and not (name.startswith(other + ".") or other.startswith(name + ".")):
                cycles.append(tuple(sorted((name, other))))
    assert not sorted(set(cycles)), f"modules that import each other, directly or through others: {sorted(set(cycles))}"


def test_the_rules_catch_a_breach(tmp_path):
    """The checks above fail on a module that breaks them (read from a file, as the real ones are)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import streamlit as st\nfrom explorer.app import state\n")
    FILES["explorer.steps.bad"] = bad
    try:
        graph()["explorer.steps.bad"] = internal(imports_of("explorer.steps.bad"))
        assert "streamlit" in imports_of("explorer.steps.bad") and "explorer.app.state" in reach("explorer.steps.bad")
        with pytest.raises(AssertionError):
            test_streamlit_is_imported_only_by_the_web_app("explorer.steps.bad")
        with pytest.raises(AssertionError):
            test_a_pure_module_reaches_no_streamlit_through_another_module("explorer.steps.bad")
    finally:
        del FILES["explorer.steps.bad"], graph()["explorer.steps.bad"]


def our_module_aliases(path: Path) -> list[tuple[str, str]]:
    """(module, alias) for every `import ... as alias` of one of the project's own modules in `path`."""
    out = []
    for node in ast.walk(syntax(path)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in PACKAGES:
            out += [(f"{node.module}.{a.name}", a.asname) for a in node.names
                    if a.asname and f"{node.module}.{a.name}" in FILES]               # a module, not a function
        elif isinstance(node, ast.Import):
            out += [(a.name, a.asname) for a in node.names if a.asname and a.name.split(".")[0] in PACKAGES]
        elif isinstance(node, ast.ImportFrom) and node.level:
            out += [(a.name, a.asname) for a in node.names if a.asname]
    return out


def test_an_alias_of_one_of_our_modules_names_that_module():
    """`from model import attribution as model_attribution`, never `as A` (A was attention in one file and
    attribution in another): a reader knows the module from its alias alone."""
    paths = [*FILES.values(), *(ROOT / "tests").glob("*.py"), *(ROOT / "bench").glob("*.py")]
    bad = [f"{path.relative_to(ROOT)}: {module} as {alias}" for path in paths
           for module, alias in our_module_aliases(path) if not alias.endswith(module.rsplit(".", 1)[-1])]
    assert not bad, bad
