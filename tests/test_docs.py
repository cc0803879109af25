"""The documents a newcomer reads say true things about where the code is.

- README.md is short (at most 15,000 characters: a few screens, as nanoGPT's) and links every file in docs/.
- Every repository path named in README.md, docs/*.md, the project's settings files, and the docstrings and comments
  of its Python files exists. A path is recognised by its form: a word with a slash ending in a known extension
  (`model/layers.py`, `docs/screenshots/home.png`), or anything under one of the repository's top-level folders
  (`explorer/app/`, `.ci/run`). Paths are relative to the repository root; `../` in a document is relative to the
  document's folder (a link from docs/ to the README). `*` or `<name>` in a path is a pattern that must match
  something (`tests/test_browser*.py`). Web addresses are not paths.
- Every dotted name of our own code in those same texts (`explorer.app.layout.chart`, `model.edits.scoped`) names a
  module that exists and, after it, something that module defines.
- A file and a name written as a pair, `` `model/pretrained.py`, `convert_gpt2` ``, name a function, class or value
  that file defines.
- Every link in README.md and docs/*.md to another file leads to one (relative to the document, as GitHub reads it),
  and a link to a heading (`figures.md#the-test-suite`) finds that heading.
"""
import ast
import functools
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
README_LIMIT = 15_000

PYTHON = sorted([*(path for folder in ("explorer", "model", "pages", "bench", "tests", "scripts")
                   for path in (ROOT / folder).rglob("*.py")), ROOT / "streamlit_app.py", ROOT / "dev.py"])
# Settings files and shell scripts are read whole: mostly comments, and a path in their own lines must exist too.
SETTINGS = [ROOT / ".streamlit/config.toml", ROOT / ".ci/run", ROOT / "pytest.ini", ROOT / "requirements.txt",
            ROOT / "requirements-dev.txt", *sorted((ROOT / "scripts").glob("*.sh"))]

# Paths made at run time, so absent from a fresh clone (each git-ignored):
MADE_AT_RUN_TIME = {
    "static/",               # the app copies plotly.js (explorer/app/components/vendor/) here when it starts
    "build/screenshots/",    # the browser tests write every page's screenshot here (tests/test_browser.py)
    ".venv/",                # python3 dev.py run and test create the virtual environment here
    ".streamlit/secrets.toml",   # a server's own secrets (a hub token), written by whoever deploys; never in git
}

EXTENSIONS = ("py", "md", "json", "toml", "txt", "png", "js", "sh", "ini", "safetensors", "css", "html", "npz")
TOP_FOLDERS = sorted({path.name for path in ROOT.iterdir() if path.is_dir() and path.name not in (".git", ".venv")}
                     | {p.split("/")[0] for p in MADE_AT_RUN_TIME})
URL = re.compile(r"\b[a-z][a-z+.-]*://\S+")
# a word with a slash: folders and a name, not preceded by anything that makes it part of a longer word or address
PATHLIKE = re.compile(r"(?<![$\w/.<>*-])((?:\.\.?/)*[\w.<>*-]+(?:/[\w.<>*-]+)*/?)")
PAIR = re.compile(r"`([\w/.-]+\.py)`, `(\w+)`")
LINK = re.compile(r"\]\(([^)\s]*)\)")
DOTTED = re.compile(r"(?<![\w./-])((?:explorer|model|bench)(?:\.\w+)+)")


def is_path(word: str) -> bool:
    """Whether `word`, as written in a text, names a repository path by its form."""
    if "/" not in word:
        return False
    first = word.lstrip("./").split("/")[0] if word.startswith("../") else word.split("/")[0]
    return first in TOP_FOLDERS or re.search(r"\.(%s)$" % "|".join(EXTENSIONS), word) is not None


def paths_in(text: str) -> list[str]:
    """Every path `text` names (see the module's docstring), trailing punctuation left out."""
    text = URL.sub(" ", text)
    found = []
    for match in PATHLIKE.finditer(text):
        word = match.group(1).rstrip(".")
        if is_path(word):
            found.append(word)
    return found


