"""Run folders: what a run may write where, a lock against a second process, checkpoints of a
run that are never seen half-written, and JSON files written atomically.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import shutil

import torch

from ..checkpoint import DAMAGED
from ..files import (delete_unless_read, fresh_folder, hold_for_deletion, nearest_existing, no_folder, not_a_file, open_no_link, parse_json,
                     read_bytes, read_held, remove_left_temporaries, repeated_key, sha256_of, try_lock, unlock, write_file)
from ..text import lines_of
from . import die, interrupted, say_warnings, write_advice

# ---- run folders ----------------------------------------------------------------------------

RUN_FILE = "run.json"  # {"kind": ...}: what wrote this folder
LOCK_FILE = ".lock"
KINDS = ("pretraining", "fine-tuning", "probes")
# what each kind of run (and the commands that write beside it: plot_metrics.py's loss.png, probe.py --summary's
# probes.json, attention.py's picture) puts in its folder; --overwrite removes these, never anything else
RUN_ENTRIES = {"pretraining": {"checkpoints", "metrics.jsonl", "summary.json", "probes.json", "loss.png",
                               "attention.png"},
               "fine-tuning": {"metrics.jsonl", "summary.json", "best", "best.tmp", "best.old", "loss.png",
                               "attention.png"},
               "probes": {"results.json", "report.md", "probes_vs_step.png"}}
# the files among them a run of each kind writes itself (the others: other commands, or folders)
RUN_FILES = {"pretraining": ("metrics.jsonl", "summary.json"), "fine-tuning": ("metrics.jsonl", "summary.json"),
             "probes": ("report.md", "results.json", "probes_vs_step.png")}
# the entries that are folders (every other entry is a file)
RUN_FOLDERS = {"checkpoints", "best", "best.tmp", "best.old"}


def kind_without_its_record(out: str) -> str | None:
    """The kind of run whose files are all that `out` holds (its checkpoints/ or best/ among them),
    when its run.json is missing: a run whose record was deleted, which is still not taken for one
    (run.json alone says so), but named as such; None otherwise."""
    if os.path.lexists(os.path.join(out, RUN_FILE)):
        return None
    names = {re.sub(r"\.tmp\d+$", "", n) for n in os.listdir(out)} - {LOCK_FILE}
    return next((kind for kind, entries in RUN_ENTRIES.items()
                 if names and names <= entries and names & {"checkpoints", "best", "results.json"}), None)


def run_kind(out: str) -> str | None:
    """What `out` holds: None (nothing), the kind its run.json names, or "other files". The one
    rule: a folder is a run only if its run.json says so; whatever else holds files is not."""
    if not os.path.isdir(out):
        return None
    if not set(os.listdir(out)) - {LOCK_FILE}:
        return None
    record = read_json(os.path.join(out, RUN_FILE))
    kind = record.get("kind") if isinstance(record, dict) else None
    return kind if kind in KINDS else "other files"


def links_in(out: str) -> list[str]:
    """The symbolic links among what a run reads and writes in `out` (its top level, and its
    checkpoints): a run never writes through one, so a folder holding one is not resumed."""
    found = [os.path.join(out, n) for n in os.listdir(out) if os.path.islink(os.path.join(out, n))]
    root = os.path.join(out, "checkpoints")
    if os.path.isdir(root) and not os.path.islink(root):
        for name in os.listdir(root):
            path = os.path.join(root, name)
            found += [path] if os.path.islink(path) else [
                os.path.join(path, n) for n in (os.listdir(path) if os.path.isdir(path) else ())
                if os.path.islink(os.path.join(path, n))]
    return sorted(found)


def check_run_folder(out: str, kind: str, resume: bool = False, overwrite: bool = False,
                     inputs: tuple[str, ...] = (), flag: str = "--out") -> str | None:
    """Stop with one line, before anything is loaded or written, if `out` cannot be this run's
    folder: it is a file, it is not writable, it lies inside another run, it holds a run of
    another kind, a run another process is using (its lock), or a run of this kind without
    --resume and `overwrite` was not asked for. `overwrite` replaces a run of this kind only: never
    a run of another kind, a folder of other files, one that holds an input of this run (`inputs`:
    the checkpoint, the data) or anything no such run writes (not_the_runs). `flag` names `out`
    in the messages. Returns what it holds."""
    if os.path.exists(out) and not os.path.isdir(out):
        die(f"{flag} {out} is {no_folder(out)}; give a folder")
    if os.path.islink(out) and not os.path.exists(out):
        die(f"{flag} {out} is a link to {os.readlink(out)}, which does not exist: make that folder, or choose "
            f"another {flag}")
    found = run_kind(out)
    if found in KINDS and not overwrite and links_in(out):
        die(f"{flag} {out} holds a symbolic link ({links_in(out)[0]}); a run never writes through one: "
            f"remove it, or choose another {flag}")
    if found == "other files" and run_file_problem(out):
        die(f"{flag} {out}: its {RUN_FILE} {run_file_problem(out)}: remove it, then put "
            f'{{"kind": "{kind}"}} there if the folder is such a run, or choose another {flag}')
    if found == "other files" and os.path.lexists(os.path.join(out, RUN_FILE)):  # a run's record, damaged?
        die(f"{flag} {out}: its {RUN_FILE} does not say which run wrote the folder (it should hold "
            f'{{"kind": "{kind}"}}, or another of {", ".join(KINDS)}); put that back if the folder is such a run, '
            f"or choose another {flag}")
    overwrites = kind != "probes"  # probe.py has no --overwrite: no advice about it
    lost = kind_without_its_record(out) if found == "other files" else None
    if lost:
        die(f"{flag} {out} has no {RUN_FILE}, though all it holds is what a {lost} run writes: if it is one, put "
            f'{{"kind": "{lost}"}} in {os.path.join(out, RUN_FILE)} and run again; or choose another {flag}')
    if found == "other files":
        die(f"{flag} {out} already holds other files; choose another {flag}"
            f"{' (--overwrite only replaces a run)' if overwrites else ''}")
    outer = enclosing_run(out)
    if outer is not None:
        die(f"{flag} {out} is inside the {run_kind(outer)} run {outer}; a run never goes inside another (pruning "
            f"or --overwrite of that one would delete it): choose another {flag}")
    if found in KINDS:
        _check_what_stands_at_its_files(out, kind, found, overwrite, flag)
    holder = lock_holder(out) if found in KINDS else None
    if holder is not None:  # said before anything of the run is read: its files may be half-way through a save
        die(f"{flag} {out} is in use by another process (pid {holder}); wait for it to finish or choose another {flag}")
    nested = runs_inside(out) if found == kind and overwrite else []
    if nested:  # moved in by hand: --overwrite deletes the run's own files only
        die(f"{flag} {out} holds another run, {nested[0]}: --overwrite would delete it; move it out, or choose "
            f"another {flag}")
    replaces = f" (--overwrite only replaces a {kind} run)" if overwrites else ""
    if found in KINDS and found != kind:
        die(f"{flag} {out} already holds a {found} run; choose another {flag}{replaces}")
    if found and not overwrite and not (resume and found == kind):
        hint = "pass --resume to continue it, " if kind == "pretraining" else ""
        die(f"{flag} {out} already holds a {found} run; {hint}pass --overwrite to replace it, or choose another {flag}")
    root = os.path.realpath(out)
    for path in inputs:
        inside = os.path.realpath(path) == root or os.path.realpath(path).startswith(root + os.sep)
        if path and inside and overwrite:
            die(f"{flag} {out} holds {path}, an input of this run: --overwrite would delete it; "
                f"choose another {flag}")
        if path and inside and not found:  # a data cache made there first would make --out a folder of other files
            die(f"{path}, an input of this run, is inside --out {out}, which is not a run yet: give each its own place")
    own = not_the_runs(out, kind) if found == kind and overwrite else []
    if own:  # a file of the user's own: --overwrite deletes what the run wrote, nothing else
        die(f"{flag} {out} holds what no {kind} run writes, {own[0]}: --overwrite would delete it; move it out, "
            f"or choose another {flag}")
    parent = nearest_existing(out)
    if not os.path.isdir(parent):
        die(f"cannot make {flag} {out}: {parent} is a file, not a folder; choose another {flag}")
    if not os.access(parent, os.W_OK | os.X_OK):
        instead = (f"make it writable, or copy the run to a place that is and --resume it there (in another {flag}, "
                   "--resume starts a new run)") if found == kind and resume else f"choose another {flag}"
        die(f"cannot write to {flag} {out}: {parent} is not writable; {instead}")
    return found


def _check_what_stands_at_its_files(out: str, kind: str, found: str, overwrite: bool, flag: str) -> None:
    """Stop with one line where something other than a file stands where the run `found` in `out`
    keeps its lock, or (unless `overwrite` replaces it) where this run writes a file or its
    checkpoints: found now, before a resume reads (and says) anything of the run, not when it
    writes there after its work."""
    lock = os.path.join(out, LOCK_FILE)
    if os.path.lexists(lock) and not os.path.islink(lock) and not os.path.isfile(lock):
        die(f"{flag} {out}: its {LOCK_FILE} is {not_a_file(lock)}, where the run keeps its lock: remove it, or "
            f"choose another {flag}")
    if found != kind or overwrite:
        return
    then = "--resume" if kind == "pretraining" else "run again"
    planted = next((n for n in RUN_FILES[kind] if not_a_file_at(out, n)), None)
    if planted:
        die(f"{flag} {out}: its {planted} is {not_a_file(os.path.join(out, planted))}, where the run writes a file: "
            f"remove it, then {then}")
    ckpts, latest = os.path.join(out, "checkpoints"), os.path.join(out, "checkpoints", "latest")
    if kind == "pretraining" and os.path.lexists(ckpts) and not os.path.isdir(ckpts):
        die(f"{ckpts} is not a folder, and the run writes its checkpoints there; remove it, then --resume")
    if kind == "pretraining" and not_a_file_at(ckpts, "latest"):  # a folder, a named pipe, a socket
        die(f"{latest} is {not_a_file(latest)}, and the run writes its newest step's name there; remove it, "
            "then --resume")


def not_a_file_at(out: str, name: str) -> bool:
    """Whether something other than a plain file or a link stands at `out`/`name` (a folder, a
    named pipe, a socket, a device)."""
    path = os.path.join(out, name)
    return os.path.lexists(path) and not os.path.islink(path) and not os.path.isfile(path)


def run_file_problem(out: str) -> str | None:
    """What stands at `out`'s run.json instead of a plain file, in words ("is a symbolic link to X",
    "is a folder, not a file", "is a named pipe, not a file" ...), or None: advice to put the run's
    record back there would otherwise write through the link, or fail on what stands there."""
    path = os.path.join(out, RUN_FILE)
    if os.path.islink(path):
        return f"is a symbolic link to {os.readlink(path)} (a run never writes through one)"
    if os.path.lexists(path) and not os.path.isfile(path):
        return f"is {not_a_file(path)}"
    return None


def not_the_runs(out: str, kind: str) -> list[str]:
    """What a run folder of `kind` holds that no such run writes (RUN_ENTRIES, its lock and run.json,
    a writer's temporary files; in checkpoints/ its step-N folders, their temporary ones and
    `latest`): the user's own files, which --overwrite must not delete. A folder that stands where
    a run writes a file (a metrics.jsonl that is a folder), or a file where it writes a folder, is
    the user's too."""
    def ours(folder: str, name: str, allowed) -> bool:  # one of `allowed` (or its temporary), a folder only if one
        base, path = re.sub(r"\.tmp\d+$", "", name), os.path.join(folder, name)
        return base in allowed and (os.path.islink(path) or os.path.isdir(path) == (base in RUN_FOLDERS))
    written = RUN_ENTRIES[kind] | {RUN_FILE, LOCK_FILE}
    found = [os.path.join(out, n) for n in sorted(os.listdir(out)) if not ours(out, n, written)]
    root = os.path.join(out, "checkpoints")
    if kind == "pretraining" and os.path.isdir(root) and not os.path.islink(root):
        for name in sorted(os.listdir(root)):
            path = os.path.join(root, name)
            if STEP_OR_TEMPORARY.fullmatch(name):
                found += [f"{path} (it {held})"] if (held := placed_by_hand(path)) else []
            elif not ours(root, name, {"latest"}):
                found.append(path)
    return found


