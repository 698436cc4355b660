"""Draw the metrics.jsonl of a pretraining run (train_mlm.py) or a fine-tuning run (finetune.py:
its records count epochs, its run.json says "fine-tuning"), each its own figure (needs matplotlib).

    python plot_metrics.py runs/mlm-en/metrics.jsonl                      # writes runs/mlm-en/loss.png
    python plot_metrics.py runs/cls-en/metrics.jsonl --out runs/cls-en/loss.pdf   # or .png, .svg

Pretraining, over the optimizer step. Top: the training loss (each step's own blocks and
masking) and the validation loss (always --seq-len blocks, one fixed masking), masked-token
cross-entropy in nats. A vertical line marks where the blocks lengthen (the short first phase
ends): the training loss jumps there because the longer blocks are harder for a model trained on
short ones, not because training diverged; the validation loss, on the same blocks throughout,
is the curve to follow across it. Grey lines: a unigram and a bigram model's loss on the same
validation targets, read from probes.json beside the metrics (`python probe.py --summary RUN`
writes it). With --objective mlm+nsp, a panel under it: the next-sentence accuracy on each
step's pairs and on the fixed held-out pairs, beside chance. Bottom: the learning rate.

Fine-tuning, over the epoch. Left: the training loss (mean over the epoch) and the validation
loss, cross-entropy of the labels. Right: the validation accuracy beside bag-of-words and the
majority class (summary.json, once the run has written it), the best epoch (the one kept) marked.
"""

import argparse
import math
import os
import sys
from collections import Counter

from minibert.files import parse_json, read_bytes, repeated_key, write_file
from minibert.run import die, run_script
from minibert.run.flags import Parser
from minibert.run.folders import KINDS, inside_a_runs_folder, metric_records, read_json, run_kind
from minibert.run.probes import SUMMARY_FILE
from minibert.run.report import NO_MATPLOTLIB, figure_bytes, picture_problem, pyplot
from minibert.text import lines_of, not_utf8


# ---- reading the records ----------------------------------------------------------------------


def number(value, kind=(int, float)) -> bool:
    """A number matplotlib can draw: not a bool, finite, and below 1e100 in size (its axis
    arithmetic overflows near float's limit, 1e308; no loss, rate or accuracy comes near either)."""
    if isinstance(value, bool) or not isinstance(value, kind):
        return False
    try:
        return math.isfinite(float(value)) and abs(float(value)) < 1e100
    except OverflowError:  # an integer too large for a float
        return False


def share(value) -> bool:
    """An accuracy or a share of the pairs (a baseline's, chance's): a number from 0 to 1."""
    return number(value) and 0 <= value <= 1


def loss(value) -> bool:
    """A loss: every one drawn here is a cross-entropy in nats, never below 0 (a negative one is
    a hand edit or another quantity, and would read as a model better than perfect)."""
    return number(value) and value >= 0


ACCURACIES = ("valid_acc", "train_nsp_acc", "valid_nsp_acc")  # drawn only from 0 to 1
LOSSES = ("train_loss", "valid_loss")  # drawn only from 0 up


def series(records: list[dict], key: str, x: str = "step") -> list[tuple]:
    """(x, value) of every record in which both are numbers matplotlib can draw (x an integer),
    the value from 0 to 1 for an accuracy, from 0 up for a loss."""
    drawable = share if key in ACCURACIES else loss if key in LOSSES else number
    return [(r[x], r[key]) for r in records if number(r.get(x), int) and drawable(r.get(key))]


def phase_changes(records: list[dict]) -> list[tuple]:
    """(last step logged on the old blocks, old block length, new block length) wherever the
    training records' seq_len changes; none in a file written before train_mlm.py logged it."""
    lengths = series(records, "seq_len")
    return [(step, old, new) for (step, old), (_, new) in zip(lengths, lengths[1:]) if new != old]


def ngram_levels(folder: str) -> dict | None:
    """{"unigram": loss, "bigram": loss} on the validation split's masked targets, from the
    probes.json `probe.py --summary` keeps in a run folder; None without one."""
    numbers = read_json(os.path.join(folder, SUMMARY_FILE))
    try:
        levels = {name: numbers["baselines"]["ngram"][name]["loss"] for name in ("unigram", "bigram")}
    except (TypeError, KeyError):
        return None
    return levels if all(loss(v) for v in levels.values()) else None


