"""Plot training and validation loss from a train_mlm.py metrics file (needs matplotlib).

    python plot_metrics.py runs/mlm-en/metrics.jsonl [--out runs/mlm-en/loss.png]
"""

import argparse
import os

from minibert.files import write_file
from minibert.run import die
from minibert.run.folders import metric_records
from minibert.run.report import NO_MATPLOTLIB, figure_bytes, pyplot


def read_losses(metrics_path: str) -> tuple[list, list]:
    """(step, training loss) and (step, validation loss) pairs; a line a crash cut short, or
    any line that is not a JSON record, is skipped."""
    train, valid = [], []
    for r in metric_records(metrics_path):
        if not number(r.get("step"), int):
            continue
        if number(r.get("train_loss")):
            train.append((r["step"], r["train_loss"]))
        if number(r.get("valid_loss")):
            valid.append((r["step"], r["valid_loss"]))
    return train, valid


def number(value, kind=(int, float)) -> bool:
    """A number matplotlib can draw: not a bool, not an integer too large for a float."""
    if isinstance(value, bool) or not isinstance(value, kind):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


FORMATS = ("png", "pdf", "svg")  # what --out's extension may ask for (none: PNG)


def plot_metrics(metrics_path: str, out_path: str) -> str:
    """Draw the losses into `out_path`, rendered in memory, then written through files.write_file
    (never through a link). One line, and nothing written, without matplotlib."""
    plt = pyplot()
    if plt is None:
        die(f"cannot plot {metrics_path}: {NO_MATPLOTLIB}")
    train, valid = read_losses(metrics_path)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    if train:
        ax.plot(*zip(*train), label="training loss (masked tokens of the step)")
    if valid:
        ax.plot(*zip(*valid), "o-", label="validation loss (fixed masking)")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("MLM cross-entropy (nats)")
    ax.set_title(os.path.basename(os.path.dirname(os.path.abspath(metrics_path))))
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    write_file(out_path, figure_bytes(fig, os.path.splitext(out_path)[1][1:].lower() or "png"))
    return out_path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("metrics", help="metrics.jsonl written by train_mlm.py")
    p.add_argument("--out", help="PNG to write (default: loss.png beside the metrics file)")
    args = p.parse_args(argv)
    out = args.out or os.path.join(os.path.dirname(args.metrics), "loss.png")
    if not os.path.isfile(args.metrics):
        die(f"{args.metrics}: {'a folder' if os.path.isdir(args.metrics) else 'no such file'}; "
            "give the metrics.jsonl of a train_mlm.py run")
    if os.path.realpath(out) == os.path.realpath(args.metrics):
        die(f"--out {out} is the metrics file itself; give another PNG path")
    if os.path.splitext(out)[1][1:].lower() not in ("", *FORMATS):
        die(f"--out {out}: cannot draw a {os.path.splitext(out)[1]} file; give a .png, .pdf or .svg path")
    if os.path.isdir(out) or not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        die(f"--out {out}: {'a folder' if os.path.isdir(out) else 'its folder does not exist'}; give a PNG path")
    try:
        print(plot_metrics(args.metrics, out))
    except (OSError, UnicodeDecodeError) as e:
        die(f"cannot plot {args.metrics} into {out}: {getattr(e, 'strerror', None) or e}")


if __name__ == "__main__":
    main()
