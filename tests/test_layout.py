"""The layering rule, read from the imports: reusable code lives in the `minibert` package, and
the scripts stay thin.

Outside tests/, a file imports only the standard library, third-party packages, `minibert`,
`data`, and the shared modules of its own folder (bench/ imports `bench.*`, experiments/
imports `experiments.*`); `minibert/` itself imports nothing of the project but `minibert`.
Nothing imports a top-level script (train_mlm.py, finetune.py, ...), and no file edits
`sys.path`.
"""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = {p.stem for p in ROOT.glob("*.py")}
FIRST_PARTY = SCRIPTS | {"minibert", "data", "bench", "experiments", "tests", "conftest"}
ALLOWED = {  # folder -> the project's top-level names its files may import
    "": {"minibert", "data"},
    "minibert": {"minibert"},
    "data": {"minibert", "data"},
    "bench": {"minibert", "data", "bench"},
    "experiments": {"minibert", "data", "experiments"},
}


def violations(source: str, folder: str, name: str = "<file>") -> list[str]:
    """What in `source` (a file of `folder`, "" = the repository's root) breaks the rule."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module]
        else:
            modules = []
        for module in modules:
            top = module.split(".")[0]
            if top in FIRST_PARTY and top not in ALLOWED[folder]:
                found.append(f"{name}:{node.lineno}: imports {module}")
        if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", None) == "sys":
            found.append(f"{name}:{node.lineno}: touches sys.path")
    return found


def project_files():
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in {"tests", ".venv", "runs", "build"} or "cache" in rel.parts:
            continue
        yield rel


def test_the_checker_catches_each_kind_of_break():
    """The rule's three breaks, each seen on a one-line file: a script imported from a bench
    module, the data folder imported from the package, and sys.path edited in a script."""
    assert violations("import train_mlm", "bench") == ["<file>:1: imports train_mlm"]
    assert violations("from data.prepare import prepare", "minibert") == ["<file>:1: imports data.prepare"]
    assert violations("import sys\nsys.path.insert(0, '.')", "") == ["<file>:2: touches sys.path"]
    assert violations("from experiments.harness import Task", "bench") == ["<file>:1: imports experiments.harness"]
    assert violations("import torch\nfrom minibert.text import pack_blocks\nfrom .model import BertModel",
                      "minibert") == []


def test_no_file_outside_tests_breaks_the_layering_rule():
    files = list(project_files())
    assert {"train_mlm.py", "finetune.py", "minibert/model.py", "bench/common.py"} <= {str(f) for f in files}
    found = []
    for rel in files:
        folder = rel.parts[0] if len(rel.parts) > 1 else ""
        found += violations((ROOT / rel).read_text(encoding="utf-8"), folder, str(rel))
    assert found == []


def test_every_cited_requirement_is_defined_in_the_repository():
    """Every S-number that code, tests or docs cite (S1 ... S32) has its entry in docs/spec.md."""
    import re

    spec = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
    defined = set(re.findall(r"^- \*\*(S\d+)\*\*", spec, flags=re.M))
    cited = set()
    for path in [*ROOT.glob("*.md"), *ROOT.glob("docs/*.md"), *(ROOT / p for p in project_files()),
                 *ROOT.glob("tests/*.py")]:
        cited |= set(re.findall(r"\b(S\d{1,2})\b", path.read_text(encoding="utf-8")))
    assert {"S1", "S13", "S32"} <= cited
    assert sorted(cited - defined, key=lambda s: int(s[1:])) == []
