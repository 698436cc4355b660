"""What the scripts' reports are made of: markdown tables, and figures drawn in memory so that
they reach the disk through the one atomic writer (files.write_file), never half-written and
never through a link.

matplotlib is optional (`pip install matplotlib`, or the `plot` extra): `pyplot()` is the one
place that imports it, with the Agg backend (no display needed), and says None when it is
missing, so that a script says why (NO_MATPLOTLIB) and carries on.
"""

from __future__ import annotations

import io
import os

from ..files import nearest_existing, not_a_file


NO_MATPLOTLIB = "matplotlib is not installed (pip install matplotlib)"  # why a plot is missing
PICTURE_FORMATS = ("png", "pdf", "svg")  # what a picture's extension may ask for (none: PNG)


def table(header: list[str], lines: list[list[str]]) -> str:
    """A markdown table: the header row, the separator, one row per line of cells."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cells) + " |" for cells in lines]
    return "\n".join(out)


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only, no window), or None without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def figure_bytes(fig, format: str = "png", **savefig) -> bytes:
    """The figure drawn in memory in `format` (png, pdf, svg; `savefig`: e.g. dpi), then closed."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=format, **savefig)
    pyplot().close(fig)
    return buffer.getvalue()


def folder_problem(path: str) -> str | None:
    """Why a folder for pictures cannot be made (or written) at `path`, said before any work is
    done: a file there, a file above it, or the folder it would go in is not writable. None when it can."""
    if os.path.exists(path) and not os.path.isdir(path):
        return "a file, not a folder"
    above = nearest_existing(path)
    if not os.path.isdir(above):
        return f"{above} is a file, not a folder"
    if not os.access(above, os.W_OK | os.X_OK):
        return f"{above} is not writable"
    return None


def picture_problem(path: str) -> str | None:
    """Why a picture cannot be written at `path`, said before any work is done: an extension
    other than PICTURE_FORMATS (a name starting with a dot, such as a run's .lock, is all extension), a folder there, a folder above it that is missing, a file, or not
    writable. None when it can."""
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1] or (name if name.startswith(".") else "")  # ".lock": a run's lock, no picture
    if ext[1:].lower() not in ("", *PICTURE_FORMATS):
        return f"cannot draw a {ext} file; give a .png, .pdf or .svg path"
    if os.path.isdir(path):
        return "a folder; give a picture's path"
    if os.path.exists(path) and not os.path.isfile(path):  # a named pipe, a device: never replaced by a picture
        return f"{not_a_file(path)}; give a picture's path"
    folder = os.path.dirname(os.path.abspath(path))
    above = nearest_existing(folder)
    if not os.path.isdir(above):
        return f"{above} is a file, not a folder"
    if above != folder:
        return f"its folder {folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"its folder {folder} is not writable"
    return None
