"""The one way minibert writes a file: never seen half-written, never through a symbolic link;
and the one way it parses the JSON it reads (`parse_json`).

`write_file` writes to a new temporary name beside the target (created afresh, so a link
planted there is not followed), flushes it to disk and renames it over the target: a rename
replaces a link at the target instead of writing where it points. `append_line` appends to a
log, refusing a link. Whatever goes wrong (a full disk, a folder that is not writable) is an
OSError naming the file, and no temporary file is left behind.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat

try:
    import fcntl  # POSIX: an advisory lock that the kernel releases when the process dies
except ImportError:  # Windows
    fcntl = None

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # POSIX; Windows has no such flag (and rarely user symlinks)


def open_no_link(path: str, flags: int, mode: int = 0o644) -> int:
    """os.open that refuses a symbolic link at `path`, and anything but a plain file (OSError naming it)."""
    try:
        return open_file(path, flags | NOFOLLOW, mode)
    except OSError as e:
        if e.errno == errno.ELOOP or os.path.islink(path):
            raise OSError(errno.ELOOP, "is a symbolic link; minibert never writes through one", path) from None
        raise


def open_file(path: str, flags: int, mode: int = 0o644) -> int:
    """os.open of a plain file (links followed): a folder, a named pipe, a device or a socket at
    `path` is an OSError saying which, at once; opening a named pipe never waits for its other end."""
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), mode)
    except OSError as e:
        if e.errno in (errno.ENXIO, errno.EISDIR):  # a pipe nobody reads (opened to write), or a folder
            raise OSError(e.errno, f"is {not_a_file(path)}", path) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EISDIR if os.path.isdir(path) else errno.ENXIO, f"is {not_a_file(path)}", path)
    return fd


def not_a_file(path: str) -> str:
    """What stands at `path` instead of a plain file, in words: "a folder, not a file", "a named pipe,
    not a file" ...; "missing" when nothing does."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "missing"
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    return next((f"{word}, not a file" for test, word in kinds if test(mode)), "not a plain file")


LEADS_NOWHERE = "a symbolic link that leads to nothing (its target is missing, or a loop)"


def no_folder(path: str) -> str:
    """Why `path`, which is no folder, is none, in words: "no such folder", "a file, not a folder",
    "a named pipe, not a folder" ..."""
    if os.path.islink(path) and not os.path.exists(path):
        return LEADS_NOWHERE
    if not os.path.exists(path):
        return "no such folder"
    if os.path.isfile(path):
        return "a file, not a folder"
    return not_a_file(path).replace("not a file", "not a folder")


def nearest_existing(path: str) -> str:
    """`path` made absolute, or the nearest folder above it that exists: where making it would start."""
    above = os.path.abspath(path)
    while not os.path.exists(above):
        above = os.path.dirname(above)
    return above


def read_problem(e: OSError) -> str:
    """Why a file could not be read, to follow "cannot read FILE: ": open_file's "it is a named
    pipe, not a file" for what is no plain file, else the system's reason."""
    return f"it {e.strerror}" if e.errno in (errno.EISDIR, errno.ENXIO) else str(e.strerror)


def read_bytes(path: str) -> bytes:
    """The bytes of the plain file at `path` (links followed); anything else is an OSError that says
    what it is (a named pipe is not waited on)."""
    with os.fdopen(open_file(path, os.O_RDONLY), "rb") as f:
        return f.read()


def sha256_of(path: str) -> str:
    """The sha256 of the plain file at `path` (read_bytes), in hex: what a cache or a checkpoint
    records of a file to know it later for the same bytes."""
    return hashlib.sha256(read_bytes(path)).hexdigest()