def enclosing_run(out: str) -> str | None:
    """The nearest folder above `out` that is a run (its run.json says so), or None; looked for
    along the path as written and along the one its links lead to (a link into a run's folder)."""
    for here in dict.fromkeys((os.path.abspath(out), os.path.realpath(out))):
        while os.path.dirname(here) != here:
            here = os.path.dirname(here)
            if os.path.isfile(os.path.join(here, RUN_FILE)) and run_kind(here) in KINDS:  # no listing of others
                return here
    return None


def inside_a_runs_folder(out: str) -> str | None:
    """The run whose folders (a checkpoint, checkpoints/, best/ ...) would hold the file `out`, or
    None where `out` lies in no run or in a run's own folder: a file there would go when the run
    replaces or prunes that folder, and until then the run takes it for one put there by hand."""
    run = enclosing_run(out)
    if run is None or os.path.dirname(os.path.abspath(out)) in (os.path.abspath(run), os.path.realpath(run)):
        return None
    return run


def the_run_it_is_or_is_in(folder: str) -> str | None:
    """`folder` if it is a run, else the run it lies in (enclosing_run), else None."""
    return folder if run_kind(folder) in KINDS else enclosing_run(folder)


def runs_inside(folder: str) -> list[str]:
    """The run folders below `folder` (not itself): a run never goes inside another, but one can
    be moved there by hand, and nothing that deletes a run's files may delete it."""
    return sorted(here for here, _, names in os.walk(folder)
                  if here != folder and RUN_FILE in names and run_kind(here) in KINDS)


