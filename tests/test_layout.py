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

One home per concept: JSON is parsed only in minibert/files.py (`parse_json`), the corpus cache's
functions live only in minibert/run/corpus.py (no reference module names its files), and
--device is added only by minibert/run/flags.py (`add_device`). `make run`, what a user runs,
calls the scripts and no module of experiments/.
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


# ---- one home per concept -----------------------------------------------------------------------

CORPUS_CACHE = {"corpus_lines", "corpus_tokenizer", "corpus_blocks"}  # minibert/run/corpus.py's, and only its
CORPUS_FILES = {"pretrain", "tokens"}  # folders inside a prepared corpus (and `tokenizer-N.json` files)


def make_recipe(makefile: str, target: str) -> list[str]:
    """The recipe lines of one Makefile target: the tab-indented lines right after `target:`."""
    lines = makefile.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"{re.escape(target)}\s*:", line))
    recipe = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def experiment_calls(recipe: list[str]) -> list[str]:
    """The recipe lines that run a module of experiments/ (`-m experiments.x` or `experiments/x.py`)."""
    return [line for line in recipe if re.search(r"-m\s+experiments\b|\bexperiments/", line)]


def home_violations(source: str, name: str = "<file>") -> list[str]:
    """What in `source` does outside its one home: parses JSON (minibert/files.py's `parse_json`
    does), defines a function of the corpus cache (minibert/run/corpus.py), or adds --device
    (minibert/run/flags.py's `add_device`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in {"load", "loads"} and getattr(node.value, "id", None) == "json":
            found.append(f"{name}:{node.lineno}: parses JSON")
        elif isinstance(node, ast.ImportFrom) and node.module == "json" and {a.name for a in node.names} & {"load", "loads"}:
            found.append(f"{name}:{node.lineno}: parses JSON")
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in CORPUS_CACHE:
            found.append(f"{name}:{node.lineno}: defines {node.name}")
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument" and node.args
              and isinstance(node.args[0], ast.Constant) and node.args[0].value == "--device"):
            found.append(f"{name}:{node.lineno}: adds --device")
    return found


def corpus_file_names(source: str, name: str = "<file>") -> list[str]:
    """The places where a reference module's `source` names a file of a prepared corpus's cache."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                node.value in CORPUS_FILES or node.value.startswith("tokenizer-")):
            found.append(f"{name}:{node.lineno}: names the corpus cache's {node.value!r}")
    return found


HOMES = {"parses JSON": "minibert/files.py", "defines corpus_": "minibert/run/corpus.py",
         "adds --device": "minibert/run/flags.py"}


def test_the_home_checks_catch_each_kind_of_break():
    """Each rule's break, seen on a one-line example: an experiment in `make run`, JSON parsed
    with json.loads (or an imported `loads`), the corpus cache's function defined again, --device
    added by hand, a reference module naming the cache's files."""
    makefile = "run: setup\n\tpython train_mlm.py\n\tpython -m experiments.probes --summary x\n\nx:\n\tpython -m experiments.compare\n"
    assert make_recipe(makefile, "run") == ["python train_mlm.py", "python -m experiments.probes --summary x"]
    assert experiment_calls(make_recipe(makefile, "run")) == ["python -m experiments.probes --summary x"]
    assert experiment_calls(["python experiments/compare.py methods"]) == ["python experiments/compare.py methods"]
    assert experiment_calls(["python probe.py --summary runs/mlm-en"]) == []
    assert home_violations("import json\nd = json.loads(text)") == ["<file>:2: parses JSON"]
    assert home_violations("from json import load") == ["<file>:1: parses JSON"]
    assert home_violations("def corpus_blocks(folder):\n    pass") == ["<file>:1: defines corpus_blocks"]
    assert home_violations("p.add_argument('--device', default='cpu')") == ["<file>:1: adds --device"]
    assert home_violations("import json\ntext = json.dumps({})\np.add_argument('--devices')\nadd_device(p)") == []
    assert corpus_file_names("path = os.path.join(folder, 'pretrain', 'train.txt')") == [
        "<file>:1: names the corpus cache's 'pretrain'"]
    assert corpus_file_names("x = f'tokenizer-{n}.json'") == ["<file>:1: names the corpus cache's 'tokenizer-'"]


def test_make_run_calls_no_experiment():
    """`make run` is what a user runs: it calls the scripts, never a module of experiments/."""
    recipe = make_recipe((ROOT / "Makefile").read_text(encoding="utf-8"), "run")
    assert any("train_mlm.py" in line for line in recipe)
    assert experiment_calls(recipe) == []


def test_json_parsing_the_corpus_cache_and_device_each_have_one_home():
    """Outside tests: JSON is parsed only in minibert/files.py, the corpus cache's functions are
    defined only in minibert/run/corpus.py, --device is added only in minibert/run/flags.py (no
    script excepted), and no reference module (minibert/*.py) names a file of the corpus cache."""
    found = []
    for rel in project_files():
        source = (ROOT / rel).read_text(encoding="utf-8")
        found += [v for v in home_violations(source, str(rel))
                  if not any(kind in v and str(rel) == home for kind, home in HOMES.items())]
        if rel.parent == pathlib.Path("minibert"):
            found += corpus_file_names(source, str(rel))
    defined = home_violations((ROOT / "minibert" / "run" / "corpus.py").read_text(encoding="utf-8"))
    assert {v.split("defines ")[1] for v in defined if "defines" in v} == CORPUS_CACHE
    assert found == []