def best_point(accuracy: list[tuple], summary: dict) -> tuple | None:
    """(epoch, validation accuracy) of the epoch finetune.py kept: summary.json's best_epoch, or,
    before the run has written it, the first epoch of the highest accuracy (its rule)."""
    best = summary.get("best_epoch")  # an integer, not a bool (True == 1) nor 1.0: an epoch is counted
    kept = [point for point in accuracy if number(best, int) and point[0] == best]
    if "best_epoch" in summary and not kept:
        print(f"note: summary.json's best_epoch ({repr(summary['best_epoch'])[:40]}) is no epoch of the records; "
              "the best one by finetune.py's rule is starred", file=sys.stderr)
    return kept[0] if kept else max(accuracy, key=lambda point: point[1], default=None)


# ---- the figures --------------------------------------------------------------------------------


def draw(ax, points: list[tuple], *style, **options) -> None:
    """A curve through (x, y) points, when there are any."""
    if points:
        ax.plot(*zip(*points), *style, **options)


def pretraining_figure(plt, records: list[dict], levels: dict | None, name: str):
    """Losses on top, next-sentence accuracy under them when the run has pairs, the learning rate
    below, over the optimizer step (the module docstring)."""
    nsp = any(number(r.get("train_nsp_acc")) or number(r.get("valid_nsp_acc")) for r in records)
    fig, axes = plt.subplots(3 if nsp else 2, 1, sharex=True, figsize=(9, 8.5 if nsp else 6.5),
                             gridspec_kw={"height_ratios": (3, 2, 1) if nsp else (3, 1)})
    loss_ax, lr_ax = axes[0], axes[-1]
    lengths = series(records, "seq_len")
    valid_blocks = f", always {lengths[-1][1]}-token blocks" if lengths else ""  # the last phase's: --seq-len
    draw(loss_ax, series(records, "train_loss"), linewidth=1, label="training loss (each step's own blocks)")
    draw(loss_ax, series(records, "valid_loss"), "o-", markersize=3,
         label=f"validation loss (fixed masking{valid_blocks})")
    if levels:
        for model, style in (("unigram", ":"), ("bigram", "--")):
            loss_ax.axhline(levels[model], color="gray", linestyle=style,
                            label=f"{model} model on the validation targets: {levels[model]:.2f}")
    if nsp:
        next_sentence_axis(axes[1], records)
    changes = phase_changes(records)
    for step, old, new in changes:
        for ax in axes:
            ax.axvline(step, color="black", linewidth=1, linestyle="-.")
        for text, side in ((f"{old}-token blocks ", "right"), (f" {new}-token blocks", "left")):
            loss_ax.text(step, 0.02, text, transform=loss_ax.get_xaxis_transform(), ha=side, va="bottom")
    if changes:
        loss_ax.set_title("short blocks are easier: training sits below validation before the switch (not "
                          "overfitting) and jumps at it (not diverging)", fontsize=9)
    loss_ax.set_ylabel("masked-token cross-entropy (nats)")
    fig.suptitle(f"{name}: pretraining (masked language modelling{' + next-sentence prediction' if nsp else ''})")
    legend(loss_ax, loc="upper right")
    draw(lr_ax, series(records, "lr"), color="C2", label="learning rate")
    lr_ax.set_xlabel("optimizer step")
    lr_ax.set_ylabel("learning rate")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def next_sentence_axis(ax, records: list[dict]) -> None:
    """Next-sentence accuracy: each logged step's pairs (a few dozen: noisy), the fixed held-out
    pairs, and chance on them (the more common label's share)."""
    draw(ax, series(records, "train_nsp_acc"), linewidth=1, alpha=0.6, label="training (each step's own pairs)")
    draw(ax, series(records, "valid_nsp_acc"), "o-", markersize=3, color="C1", label="validation (fixed held-out pairs)")
    chance = [r["nsp_chance"] for r in records if share(r.get("nsp_chance"))]
    if chance:
        ax.axhline(chance[-1], color="gray", linestyle=":", label=f"chance on the held-out pairs: {chance[-1]:.2f}")
    ax.set_ylabel("next-sentence accuracy")
    legend(ax, loc="upper left")  # the short phase, on the left, has no pairs