def lock_holder(out: str) -> str | None:
    """The pid in `out`'s lock file while another process holds the lock (claim_run_folder), else
    None: also where the file is a hard link that names another folder (a copy of a running run
    made with `cp -al` shares its original's lock). Only looks: the lock is taken and let go at once."""
    path = os.path.join(out, LOCK_FILE)
    if not os.path.isfile(path) or (os.stat(path).st_nlink > 1 and not _names_its_folder(path)):
        return None
    try:
        lock = os.fdopen(open_no_link(path, os.O_RDONLY), "r", encoding="utf-8")
    except OSError:
        return None
    with lock:
        if not try_lock(lock):
            return lock_pid(lock)
        unlock(lock)
    return None


def _folder_id(folder: str) -> str:
    """The line of a lock file that names the folder it locks: its device and inode, which the
    folder keeps when it is renamed and a copy (`cp -al` too) does not have."""
    st = os.stat(folder)
    return f"folder {st.st_dev}:{st.st_ino}"


def _names_its_folder(path: str) -> bool:
    """Whether the lock file at `path` names the folder it lies in (write_lock's second line)."""
    try:
        with os.fdopen(open_no_link(path, os.O_RDONLY), "rb") as f:
            lines = f.read(200).decode("utf-8", "replace").splitlines()
    except OSError:
        return False
    return lines[1:2] == [_folder_id(os.path.dirname(path) or ".")]


