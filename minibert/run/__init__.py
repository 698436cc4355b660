"""Run machinery: what the scripts need around the reference model, and nothing a reader of the
model needs. The reference modules (`minibert/*.py`) hold no command-line code; everything here may
stop a script with `die`.

- training: the device and number formats, AdamW with one weight-decay rule, the learning-rate
  schedule, the seeded data order, and the fine-tuning optimizer step;
- folders: run folders (what is a run, a lock against a second process), the checkpoints of a
  run, JSON files written atomically;
- labelled: labelled files (.tsv, .csv, .jsonl), their encoding, batching and scores;
- classification: a classifier built from a checkpoint, what trains, evaluation and export;
- baselines: the majority class and bag-of-words logistic regression;
- exercises: the exercises' helpers (S17, S18, S28) and their sentence sets.
- report: markdown tables, and matplotlib figures drawn in memory for the one atomic writer.
"""

import contextlib
import errno
import os
import signal
import sys
import threading
import warnings

from ..files import read_bytes
from ..text import lines_of, not_utf8, nul_bytes

# what to do about a failed write, by its cause
_WRITE_ADVICE = {errno.ENOSPC: "free some space", errno.EDQUOT: "free some space (a disk quota is full)",
                 errno.EFBIG: "a file-size limit (ulimit -f) stopped the write: raise it",
                 errno.EACCES: "it is not writable: choose another place", errno.EPERM: "it is not writable: choose "
                 "another place", errno.EROFS: "it is on a read-only file system: choose another place",
                 errno.ENOTDIR: "a part of the path is a file, not a folder: choose another place",
                 errno.EEXIST: "a file stands where a folder must go: choose another place",
                 errno.ENXIO: "it is not a plain file: remove it",
                 errno.EISDIR: "a folder stands where a file must go: remove it"}


def os_problem(e: OSError, where: str, otherwise: str | None = None) -> str:
    """One line for a failed read or write in `where`: the file (when the error names one other
    than `where`), the system's reason, and what to do about that reason (`otherwise` for a
    reason without its own advice)."""
    advice = _WRITE_ADVICE.get(e.errno, otherwise)
    name = f"{e.filename}: " if e.filename and str(e.filename) != where else ""
    return f"{where}: {name}{e.strerror or e}" + (f"; {advice}" if advice else "")


def write_advice(e: OSError, then: str) -> str:
    """What to do about a failed write: its cause's advice (a full disk: free some space; a
    file-size limit: raise it; a folder gone from the path written: it was moved or deleted while
    the command ran ...), then `then` (how to go on)."""
    if e.errno == errno.ENOENT:  # the command made or checked every folder on the path before it wrote
        return (f"a folder on its path was moved or deleted while the command ran: move it back (in place of any "
                f"made there since), then {then}")
    return f"{_WRITE_ADVICE.get(e.errno, 'free some space')}, then {then}"


_HELD: list[str] = []  # the warnings a script run through run_script has not said yet


def _hold(message, category, filename, lineno, file=None, line=None) -> None:
    """warnings.showwarning under run_script: a warning is held until the script's checks are done."""
    _HELD.append(warnings.formatwarning(message, category, filename, lineno, line))


def say_warnings() -> None:
    """Say the warnings held so far, one line each: once every check is done (a run folder is
    claimed), and when the script ends or is interrupted."""
    while _HELD:
        sys.stderr.write(_HELD.pop(0))


def die(msg: str):
    """Stop a script with one line on standard error: what is wrong and what to do. A message
    of several lines (a strict-load listing, a path holding a newline) is joined into one: by a
    space after a line that ends in a colon or a full stop, else by "; ". Held warnings are not
    said: a refusal is the only line (an unknown config key matters once the command runs, and is
    said then)."""
    _HELD.clear()
    said = ""
    for line in (line.strip() for line in str(msg).splitlines() if line.strip()):
        said += ("" if not said else " " if said.endswith((":", ".")) else "; ") + line
    sys.exit("error: " + said)


def first_line(error: BaseException, limit: int = 120) -> str:
    """An exception's message cut to its first line, for a one-line note; past `limit` characters,
    cut after the last whole word that fits, and " ..." said; empty for an exception raised
    without a message (torch.load's EOFError on an empty file)."""
    line = (str(error).splitlines() or [""])[0]
    if len(line) <= limit:
        return line
    words = line[:limit + 1].rsplit(" ", 1)[0] if " " in line[:limit + 1] else line[:limit]
    return words.rstrip(" ,;:") + " ..."


