"""What the scripts' reports are made of: markdown tables, and figures drawn in memory so that
they reach the disk through the one atomic writer (files.write_file), never half-written and
never through a link.

matplotlib is optional (`pip install matplotlib`, or the `plot` extra): `pyplot()` is the one
place that imports it, with the Agg backend (no display needed), and says None when it is
missing, so that a script says why (NO_MATPLOTLIB) and carries on.
"""

from __future__ import annotations

import io

NO_MATPLOTLIB = "matplotlib is not installed (pip install matplotlib)"  # why a plot is missing


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