def open_lock_file(path: str):
    """The lock file at `path`, open for reading and writing (made if missing, never through a
    link). A hard link is first removed (the pid written into it would land in the other file), unless
    it names its own folder and a process holds it: that is a running run whose folder was copied
    with `cp -al` (its copy's link is removed, and the copy gets a lock of its own)."""
    if os.path.isfile(path) and not os.path.islink(path) and os.stat(path).st_nlink > 1 and not (
            _names_its_folder(path) and lock_holder(os.path.dirname(path) or ".") is not None):
        os.remove(path)
    return os.fdopen(open_no_link(path, os.O_RDWR | os.O_CREAT), "r+", encoding="utf-8")


def write_lock(lock, folder: str) -> None:
    """Write this process's pid and `folder`'s id (_folder_id) into its held lock file `lock`."""
    folder_id = _folder_id(folder)
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n{folder_id}\n")
    lock.flush()
    _CLAIMED[os.path.abspath(folder)] = folder_id


_CLAIMED: dict[str, str] = {}  # a run folder this process claimed (its absolute path) -> its _folder_id then


def check_claimed(out: str) -> None:
    """Before a run writes into `out`: an OSError (ENOENT, as for a folder gone from the path) if
    the folder standing there is no longer the one this process claimed, because the run's folder
    was moved away while the command ran and another made in its place. No write of the run lands
    in a folder that is not the run's."""
    claimed = _CLAIMED.get(os.path.abspath(out))
    if claimed is not None and _folder_id(out) != claimed:  # _folder_id: ENOENT itself where none stands
        raise FileNotFoundError(errno.ENOENT, "not the folder this run claimed: the run's was moved away, and "
                                "another made in its place", out)