def finetuning_figure(plt, records: list[dict], summary: dict, name: str):
    """Label losses on the left, validation accuracy on the right, over the epoch (the module docstring)."""
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(10, 4))
    accuracy = series(records, "valid_acc", x="epoch")
    draw(loss_ax, series(records, "train_loss", x="epoch"), "o-", label="training (mean over the epoch)")
    draw(loss_ax, series(records, "valid_loss", x="epoch"), "o-", label="validation (after the epoch)")
    loss_ax.set_ylabel("cross-entropy of the labels (nats)")
    loss_ax.set_title("loss per epoch")
    draw(acc_ax, accuracy, "o-", color="C1", label="fine-tuned model")
    baselines = (("bow_valid_acc", "bag-of-words baseline", "--"),
                 ("majority_valid_acc", "majority-class baseline", ":"))
    for key, baseline, style in baselines:
        if share(summary.get(key)):
            acc_ax.axhline(summary[key], color="gray", linestyle=style, label=f"{baseline} ({summary[key]:.3f})")
        elif key in summary:
            print(f"note: summary.json's {key} ({repr(summary[key])[:40]}) is not an accuracy from 0 to 1; "
                  f"no {baseline} line is drawn", file=sys.stderr)
    best = best_point(accuracy, summary)
    if best:
        acc_ax.plot(*best, marker="*", markersize=15, linestyle="none", color="C3",
                    label=f"best epoch {best[0]} ({best[1]:.3f}), the one kept")
    acc_ax.set_ylabel("validation accuracy")
    acc_ax.set_title("validation accuracy per epoch")
    fig.suptitle(f"{name}: fine-tuning (classification)")
    for ax in (loss_ax, acc_ax):
        ax.set_xlabel("epoch")
        ax.set_xticks(sorted({epoch for epoch, _ in accuracy}))
        ax.grid(alpha=0.3)
        legend(ax)
    fig.tight_layout()
    return fig


