"""Run folders: what a run may write where, a lock against a second process, checkpoints of a
run that are never seen half-written, and JSON files written atomically.
"""

from __future__ import annotations

import json
import math
import os
import shutil

import torch

from . import die

try:
    import fcntl  # POSIX: an advisory lock that the kernel releases when the process dies
except ImportError:  # Windows: run folders are claimed without a lock
    fcntl = None

# ---- run folders ----------------------------------------------------------------------------

RUN_FILE = "run.json"  # {"kind": ...}: what wrote this folder
LOCK_FILE = ".lock"


def run_kind(out: str) -> str | None:
    """What `out` holds: None (nothing), the kind its run.json names, or a guess for a folder
    written before run.json existed ("pretraining", "fine-tuning", "other files")."""
    if not os.path.isdir(out):
        return None
    entries = set(os.listdir(out)) - {LOCK_FILE}
    if not entries:
        return None
    try:
        with open(os.path.join(out, RUN_FILE), encoding="utf-8") as f:
            return str(json.load(f)["kind"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if "checkpoints" in entries:
        return "pretraining"
    if "best" in entries:
        return "fine-tuning"
    return "other files"


def check_run_folder(out: str, kind: str, resume: bool = False, overwrite: bool = False,
                     inputs: tuple[str, ...] = ()) -> str | None:
    """Stop with one line, before anything is loaded or written, if `out` cannot be this run's
    folder: it is a file, it is not writable, or it holds another run (another kind, or this
    kind without --resume) and `overwrite` was not asked for. `overwrite` replaces a run only:
    never a folder of other files, and never one that holds an input of this run (`inputs`:
    the checkpoint, the data). Returns what it holds."""
    if os.path.exists(out) and not os.path.isdir(out):
        die(f"--out {out} is a file; give a folder")
    found = run_kind(out)
    if found == "other files":
        die(f"--out {out} already holds other files; choose another --out (--overwrite only replaces a run)")
    if found and not overwrite and not (resume and found == kind):
        hint = "pass --resume to continue it, " if found == kind == "pretraining" else ""
        die(f"--out {out} already holds a {found} run; {hint}pass --overwrite to replace it, or choose another --out")
    if overwrite:
        root = os.path.realpath(out)
        for path in inputs:
            inside = os.path.realpath(path) == root or os.path.realpath(path).startswith(root + os.sep)
            if path and inside:
                die(f"--out {out} holds {path}, an input of this run: --overwrite would delete it; "
                    "choose another --out")
    parent = os.path.abspath(out)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        die(f"cannot write to --out {out}: {parent} is not writable; choose another --out")
    return found


def claim_run_folder(out: str, kind: str, resume: bool = False, overwrite: bool = False,
                     inputs: tuple[str, ...] = ()):
    """Make `out` this run's folder (check_run_folder's checks first). A lock file stops a second
    process from using the folder while this one runs; with `overwrite` everything the folder
    held is removed, so nothing of an old run is mixed in. Returns the open lock file: keep it
    for the life of the run."""
    found = check_run_folder(out, kind, resume, overwrite, inputs)
    try:
        os.makedirs(out, exist_ok=True)
        lock = open(os.path.join(out, LOCK_FILE), "a+", encoding="utf-8")
    except OSError as e:
        die(f"cannot write to --out {out}: {e.strerror}; choose another --out")
    if fcntl is not None:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.seek(0)
            die(f"--out {out} is in use by another process (pid {lock.read().strip() or '?'}); "
                "wait for it to finish or choose another --out")
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    if found and overwrite:
        for name in set(os.listdir(out)) - {LOCK_FILE}:
            path = os.path.join(out, name)
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
    write_json(os.path.join(out, RUN_FILE), {"kind": kind})
    return lock


def write_json(path: str, obj) -> None:
    """Write JSON to a temporary name and rename it into place: never seen half-written."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def read_json(path: str):
    """A JSON file, or None when it is missing or damaged (cut short by a crash or a full disk)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# ---- checkpoint folders ---------------------------------------------------------------------


def checkpoints(out: str) -> list[str]:
    """The `OUT/checkpoints/step-*` folders, oldest first: a folder only gets that name once it is complete."""
    root = os.path.join(out, "checkpoints")
    steps = sorted(d for d in os.listdir(root) if d.startswith("step-")) if os.path.isdir(root) else []
    return [os.path.join(root, d) for d in steps]


def latest_checkpoint(out: str) -> str | None:
    """The newest complete checkpoint folder of a pretraining run, or None."""
    return (checkpoints(out) or [None])[-1]


def resolve_checkpoint(path: str) -> str:
    """A checkpoint folder as given, or a pretraining run folder's newest checkpoint."""
    if os.path.isfile(os.path.join(path, "config.json")):
        return path
    return latest_checkpoint(path) or path


def save_checkpoint(out: str, step: int, model, tokenizer, state: dict, keep: int) -> str:
    """Write `OUT/checkpoints/step-NNNNNN` into a temporary folder and rename it into place; the
    file `latest` names it for people; only the newest `keep` are kept."""
    root = os.path.join(out, "checkpoints")
    name = f"step-{step:06d}"
    final, tmp = os.path.join(root, name), os.path.join(root, f".{name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, tokenizer=tokenizer)
    torch.save(state, os.path.join(tmp, "training_state.pt"))
    if os.path.isdir(final):
        shutil.rmtree(final)
    os.rename(tmp, final)
    with open(os.path.join(root, "latest.tmp"), "w", encoding="utf-8") as f:
        f.write(name + "\n")
    os.replace(os.path.join(root, "latest.tmp"), os.path.join(root, "latest"))
    for old in checkpoints(out)[:-keep]:
        shutil.rmtree(old)
    return final


def truncate_metrics(path: str, step: int) -> None:
    """After a resume from `step`, drop the log lines of steps that will be run again, and a
    line a crash cut short."""
    if not os.path.isfile(path):
        return
    kept = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("step", math.inf) <= step:
                kept.append(json.dumps(record) + "\n")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.writelines(kept)
    os.replace(path + ".tmp", path)