def lock_pid(lock) -> str:
    """The pid an open lock file names (its first line), "?" where it names none."""
    lock.seek(0)
    return lock.readline().strip() or "?"


def claim_run_folder(out: str, kind: str, resume: bool = False, overwrite: bool = False,
                     inputs: tuple[str, ...] = (), flag: str = "--out"):
    """Make `out` this run's folder (check_run_folder's checks first). A lock file stops a second
    process from using the folder while this one runs; with `overwrite` everything the folder
    held is removed, so nothing of an old run is mixed in. Returns the open lock file: keep it
    for the life of the run."""
    found = check_run_folder(out, kind, resume, overwrite, inputs, flag)
    path = os.path.join(out, LOCK_FILE)
    try:
        os.makedirs(out, exist_ok=True)
        lock = open_lock_file(path)
    except OSError as e:
        die(f"cannot write to {flag} {out}: {e.filename or out} {e.strerror}; choose another {flag}")
    if not try_lock(lock):
        die(f"{flag} {out} is in use by another process (pid {lock_pid(lock)}); "
            f"wait for it to finish or choose another {flag}")
    try:
        write_lock(lock, out)
        # under the lock no writer of this run is alive: what one left of the files a run writes goes
        remove_left_temporaries(out, RUN_ENTRIES[kind] | {RUN_FILE})
        remove_left_temporaries(os.path.join(out, "checkpoints"), {"latest"})
        if found and overwrite:  # run.json last: a deletion cut short leaves a run that --overwrite still replaces
            _delete_old_run(out, flag)
        write_json(os.path.join(out, RUN_FILE), {"kind": kind})
    except BaseException as e:
        with contextlib.suppress(OSError):  # its pid may not be written out: a full disk, a file-size limit
            lock.close()  # a claim that stops lets go of the folder at once, also in a process that goes on
        if isinstance(e, OSError):
            die(f"cannot write to {flag} {out}: {e.strerror}; {write_advice(e, f'run again, or choose another {flag}')}")
        raise
    say_warnings()  # the run's checks are done: what was held is said now, before it works
    return lock


def _delete_old_run(out: str, flag: str) -> None:
    """--overwrite: everything `out` holds but the lock, run.json last. A checkpoint another
    command reads (files.read_held) stops it in one line before anything is deleted; the others
    are held for the deletion, so a reader that comes meanwhile waits, then finds them gone. A
    Ctrl-C part-way says that the old run is part-deleted and that --overwrite finishes it (not
    --resume, which would go on with what is left of it)."""
    held = []
    try:
        for ckpt in checkpoint_folders(out):
            fd = hold_for_deletion(ckpt)
            if fd is None:
                die(f"{flag} {out}: its checkpoint {ckpt} is being read by another command (fill-mask, fine-tuning "
                    f"or the probes); --overwrite deletes nothing of it until that command ends: run again then")
            held.append(fd)
        for name in sorted(set(os.listdir(out)) - {LOCK_FILE}, key=lambda name: name == RUN_FILE):
            path = os.path.join(out, name)
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
    except KeyboardInterrupt:
        interrupted(f"--overwrite was deleting the old run in {flag} {out}, and part of it is gone: run the command "
                    "again with --overwrite to finish replacing it")
    finally:
        for fd in held:
            os.close(fd)