def exists(path: str, folder: Path) -> bool:
    """Whether `path` (relative to the root, or to `folder` when it starts with ../) names something in the
    repository, or is made at run time."""
    base = folder if path.startswith("../") else ROOT
    if any(path == made or path.startswith(made) or path + "/" == made for made in MADE_AT_RUN_TIME):
        return True
    if "*" in path or "<" in path:
        pattern = re.sub(r"<[^>]*>", "*", path).rstrip("/")
        return any(base.glob(pattern))
    return (base / path).exists()


def comments_and_docstrings(path: Path) -> str:
    """The docstrings (module, class, function) and comments of a Python file, one per line."""
    source = path.read_text()
    parts = [ast.get_docstring(node, clean=False) or "" for node in ast.walk(ast.parse(source))
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    parts += [token.string for token in tokenize.generate_tokens(io.StringIO(source).readline)
              if token.type == tokenize.COMMENT]
    return "\n".join(parts)


# Every file whose text the checks read: the documents and the settings whole, the Python files' docstrings and
# comments (`text_of`; read when its test runs, not when the tests are collected).
TEXT_FILES = sorted([README, *DOCS, *SETTINGS, *PYTHON], key=lambda path: str(path.relative_to(ROOT)))


@functools.cache
def text_of(path: Path) -> str:
    """What the checks read of `path`: a Python file's docstrings and comments, any other file whole."""
    return comments_and_docstrings(path) if path.suffix == ".py" else path.read_text()


def defines(module: Path, name: str) -> bool:
    """Whether `module` (a .py file) defines `name` at its top level: a function, class, assignment or import."""
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(name in {n.id for n in ast.walk(t) if isinstance(n, ast.Name)} for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name.split(".")[0]) == name for alias in node.names):
                return True
    return False


def defined_anywhere(module: Path) -> set[str]:
    """Every function, class (and method) and assigned name in a .py file."""
    names = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def dotted_problem(dotted: str) -> str | None:
    """What is wrong with a dotted name of our code, or None. `model.run` is a model object's method, not a module:
    under model/ and bench/ only a name whose second part is a module of that package is checked; explorer.* always.
    """
    parts = dotted.split(".")
    package = ROOT / parts[0]
    if parts[0] != "explorer" and not ((package / f"{parts[1]}.py").exists() or (package / parts[1]).is_dir()):
        return None
    folder, i = package, 1
    while i < len(parts) and (folder / parts[i]).is_dir():           # a subpackage
        folder, i = folder / parts[i], i + 1
    if i < len(parts) and (folder / f"{parts[i]}.py").exists():      # a module
        module, i = folder / f"{parts[i]}.py", i + 1
    else:
        module = folder / "__init__.py"
    if i == len(parts):
        return None if module.exists() else "no such module"
    if not module.exists() or not defines(module, parts[i]):
        return f"{module.relative_to(ROOT)} defines no {parts[i]}"
    return None


def anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lstrip("#").strip().lower()).replace(" ", "-")


def link_problem(target: str, document: Path) -> str | None:
    """What is wrong with a link from `document` to `target`, or None (web addresses are not checked)."""
    if URL.match(target) or target.startswith("mailto:"):
        return None
    file, _, heading = target.partition("#")
    path = (document.parent / file) if file else document
    if not path.exists():
        return "no such file"
    if heading and path.suffix == ".md":
        headings = {anchor(line) for line in path.read_text().splitlines() if line.startswith("#")}
        if heading not in headings:
            return f"no heading #{heading}"
    return None


def where(path: Path) -> str:
    return str(path.relative_to(ROOT))


# --- the README --------------------------------------------------------------------------------------------------


def test_the_readme_is_read_in_five_minutes():
    assert len(README.read_text()) <= README_LIMIT, f"README.md has {len(README.read_text()):,} characters"


def test_the_readme_links_every_file_in_docs():
    assert DOCS, "docs/ holds no guide"
    readme = README.read_text()
    assert not [where(doc) for doc in DOCS if f"]({where(doc)})" not in readme]


def test_the_readme_gives_the_commands_ci_runs():
    readme, ci = README.read_text(), (ROOT / ".ci/run").read_text()
    assert "python3 dev.py test" in ci and "python3 dev.py test" in readme and "python3 dev.py run" in readme


