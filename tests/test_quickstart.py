"""The README's quick start, every command as written, on tiny data (nothing downloaded).

The commands are read from the README's "Quick start" block and run in a scratch folder laid out
as the repository is after `make run`: `runs/mlm-en` is a 2-step train_mlm.py run whose last
checkpoint also sits where the 6,000-step run puts it, `docs/*.md` and
`data/examples/topics.csv` are the repository's own. Each `.venv/bin/python SCRIPT ARGS` runs as
SCRIPT.main(ARGS + SHRINK[SCRIPT]): the README's flags, then the few that keep it small (the last
value of a flag wins; none for `predict`); `echo TEXT | ...` feeds TEXT on standard input; `python -c CODE` runs CODE.
"""

import glob
import importlib
import io
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest

import train_mlm

REPO = Path(__file__).resolve().parents[1]
TINY = ["--layers", "2", "--hidden", "64", "--heads", "2", "--vocab-size", "160", "--seq-len", "32",
        "--batch-size", "16", "--max-steps", "2", "--no-progress"]


def quick_start() -> list[str]:
    """The command lines of the README's quick start block (comments and blank lines left out)."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"## Quick start.*?```bash\n(.*?)```", readme, re.S)
    assert block, "README.md has no ```bash block under a 'Quick start' heading"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def run_line(line: str, shrink: dict, capsys, monkeypatch) -> str:
    """Run one quick-start line in this process; return what it printed."""
    stdin = ""
    if " | " in line:
        left, line = line.split(" | ", 1)
        echo, *words = shlex.split(left)
        assert echo == "echo", line
        stdin = " ".join(words) + "\n"
    python, *argv = shlex.split(line)
    assert python == ".venv/bin/python", line
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()
    if argv[0] == "-c":
        exec(argv[1], {})
    else:
        script, args = argv[0], [a for arg in argv[1:] for a in (sorted(glob.glob(arg)) or [arg])]
        extra = [] if args[:1] == ["predict"] else shrink.get(script, [])
        importlib.import_module(script.removesuffix(".py")).main(args + extra)
    return capsys.readouterr().out


@pytest.fixture
def workspace(tmp_path, corpus, monkeypatch):
    """The scratch folder as `make run` leaves the repository (see the module docstring)."""
    shutil.copytree(REPO / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("img", "lab"))
    (tmp_path / "data" / "examples").mkdir(parents=True)
    shutil.copy(REPO / "data" / "examples" / "topics.csv", tmp_path / "data" / "examples")
    cache = str(tmp_path / "cache")
    train_mlm.main(["--corpus", str(corpus), "--data-root", cache, "--out", str(tmp_path / "runs" / "mlm-en"), *TINY])
    checkpoints = tmp_path / "runs" / "mlm-en" / "checkpoints"
    shutil.copytree(checkpoints / "step-000002", checkpoints / "step-006000")
    monkeypatch.chdir(tmp_path)
    return {"train_mlm.py": ["--data-root", cache, *TINY], "finetune.py": ["--epochs", "2", "--no-progress"]}


def test_the_quick_start_runs_as_written(workspace, capsys, monkeypatch):
    """Fill-mask prints a line per [MASK]; the pretraining on docs/*.md writes its checkpoint; the
    fine-tuning on the one labelled file splits it 240/30/30 (10% of each label's 100 rows for
    validation, 10% for test) and saves best/; predict labels the sentence with one of the three
    topics; transformers' fill-mask pipeline loads the pretraining checkpoint and the
    text-classification pipeline the fine-tuned one, and the pipeline gives the label and the
    probability predict printed: to its 4 decimals (5e-5) and float32 rounding, for the two codes sum
    in other orders: a logit ends 2 layers of 9 chained sums, the pooler and the classifier, about
    1,400 terms in all (C = 64, I = 256), at |values| <= 4: 1,400 x 6.0e-8 x 4 = 3.4e-4, a probability
    half that (softmax's slope <= 1/2), so 5e-5 + 1.7e-4 = 2.2e-4, checked at 5e-4."""
    lines = quick_start()
    assert len(lines) == 6, lines
    scripts = [shlex.split(line.split(" | ")[-1])[1] for line in lines]
    assert scripts == ["fill_mask.py", "train_mlm.py", "finetune.py", "finetune.py", "-c", "-c"], scripts
    assert train_mlm.parse_args([]).max_steps == 6000  # so make run's last checkpoint is step-006000

    out = run_line(lines[0], workspace, capsys, monkeypatch)
    assert "mask 1:" in out, out
    run_line(lines[1], workspace, capsys, monkeypatch)
    assert (Path("runs/mlm-mine/checkpoints/step-000002/model.safetensors")).is_file()
    out = run_line(lines[2], workspace, capsys, monkeypatch)
    assert "split by label (seed 0): 240 training, 30 validation, 30 test rows" in out, out
    assert Path("runs/cls-topics/best/config.json").is_file()
    label, probability, text = run_line(lines[3], workspace, capsys, monkeypatch).strip().split("\t")
    assert label in ("food", "sports", "weather") and text == "Heavy snow is expected in the hills tonight."
    out = run_line(lines[4], workspace, capsys, monkeypatch)
    assert "'score':" in out and "'token_str':" in out, out
    found = re.fullmatch(r"\[\{'label': '(\w+)', 'score': ([0-9.e-]+)\}\]\n", run_line(lines[5], workspace, capsys,
                                                                                          monkeypatch))
    assert found and found.group(1) == label and abs(float(found.group(2)) - float(probability)) < 5e-4, found