def checkpoint_folders(out: str) -> list[str]:
    """Every folder in a run's checkpoints/ (not a link to one), whole or not."""
    root = os.path.join(out, "checkpoints")
    names = sorted(os.listdir(root)) if os.path.isdir(root) and not os.path.islink(root) else []
    return [os.path.join(root, n) for n in names
            if os.path.isdir(os.path.join(root, n)) and not os.path.islink(os.path.join(root, n))]


def write_json(path: str, obj) -> None:
    """Write JSON through files.write_file: never seen half-written, never through a link."""
    write_file(path, lambda tmp: _dump(tmp, obj))


def _dump(path: str, obj) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def read_json(path: str):
    """A JSON file, or None when it is missing or damaged (cut short by a crash or a full disk)."""
    try:
        return parse_json(read_bytes(path))
    except (OSError, ValueError):
        return None


# ---- checkpoint folders ---------------------------------------------------------------------


STEP = re.compile(r"step-(\d+)")  # a checkpoint's name; anything else in checkpoints/ is never touched
STEP_OR_TEMPORARY = re.compile(r"(step-\d+)|\.(step-\d+)\.tmp")  # a checkpoint folder, or the one save_checkpoint fills


def checkpoints(out: str) -> list[str]:
    """The `OUT/checkpoints/step-<digits>` folders (not files, not links), ordered by their step number (oldest first):
    a folder only gets that name once it is complete."""
    root = os.path.join(out, "checkpoints")
    names = [d for d in os.listdir(root) if is_checkpoint_name(d) and os.path.isdir(os.path.join(root, d))
             and not os.path.islink(os.path.join(root, d))] if os.path.isdir(root) else []
    return [os.path.join(root, d) for d in sorted(names, key=step_of)]


def step_of(checkpoint: str) -> int:
    """The step a checkpoint folder's name (`step-NNNNNN`) says it holds."""
    return int(STEP.fullmatch(os.path.basename(checkpoint)).group(1))


def is_checkpoint_name(name: str) -> bool:
    """`step-` and the step in at least six digits, as save_checkpoint names it: one name per step."""
    match = STEP.fullmatch(name)
    return match is not None and name == f"step-{int(match.group(1)):06d}"


def latest_checkpoint(out: str) -> str | None:
    """The newest complete checkpoint folder of a pretraining run, or None."""
    return (checkpoints(out) or [None])[-1]


def resolve_checkpoint(path: str) -> str:
    """A checkpoint folder as given, or a pretraining run folder's newest checkpoint (one line
    if the run has none yet). A pretraining run's checkpoint is held (files.read_held) for as long
    as the command runs: a run still training does not prune it while it is read; one it pruned
    between the listing and the hold is passed over for the newest then."""
    if os.path.lexists(os.path.join(path, "config.json")):
        if _pretraining_run_of(path):
            read_held(path)  # gone already: loading it says so
        return path
    for _ in range(10):
        latest = latest_checkpoint(path)
        if latest is None and run_kind(path) in ("fine-tuning", "probes"):
            die(f"{path} is a {run_kind(path)} run, not a checkpoint or a train_mlm.py run folder"
                + (f"; its model is {os.path.join(path, 'best')}" if run_kind(path) == "fine-tuning" else ""))
        if latest is None and run_kind(path) == "pretraining":
            die(f"{path} is a pretraining run with no checkpoint yet; wait for its first one (--save-every), "
                "or give a checkpoint folder")
        if latest is not None and not os.path.lexists(os.path.join(latest, "config.json")):
            held = placed_by_hand(latest)
            die(f"{path}: its newest checkpoint folder {latest} {held or 'holds no config.json'}; move it out of "
                "checkpoints/, or give a checkpoint folder")
        if latest is None or read_held(latest):
            return latest or path
    die(f"{path}: its newest checkpoint was pruned ten times in a row as it was about to be read; give a "
        "checkpoint folder")