# --- every path and dotted name ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", TEXT_FILES, ids=where)
def test_every_path_a_text_names_exists(path):
    missing = sorted({word for word in paths_in(text_of(path)) if not exists(word, path.parent)})
    assert not missing, f"{where(path)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("path", TEXT_FILES, ids=where)
def test_every_dotted_name_of_our_code_a_text_names_exists(path):
    wrong = sorted({f"{name}: {problem}" for name in DOTTED.findall(URL.sub(" ", text_of(path)))
                    if (problem := dotted_problem(name))})
    assert not wrong, f"{where(path)} names code that does not exist: {wrong}"


@pytest.mark.parametrize("path", TEXT_FILES, ids=where)
def test_every_file_and_name_pair_a_text_names_exists(path):
    wrong = sorted({f"{file}, {name}" for file, name in PAIR.findall(text_of(path))
                    if (ROOT / file).exists() and name not in defined_anywhere(ROOT / file)})
    assert not wrong, f"{where(path)} names something a file does not define: {wrong}"


@pytest.mark.parametrize("path", [README, *DOCS], ids=where)
def test_every_link_of_a_document_leads_somewhere(path):
    wrong = sorted({f"{target}: {problem}" for target in LINK.findall(path.read_text())
                    if (problem := link_problem(target, path))})
    assert not wrong, f"{where(path)} has broken links: {wrong}"


# --- the checks catch what they should -----------------------------------------------------------------------------


def test_paths_are_recognised_by_their_form():
    text = ("See `explorer/cache.py`, explorer/app/ and .ci/run (and docs/screenshots/home.png). "
            "Not https://github.com/streamlit/streamlit/pull/16052, app/static/ or 1/2, and/or a fraction.")
    assert paths_in(text) == ["explorer/cache.py", "explorer/app/", ".ci/run", "docs/screenshots/home.png"]
    assert paths_in("a glob tests/test_browser*.py and model/checkpoints/<name>.json") == [
        "tests/test_browser*.py", "model/checkpoints/<name>.json"]


def test_a_moved_file_is_caught_and_run_time_paths_are_allowed():
    assert not exists("explorer/cache.py", ROOT) and exists("explorer/app/cache.py", ROOT)
    assert exists("static/plotly-1234.min.js", ROOT) and exists("build/screenshots/", ROOT)
    assert exists("tests/test_browser*.py", ROOT) and not exists("tests/test_nothing*.py", ROOT)
    assert exists("model/checkpoints/<name>.json", ROOT)
    assert exists("../README.md", ROOT / "docs") and not exists("../README.md", ROOT)


def test_a_dotted_name_is_checked_against_the_module_that_should_define_it():
    assert dotted_problem("explorer.app.cache.Store") is None and dotted_problem("explorer.app.cache") is None
    assert dotted_problem("explorer.layout.chart") is not None             # moved to explorer.app.layout
    assert dotted_problem("explorer.app.layout.nothing_here") is not None
    assert dotted_problem("model.edits.scoped") is None and dotted_problem("model.edits.nothing") is not None
    assert dotted_problem("model.run") is None                             # a model object's method
    assert dotted_problem("explorer.classroom.open_store") is None         # a package's __init__


def test_a_link_to_a_missing_file_or_heading_is_caught():
    assert anchor("## Why the charts are drawn this way") == "why-the-charts-are-drawn-this-way"
    assert anchor("# Every student: keyboard, screen reader, phone") == "every-student-keyboard-screen-reader-phone"
    assert link_problem("docs/architecture.md#public-api", README) is None
    assert link_problem("docs/architecture.md#no-such-heading", README) is not None
    assert link_problem("docs/nothing.md", README) is not None
    assert link_problem("https://share.streamlit.io", README) is None


def test_a_pair_of_a_file_and_a_name_is_checked():
    assert PAIR.findall("(`model/pretrained.py`, `convert_gpt2`) and (`explorer/plot.py`, `no_such`)") == [
        ("model/pretrained.py", "convert_gpt2"), ("explorer/plot.py", "no_such")]
    assert "convert_gpt2" in defined_anywhere(ROOT / "model/pretrained.py")
    assert "no_such" not in defined_anywhere(ROOT / "explorer/plot.py")
