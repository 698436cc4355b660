"""The layering rule, read from the imports: reusable code lives in the `minibert` package, and
the scripts stay thin.

Outside tests/, a file imports only the standard library, third-party packages, `minibert`,
`data`, and the shared modules of its own folder (bench/ imports `bench.*`, experiments/
imports `experiments.*`); `minibert/` itself imports nothing of the project but `minibert`.
Nothing imports a top-level script (train_mlm.py, finetune.py, ...), and no file edits
`sys.path`.

Inside the package, the reference modules (`minibert/*.py`: the model and what it is read with)
hold no command-line code: they never import the run machinery (`minibert/run/`), never stop the
process (`sys.exit`, `die`), and name no command-line flag in a message. No two modules of the
package import each other, directly or through others (a lazy import inside a function counts).
"""

import ast
import pathlib
import re

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


def _package_imports(source: str, module: str) -> set[str]:
    """The `minibert` modules that `module` (e.g. "minibert.run.training") imports, anywhere in it."""
    package = module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("minibert")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
                names = [f"{target}.{a.name}" for a in node.names] if not node.module else [target]
            else:
                names = [node.module] if node.module.startswith("minibert") else []
            found |= set(names)
    return found


def reference_violations(source: str, name: str = "<file>") -> list[str]:
    """What in a reference module's `source` is command-line code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m == "run" or m.startswith(("run.", "minibert.run")) for m in modules):
                found.append(f"{name}:{node.lineno}: imports the run machinery")
        elif isinstance(node, ast.Call):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if called in {"exit", "die"}:
                found.append(f"{name}:{node.lineno}: calls {called}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(r"(^|\s)--[a-z]", node.value):
            found.append(f"{name}:{node.lineno}: names a command-line flag")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle of `graph` (module -> modules it imports), each once, as a path."""
    found, done = [], set()

    def visit(node, path):
        if node in path:
            cycle = path[path.index(node):]
            if frozenset(cycle) not in done:
                done.add(frozenset(cycle))
                found.append(cycle + [node])
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, path + [node])

    for start in sorted(graph):
        visit(start, [])
    return found


def package_modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted((ROOT / "minibert").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def test_the_reference_checks_catch_each_kind_of_break():
    """Command-line code in a reference module, seen on one-line files, and a circle of two modules."""
    assert reference_violations("from .run.training import adamw") == ["<file>:1: imports the run machinery"]
    assert reference_violations("from minibert.run import die") == ["<file>:1: imports the run machinery"]
    assert reference_violations("import sys\nsys.exit('no')") == ["<file>:2: calls exit"]
    assert reference_violations("raise ValueError('lower --lr')") == ["<file>:1: names a command-line flag"]
    assert reference_violations("x = 'a-b -- c'\nfrom .model import BertModel") == []
    assert _package_imports("from .unpad import RealTokens\nfrom . import die", "minibert.model") == {
        "minibert.unpad", "minibert.die"}
    assert _package_imports("from ..lora import add_lora", "minibert.run.classification") == {"minibert.lora"}
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_reference_modules_hold_no_command_line_code_and_the_package_has_no_import_circle():
    modules = package_modules()
    reference = {m: p for m, p in modules.items() if p.parent == ROOT / "minibert"}
    assert {"minibert.model", "minibert.masking", "minibert.checkpoint", "minibert.unpad"} <= set(reference)
    assert "minibert.run.folders" in modules
    found = []
    for module, path in reference.items():
        found += reference_violations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert found == []
    graph = {}
    for module, path in modules.items():
        imported = _package_imports(path.read_text(encoding="utf-8"), module if path.stem != "__init__"
                                    else module + ".__init__")
        graph[module] = {m if m in modules else m.rsplit(".", 1)[0] for m in imported} - {module}
    assert cycles({m: deps & set(modules) for m, deps in graph.items()}) == []
