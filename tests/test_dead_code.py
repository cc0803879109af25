"""Nothing dead: every function and class of the app, the model and the benchmark has a caller outside the tests,
unless it is public API a notebook may call, named below and documented in docs/architecture.md."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [*(path for folder in ("explorer", "model", "pages", "bench", "scripts") for path in (ROOT / folder).rglob("*.py")),
           ROOT / "streamlit_app.py", ROOT / "dev.py"]
# For a notebook (docs/architecture.md, "Public API"): a model's edits merged, a tokenizer read from its file,
# an encoder-decoder's answer to a text.
PUBLIC_API = {"combine", "load_tokenizer", "transduce"}


def defined_and_used(paths) -> tuple[dict[str, list[str]], set[str]]:
    """(every function and class name -> where it is defined, every name the code mentions: as a name, an attribute
    or a string such as a callback's name)."""
    defined, used = {}, set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.setdefault(node.name, []).append(f"{path.name}:{node.lineno}")
            elif isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                used.add(node.value)
    return defined, used


def test_every_function_has_a_caller_outside_the_tests_or_is_documented_public_api():
    defined, used = defined_and_used(SOURCES)
    dead = {name: where for name, where in defined.items()
            if name not in used and name not in PUBLIC_API and not name.startswith("__")}
    assert not dead, f"defined but never called outside the tests: {dead}"


def test_the_public_api_exists_and_is_documented():
    defined, _ = defined_and_used(SOURCES)
    documented = (ROOT / "docs/architecture.md").read_text()
    assert PUBLIC_API <= set(defined) and all(f"`{name}`" in documented for name in PUBLIC_API)


def test_the_finder_finds_a_function_nobody_calls(tmp_path):
    (tmp_path / "a.py").write_text("def used():\n    pass\n\ndef lonely():\n    used()\n")
    defined, used = defined_and_used([tmp_path / "a.py"])
    assert {name for name in defined if name not in used} == {"lonely"}