def write_file(path: str, data) -> None:
    """Write `data` (bytes, or a function that writes a file given its name) to `path`:
    temporary name, fsync, rename. On any failure `path` is as it was. What stands at `path` is
    replaced only if it is a plain file or a link (never a named pipe or a device: ENXIO)."""
    tmp = f"{path}.tmp{os.getpid()}"
    if os.path.exists(path) and not os.path.islink(path) and not os.path.isfile(path) and not os.path.isdir(path):
        raise OSError(errno.ENXIO, not_a_file(path), path)
    try:
        if os.path.lexists(tmp):  # left by a crashed process of the same pid, or planted
            os.remove(tmp)
        fd = open_no_link(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, bytes):
                f.write(data)
        if not isinstance(data, bytes):
            data(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        if isinstance(e, OSError) and e.filename == tmp:  # name the file the caller asked for
            raise OSError(e.errno, e.strerror, path) from None
        raise


def remove_left_temporaries(folder: str, names=None) -> None:
    """Remove what `write_file` left in `folder` (not below it) when its process was killed
    (kill -9) between writing and renaming: `NAME.tmpPID` of a process that is gone, where NAME
    is one of `names` (the files written there; None: any), so that a file of one's own named
    like one (`notes.tmp999999`) is kept."""
    for name in os.listdir(folder) if os.path.isdir(folder) else ():
        found = re.fullmatch(r"(.+)\.tmp(\d+)", name)
        path = os.path.join(folder, name)
        if found and (names is None or found.group(1) in names) and not (os.path.isdir(path) and not os.path.islink(path)) \
                and not process_alive(int(found.group(2))):
            os.remove(path)


def process_alive(pid: int) -> bool:
    """Whether the process `pid` exists (another user's counts; a pid no system gives does not)."""
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # another user's process; or no such pid at all
        return pid < 2 ** 22
    return True


def fresh_folder(path: str) -> None:
    """An empty new folder at `path` (a temporary one, renamed into place when whole), its parents
    made as needed: whatever stood there is removed first; a link is removed, never followed."""
    if os.path.islink(path) or os.path.isfile(path):
        os.remove(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    os.mkdir(path)


@contextlib.contextmanager
def waiting_lock(path: str):
    """Hold a lock on the file `path` (created if missing, never through a link) for the block: a
    second process at the same lock waits until the first lets go. POSIX only; elsewhere no lock."""
    with os.fdopen(open_no_link(path, os.O_RDWR | os.O_CREAT), "rb") as f:
        if fcntl is not None:
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def try_lock(f) -> bool:
    """Take the lock on the open file `f` without waiting: False while another process holds it.
    The kernel lets go when the process dies, or at `unlock`. POSIX only; elsewhere no lock (True)."""
    if fcntl is None:
        return True
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def unlock(f) -> None:
    if fcntl is not None:
        fcntl.flock(f, fcntl.LOCK_UN)


_READ_HELD: dict[str, int] = {}  # folder (its real path) -> the descriptor read_held keeps open, oldest first
_MOST_HELD = 8  # a process reads one checkpoint at a time: older holds than these eight are let go
_PINNED: set[str] = set()  # held folders (real paths) kept past the eight: read_held(pinned=True)


def read_held(folder: str, pinned: bool = False) -> bool:
    """Hold a shared lock on `folder` while this process runs (the kernel lets go when it exits),
    so that a process deleting it through `delete_unless_read` leaves it: a checkpoint a training
    run would prune is kept while another command reads it (the eight latest holds are kept, and
    every `pinned` one: a list of folders read one after another, held from when it is made). Waits
    while a deletion holds it; False if the folder is gone by then (deleted before the lock), True
    otherwise. POSIX only; elsewhere no lock (True while the folder is there)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return False
    if fcntl is None:
        os.close(fd)
        return os.path.isdir(folder)
    fcntl.flock(fd, fcntl.LOCK_SH)
    if not os.path.isdir(folder):  # deleted while this lock waited for the deletion's
        os.close(fd)
        return False
    with contextlib.suppress(KeyError, OSError):
        os.close(_READ_HELD.pop(os.path.realpath(folder)))  # held already: once is enough
    _READ_HELD[os.path.realpath(folder)] = fd
    if pinned:
        _PINNED.add(os.path.realpath(folder))
    unpinned = [path for path in _READ_HELD if path not in _PINNED]
    for path in unpinned[:max(0, len(unpinned) - _MOST_HELD)]:
        os.close(_READ_HELD.pop(path))
    return True


def let_go_of(folder: str) -> None:
    """End this process's holds (`read_held`) on `folder` and the folders in it: its reads there are
    over (its commands run one after another)."""
    inside = os.path.join(os.path.realpath(folder), "")
    for held in [path for path in _READ_HELD if os.path.join(path, "").startswith(inside)]:
        with contextlib.suppress(OSError):
            os.close(_READ_HELD.pop(held))
        _PINNED.discard(held)


def hold_for_deletion(folder: str) -> int | None:
    """An exclusive hold on `folder` (a descriptor to close once it is deleted), or None while
    another process holds it through `read_held`; this process's own hold ends first. A reader
    that comes later waits for the deletion, then finds the folder gone. POSIX only; elsewhere
    always a hold."""
    let_go_of(folder)
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
    return fd


def delete_unless_read(folder: str) -> bool:
    """Delete `folder` unless another process holds it through `read_held` (False: left for now).
    POSIX only; elsewhere it is deleted."""
    fd = hold_for_deletion(folder)
    if fd is None:
        return False
    try:
        shutil.rmtree(folder)
        return True
    finally:
        os.close(fd)


def append_line(path: str, line: str) -> None:
    """Append one line (a newline is added) to a log file, created if missing; never through a link.
    A log that shares its file with another name (a hard link: a `cp -al` copy of a run) is first
    given a file of its own, so the line lands under `path` alone and the copy stays as it was."""
    if os.path.isfile(path) and not os.path.islink(path) and os.stat(path).st_nlink > 1:
        write_file(path, read_bytes(path))
    fd = open_no_link(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(line + "\n")


UTF8_BOM = b"\xef\xbb\xbf"  # a byte-order mark: parse_json passes over it at the start of bytes, transformers does not
NO_BOM = "starts with a UTF-8 byte-order mark, which transformers cannot read in a JSON file: save it without one"


def parse_json(text: str | bytes):
    """json.loads whose every failure is a one-line ValueError: also JSON nested deeper than
    Python's stack (a RecursionError) and an integer longer than Python converts (4300 digits:
    a plain ValueError, not a JSONDecodeError). A file that is not UTF-8 is a UnicodeDecodeError,
    also a ValueError; so is a string escape of half a UTF-16 pair (`"\\ud800"`), which no
    text holds (it could not be written out or tokenized)."""
    try:
        value = json.loads(text)
        if (_SURROGATE_ESCAPE if isinstance(text, str) else _SURROGATE_ESCAPE_BYTES).search(text):
            json.dumps(value, ensure_ascii=False).encode("utf-8")  # a lone half of a pair cannot be encoded
        return value
    except UnicodeEncodeError:
        raise ValueError("a string holds half of a UTF-16 surrogate pair (an escape like \\ud800 alone), "
                         "which is no text") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError as e:
        raise ValueError(f"a number too long to read ({str(e).split(':')[0]})") from None


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # where a lone surrogate may come from: \uD800-\uDFFF
_SURROGATE_ESCAPE_BYTES = re.compile(_SURROGATE_ESCAPE.pattern.encode())

# each JSON object read as its (key, value) pairs: every key as given, a repeated one too
_PAIRS = json.JSONDecoder(object_pairs_hook=list)


def repeated_key(text: str) -> str | None:
    """The first key that the JSON object `text` gives twice, or None. parse_json keeps the last
    value of a repeated key unsaid ({"label": "pos", "label": "neg"} is neg). `text` must have
    been read by parse_json already: this second reading then cannot fail."""
    keys = [key for key, _ in _PAIRS.decode(text)]
    return next((key for i, key in enumerate(keys) if key in keys[:i]), None)
