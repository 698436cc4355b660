"""minibert/ never imports numpy or transformers (the design card; transformers is test-only)."""

import ast
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "minibert"

SCRIPT = r"""
import sys, tempfile, warnings
sys.modules["numpy"] = None          # any 'import numpy' now raises ImportError
sys.modules["transformers"] = None
warnings.simplefilter("ignore")      # torch warns that it runs without numpy
import torch, minibert
c = minibert.BertConfig.from_preset("bert-tiny", vocab_size=60)
m = minibert.BertForMaskedLM(c)
ids = torch.randint(5, 60, (2, 12)); ids[:, 0] = 2
att, special = torch.ones_like(ids), ids == 2
x, y, att, sel = minibert.mask_batch(ids, att, special, 4, list(range(5, 60)), torch.Generator().manual_seed(0))
m(x, att, labels=y).loss.backward()
d = tempfile.mkdtemp()
m.save_pretrained(d)
minibert.BertForMaskedLM.from_pretrained(d)
print("OK")
"""


def test_minibert_works_with_numpy_and_transformers_unimportable():
    """In a fresh interpreter where `import numpy` and `import transformers` fail, minibert
    imports, builds, masks, trains a step, saves and loads."""
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip().endswith("OK"), r.stderr[-2000:]


def test_no_module_under_minibert_imports_numpy_or_transformers():
    """Static check of every file, including imports inside functions."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("numpy", "transformers")]
    assert len(list(PACKAGE.rglob("*.py"))) >= 5
    assert offenders == []