def _pretraining_run_of(folder: str) -> str | None:
    """The pretraining run whose checkpoints/ holds `folder` (as given, or where the symbolic links
    it is given through lead), or None."""
    for here in dict.fromkeys((os.path.abspath(folder), os.path.realpath(folder))):
        run = os.path.dirname(os.path.dirname(here))
        if run_kind(run) == "pretraining":
            return run
    return None


def no_checkpoint_folder(path: str) -> str:
    """Why --checkpoint `path` is no folder (files.no_folder), naming a fine-tuning run's best/ whose
    save was cut short between its two renames (export): its .tmp and .old are there instead."""
    cut = [p for p in (f"{path}.tmp", f"{path}.old") if os.path.isdir(p)]
    if cut and not os.path.lexists(path):
        return (f"no such folder, but {' and '.join(cut)} are there: its save was cut short; the next "
                "`finetune.py predict` on its run puts it back")
    return no_folder(path)


def said_for_its_run(folder: str, error: Exception) -> str:
    """What a checkpoint that cannot be loaded says. One of a pretraining run's own checkpoints
    said to be damaged is not mended by a re-save or a re-download: the advice names what mends
    it, an earlier checkpoint of the run or a resume (which passes a damaged checkpoint over)."""
    message, run = str(error), _pretraining_run_of(folder)
    if not message.endswith(DAMAGED) or run is None:
        return message
    named = is_checkpoint_name(os.path.basename(os.path.abspath(folder)))
    earlier = [c for c in checkpoints(run) if named and step_of(c) < step_of(folder)]
    instead = f"give an earlier checkpoint of the run ({earlier[-1]}), or " if earlier else ""
    return (f"{message[:-len(DAMAGED)]}the checkpoint is damaged — {instead}resume the run "
            f"(train_mlm.py --out {run} --resume), which passes a damaged checkpoint over")


# what a checkpoint folder holds: save_checkpoint's files, and the other weight files a checkpoint is read from
CHECKPOINT_FILES = re.compile(r"(config|tokenizer|tokenizer_config)\.json|training_state\.pt|"
                              r"(model|pytorch_model)(-\d+-of-\d+)?\.(safetensors|bin)(\.index\.json)?")


# the training state's record of the sha256 of its checkpoint's other files: file -> key
SAVED_SHA256 = {"model.safetensors": "weights_sha256", "config.json": "config_sha256"}


class HeldByHand(Exception):
    """A checkpoint folder a run would replace holds what no checkpoint writes (a run, or files,
    moved there by hand): nothing is deleted."""


def placed_by_hand(folder: str) -> str | None:
    """What stands at a checkpoint folder's name (or its temporary one's) that save_checkpoint
    never writes, in words ("holds a run moved there by hand, X", "holds files no checkpoint
    writes (a, b)", "is a file put there by hand"), or None: nothing, a symbolic link (removed,
    never followed: nothing of anyone's is lost), or only a checkpoint's files, which may be
    replaced or pruned."""
    if os.path.islink(folder) or not os.path.lexists(folder):
        return None
    if not os.path.isdir(folder):
        return "is a file put there by hand, not a checkpoint folder"
    held = [folder] if run_kind(folder) in KINDS else runs_inside(folder)
    if held:
        return f"holds a run moved there by hand, {held[0]}"
    names = sorted(os.listdir(folder))
    other = [name for name in names if not CHECKPOINT_FILES.fullmatch(re.sub(r"\.tmp\d+$", "", name))
             or os.path.islink(os.path.join(folder, name))]
    odd = [name for name in names if name not in other and not os.path.isfile(os.path.join(folder, name))]
    if odd:  # a checkpoint's name, but no file: a folder, a named pipe ...
        return f"holds {odd[0]}, {not_a_file(os.path.join(folder, odd[0]))}"
    if not other:
        return None
    return f"holds files no checkpoint writes ({', '.join(other[:3])}{' ...' if len(other) > 3 else ''})"


