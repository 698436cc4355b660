"""Every command answers --help: exit status 0, an English usage text on standard output, and
nothing fetched, written or computed first (the data cache is left as it was)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COMMANDS = [[p.name] for p in sorted(REPO.glob("*.py"))] + [["data/prepare.py"], ["-m", "experiments.compare"],
                                                              ["finetune.py", "train"], ["finetune.py", "predict"]]


def cache_listing() -> set[str]:
    root = REPO / "data" / "cache"
    return {os.path.join(d, f) for d, _, files in os.walk(root) for f in files} if root.is_dir() else set()


def test_every_script_is_listed():
    """The glob finds the scripts (a wrong path would leave the tests below checking nothing); a new
    top-level script joins the list without a change here."""
    assert {"train_mlm.py", "finetune.py", "exercise.py", "probe.py"} <= {c[0] for c in COMMANDS}


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_is_english_and_does_nothing_else(command):
    """exercise.py used to ignore --help: it fetched MiniLM, ran all three exercises and printed
    Chinese. Now every command prints its usage and stops."""
    before = cache_listing()
    r = subprocess.run([sys.executable, *command, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: ")
    assert not re.search(r"[\u4e00-\u9fff]", r.stdout), "the help text is in English"
    assert cache_listing() == before