def input_lines(path: str | None, one: str) -> list[str]:
    """The non-blank lines of UTF-8 text (a BOM dropped; split at line ends only, text.lines_of)
    in the file `path`, or on standard input when `path` is None; a file or stream that cannot be
    read (standard input closed: `<&-`) or is not UTF-8 stops the script in one line. `one`
    names what a line holds, for that line ("sentence")."""
    try:
        if path is not None:
            raw = read_bytes(path)
        elif sys.stdin is None:
            raise OSError("it is closed")
        else:
            raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        text = raw.decode("utf-8-sig")
    except OSError as e:
        die(f"cannot read {path or 'standard input'}: {e.strerror or e}; give UTF-8 text, one {one} per line")
    except UnicodeDecodeError as e:
        die(f"cannot read {path or 'standard input'}: {not_utf8(e)}, one {one} per line")
    if nul_bytes(text):
        die(f"cannot read {path or 'standard input'}: {nul_bytes(text)}")
    lines = lines_of(text)
    return [line for line in lines if line.strip()]


def run_script(main, on_interrupt: str) -> None:
    """Every script's entry: `main()`. Ctrl-C is one line and exit status 130 (`interrupted`,
    saying `on_interrupt`); a reader that closes standard output early (`... | head -1`) ends the
    script quietly with exit status 141, as a shell's SIGPIPE ends a command, not with a
    BrokenPipeError traceback. A warning (an unknown config.json key, ...) is one line too, held
    until the checks are done (say_warnings), so that a refusal is still the only line. Only the
    first Ctrl-C counts (_interrupt_once); one that lands in a finaliser is raised again
    (_interrupt_again). Once main() has returned, or its last writes are done (an interrupts_ignored
    block that ended), Ctrl-C is ignored: the script is done, its exit status 0."""
    warnings.formatwarning = lambda message, category, *_: "warning: " + "; ".join(str(message).splitlines()) + "\n"
    warnings.showwarning = _hold
    sys.unraisablehook = _interrupt_again
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where SIGINT is ignored (a background job)
        signal.signal(signal.SIGINT, _interrupt_once)
    _WHOLE.clear()
    try:
        main()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # finished: a late Ctrl-C must not report the run as cut short
        say_warnings()
    except KeyboardInterrupt:
        say_warnings()
        if not _WHOLE:  # else it landed as main() returned, after an interrupts_ignored block: the run is whole
            interrupted(on_interrupt)
    except BrokenPipeError:
        if sys.stdout is not None:  # Python's flush of standard output at exit goes nowhere
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)


def _interrupt_once(signum, frame) -> None:
    """SIGINT's handler: the first Ctrl-C raises KeyboardInterrupt, and the others are ignored, so a
    key pressed again while the script stops (saying its line, Python shutting down its threads)
    cannot cut that short with a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _interrupt_again(unraisable) -> None:
    """sys.unraisablehook: a Ctrl-C that lands while Python runs a finaliser (a progress bar's
    __del__) cannot be raised there, and Python would print it as ignored and go on. It is raised
    again at the next function call of the thread (a one-time trace function: anything raised in
    the hook itself would be ignored too), so the script stops as from any other Ctrl-C; anything
    else is reported as Python does."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)
        return
    before = sys.gettrace()

    def raise_at_the_next_call(frame, event, arg):
        sys.settrace(before)
        raise KeyboardInterrupt

    sys.settrace(raise_at_the_next_call)


@contextlib.contextmanager
def interrupts_held():
    """Hold Ctrl-C (SIGINT) until the block is done, then deliver it: a block that puts a file in
    place and then records that it did (a checkpoint saved, then named as the last one) is never
    cut between the two, so what the interrupted line names is what is on disk. Outside the main
    thread, where no handler can be set, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = []
    before = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
    if held:
        signal.raise_signal(signal.SIGINT)


_WHOLE: list[bool] = []  # [True] once an interrupts_ignored block has ended: the script's run is whole


@contextlib.contextmanager
def interrupts_ignored():
    """Ignore Ctrl-C (SIGINT) in the block: the last writes of a run that is whole once they are
    done, after which a Ctrl-C could only report as cut short what is not. Once the block has
    ended, run_script ignores a Ctrl-C that lands as the script returns. Outside the main thread
    the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
        _WHOLE.append(True)  # while Ctrl-C is still ignored
    finally:
        signal.signal(signal.SIGINT, before)


def interrupted(what: str, say: bool = True):
    """Stop a script that Ctrl-C interrupted: one line on standard error (what is left, what to
    do), exit status 130 as a shell gives it (128 + SIGINT), no traceback. Every file is written
    to a temporary name and renamed, so nothing is left half-written. `say`: False on the
    processes of a multi-process run other than the main one."""
    if say:
        print(f"interrupted: {what}", file=sys.stderr)
    sys.exit(130)