def placed_by_hand_after(out: str, step: int) -> list[str]:
    """"FOLDER holds ..." for each checkpoint folder name (or temporary one, `.step-N.tmp`) of a step
    after `step` where stands what no checkpoint writes: a run resumed from `step` would write it again."""
    root = os.path.join(out, "checkpoints")
    steps = {n: m.group(1) or m.group(2) for n in (os.listdir(root) if os.path.isdir(root) else ())
             if (m := STEP_OR_TEMPORARY.fullmatch(n))}
    names = [n for n, name in steps.items() if is_checkpoint_name(name) and int(STEP.fullmatch(name).group(1)) > step]
    return [f"{os.path.join(root, n)} {held}" for n in sorted(names) if (held := placed_by_hand(os.path.join(root, n)))]


def save_checkpoint(out: str, step: int, model, tokenizer, state: dict, keep: int) -> str:
    """Write `OUT/checkpoints/step-NNNNNN` into a temporary folder and rename it into place; the
    step is stored in model.safetensors' header too, so weights and training state are known
    to belong together, and the sha256 of the weights and of config.json (which records the
    tokenizer's) in the training state (SAVED_SHA256), so a file damaged or edited since (a flipped
    byte that still loads, another hidden_act) is known too. The file `latest` names it for
    people; only the newest `keep` are kept (an old one holding anything else, placed_by_hand, is
    left). A failure (a full disk) is an OSError, leaving no temporary folder; a folder of this
    step (one written before and written again after a resume from an earlier step) that holds
    anything else is a HeldByHand. A first save that fails leaves no empty checkpoints/ behind."""
    root = os.path.join(out, "checkpoints")
    name = f"step-{step:06d}"
    final, tmp = os.path.join(root, name), os.path.join(root, f".{name}.tmp")
    for path in (tmp, final):  # both are replaced: what was put there by hand is never deleted
        held = placed_by_hand(path)
        if held:
            raise HeldByHand(f"{path} {held}")
    first = not os.path.lexists(root)  # checkpoints/ made by this save: not left behind empty if it fails
    try:
        fresh_folder(tmp)
        model.save_pretrained(tmp, tokenizer=tokenizer, metadata={"step": str(step)})
        buffer = io.BytesIO()
        torch.save({**state, **{key: sha256_of(os.path.join(tmp, file)) for file, key in SAVED_SHA256.items()}}, buffer)
        write_file(os.path.join(tmp, "training_state.pt"), buffer.getvalue())
        if os.path.islink(final):
            os.remove(final)
        elif os.path.isdir(final):
            shutil.rmtree(final)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if first:
            with contextlib.suppress(OSError):
                os.rmdir(root)
        raise
    write_file(os.path.join(root, "latest"), (name + "\n").encode())
    # pruned: the oldest of the checkpoints up to this step. One of a later step (left by a resume that went back
    # past it, damaged) is no newer than this one: it is written over when the run reaches its step
    for old in [c for c in checkpoints(out) if step_of(c) <= step][:-keep]:
        if placed_by_hand(old) is None:  # one holding a run or files put there by hand stays, with them
            delete_unless_read(old)  # one another command reads (resolve_checkpoint) stays until a later save
    return final


def truncate_metrics(path: str, step: int) -> None:
    """After a resume from `step`, drop the log lines of steps that will be run again, and a
    line a crash cut short. Anything but a file there is an OSError saying what (read_bytes)."""
    if not os.path.lexists(path):
        return
    kept = [json.dumps(r) + "\n" for r in metric_records(path) if r["step"] <= step]
    write_file(path, "".join(kept).encode("utf-8"))


def metric_records(path: str):
    """The records of a metrics.jsonl, in order: JSON objects with an integer "step", one a line
    (lines end at \n, \r\n or \r, as an editor may have written them; white space around a record,
    a form feed too, is no part of it). A line a crash cut short, or any line that is not such a
    record (a key given twice too: which value counts is unsaid), is skipped."""
    for line in lines_of(read_bytes(path).decode("utf-8-sig", errors="replace")):  # -sig: a BOM is no text
        try:
            record = parse_json(line.strip().lstrip("\ufeff"))  # a BOM inside: two logs joined, each with its own
        except ValueError:
            continue
        if isinstance(record, dict) and type(record.get("step")) is int and repeated_key(line.strip().lstrip("\ufeff")) is None:
            yield record