def legend(ax, **where) -> None:
    """The legend of `ax`, if anything on it is drawn (a panel whose every value was left out,
    with its note, gets none, rather than matplotlib's warning on standard error)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**where)


def one_record_per_epoch(records: list[dict], metrics_path: str) -> list[dict]:
    """A fine-tuning run's records by epoch, the last of each epoch logged more than once, with a
    one-line note naming those epochs. finetune.py appends one record per epoch, so a repeat comes
    from files joined or edited by hand; drawing both would zigzag the curve at that epoch, and
    the last written is the newest. Records whose epoch is no integer are not drawn (series)."""
    epochs = Counter(r["epoch"] for r in records if number(r["epoch"], int))
    repeated = sorted(epoch for epoch, n in epochs.items() if n > 1)
    if repeated:
        named = ", ".join(map(str, repeated[:10])) + (", ..." if len(repeated) > 10 else "")
        print(f"note: {'epoch' if len(repeated) == 1 else 'epochs'} {named} of {metrics_path} "
              f"{'is' if len(repeated) == 1 else 'are'} logged more than once; the last record of each epoch is drawn",
              file=sys.stderr)
    last = {r["epoch"]: r for r in records if number(r["epoch"], int)}
    return [last[epoch] for epoch in sorted(last)]


def key_given_twice(lines: list[str]) -> str:
    """": line N gives the key K twice" for the first line that would be a record but for a key it
    gives twice (which value counts is unsaid), or ""."""
    for n, line in enumerate(lines, 1):
        try:
            record = parse_json(line.strip())
        except ValueError:
            continue
        if isinstance(record, dict) and type(record.get("step")) is int and repeated_key(line.strip()) is not None:
            return f": line {n:,} gives the key {repeated_key(line.strip())!r} twice"
    return ""


def figure(metrics_path: str):
    """The matplotlib Figure of a run's metrics: a fine-tuning run's, or a pretraining run's (with a
    one-line note when there is no probes.json to draw the n-gram levels from). The records decide
    which; a run.json beside them that says another kind of run gets a one-line note."""
    plt = pyplot()
    if plt is None:
        die(f"cannot plot {metrics_path}: {NO_MATPLOTLIB}")
    records = list(metric_records(metrics_path))
    losses = [r[k] for r in records for k in LOSSES if k in r]
    left_out = sum(not loss(v) for v in losses)
    why = "NaN, infinite, not a number or beyond 1e100"
    if any(number(v) and v < 0 for v in losses):
        why = f"below 0, {why}"
    raw = read_bytes(metrics_path)
    text = lines_of(raw.decode("utf-8", errors="replace"))
    lines = sum(bool(line.strip()) for line in text)
    if not records and lines:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            die(f"{metrics_path}: {not_utf8(e)}")
        die(f"{metrics_path}: none of its lines is a record of a run's log (a JSON object with an integer "
            f"step, each key once{key_given_twice(text)}); give the metrics.jsonl of a train_mlm.py or finetune.py run")
    if not losses:
        die(f"{metrics_path} holds no loss to draw yet (no record with a train_loss or valid_loss); "
            "plot it once the run has logged a step")
    if len(records) < lines:
        print(f"note: {lines - len(records):,} of the {lines:,} lines of {metrics_path} are no record (a JSON object "
              "with an integer step, each key once: a line a crash cut short, or one written by hand); they are left out "
              "of the plot",
              file=sys.stderr)
    if left_out == len(losses):
        die(f"{metrics_path}: none of its {len(losses):,} logged losses can be drawn (each is {why}): the run "
            "diverged, or the file is not a run's log")
    if left_out:
        print(f"note: {left_out:,} of the {len(losses):,} logged losses are {why}; they are left out of the plot",
              file=sys.stderr)
    accuracies = [r[k] for r in records for k in ACCURACIES if k in r]
    odd = sum(not share(v) for v in accuracies)
    if odd:
        print(f"note: {odd:,} of the {len(accuracies):,} logged accuracies are not numbers from 0 to 1 (NaN, "
              "infinite, out of range); they are left out of the plot", file=sys.stderr)
    folder = os.path.dirname(os.path.abspath(metrics_path))
    name = os.path.basename(folder)
    by_epoch = any("epoch" in r for r in records)  # the records decide, whatever run.json beside them says
    if by_epoch and not all("epoch" in r for r in records):
        die(f"{metrics_path} holds records of a fine-tuning run (each with an epoch) and of another run (without); "
            "give one run's metrics.jsonl")
    x, kind = ("epoch", "fine-tuning") if by_epoch else ("step", "pretraining")
    if not any(series(records, k, x=x) for k in LOSSES):
        die(f"{metrics_path}: no loss has a whole-number {x} to draw it at; give the metrics.jsonl of a "
            "train_mlm.py or finetune.py run")
    said = run_kind(folder)
    if said in KINDS and said != kind:
        print(f"note: run.json beside the metrics says a {said} run; the records are a {kind} run's, drawn as such",
              file=sys.stderr)
    if by_epoch:
        records = one_record_per_epoch(records, metrics_path)
        summary = read_json(os.path.join(folder, "summary.json"))
        if os.path.lexists(os.path.join(folder, "summary.json")) and not isinstance(summary, dict):
            print("note: summary.json beside the metrics is not finetune.py's summary (damaged?); no baselines "
                  "are drawn", file=sys.stderr)
        return finetuning_figure(plt, records, summary if isinstance(summary, dict) else {}, name)
    levels = ngram_levels(folder)
    if levels is None:
        why = "is not probe.py's summary" if os.path.exists(os.path.join(folder, SUMMARY_FILE)) else "is missing"
        print(f"note: no unigram and bigram levels ({SUMMARY_FILE} {why}); run `python probe.py --summary "
              f"{os.path.dirname(metrics_path) or '.'}` first to add them", file=sys.stderr)
    return pretraining_figure(plt, records, levels, name)


def plot_metrics(metrics_path: str, out_path: str) -> str:
    """Draw the figure into `out_path`, rendered in memory, then written through files.write_file
    (never through a link). One line, and nothing written, without matplotlib."""
    fig = figure(metrics_path)
    write_file(out_path, figure_bytes(fig, os.path.splitext(out_path)[1][1:].lower() or "png", dpi=100))
    return out_path


def main(argv=None):
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("metrics", help="metrics.jsonl written by train_mlm.py or finetune.py")
    p.add_argument("--out", help="the figure to write, .png, .pdf or .svg (default: loss.png beside the metrics file)")
    args = p.parse_args(argv)
    out = args.out or os.path.join(os.path.dirname(args.metrics), "loss.png")
    if not os.path.isfile(args.metrics):
        what = "a folder" if os.path.isdir(args.metrics) else "not a file" if os.path.exists(args.metrics) else \
            "no such file"
        die(f"{args.metrics}: {what}; give the metrics.jsonl of a train_mlm.py or finetune.py run")
    if os.path.realpath(out) == os.path.realpath(args.metrics):
        p.error(f"--out {out} is the metrics file itself; give another PNG path")
    if picture_problem(out):  # a wrong --out is a wrong command line (exit status 2); the default's folder is not
        (p.error if args.out else die)(f"--out {out}: {picture_problem(out)}")
    run = inside_a_runs_folder(out)
    if run is not None:
        p.error(f"--out {out} lies inside a folder of the {run_kind(run)} run {run} (a checkpoint, best/ ...), which "
                "the run itself replaces or prunes; give a path in the run's own folder or outside it")
    try:
        print(plot_metrics(args.metrics, out))
    except (OSError, UnicodeDecodeError) as e:
        die(f"cannot plot {args.metrics} into {out}: {getattr(e, 'strerror', None) or e}")


if __name__ == "__main__":
    run_script(main, "nothing is half-written")
