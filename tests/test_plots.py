"""plot_metrics.py's two figures, drawn from small metrics files written here: what each must
show (the phase change, the n-gram levels, the learning rate; the fine-tuning baselines and the
best epoch), read back from the matplotlib Figure; and probe.py --summary's probes.json, which
the pretraining figure reads."""

import json
import re
from pathlib import Path

import pytest

import plot_metrics
import probe
from minibert.run.folders import LOCK_FILE
from minibert.run.probes import SUMMARY_FILE
from minibert.run.report import pyplot

from test_layout import make_recipe

REPO = Path(__file__).resolve().parents[1]
NGRAM = {"baselines": {"ngram": {"unigram": {"loss": 6.75}, "bigram": {"loss": 5.5}}}}  # the part of probes.json drawn


def write_run(folder: Path, kind: str | None, records: list[dict], **files) -> str:
    """A run folder: run.json of `kind` (None: no run.json), metrics.jsonl of `records`, and
    `files` ({name: JSON object}). Returns the metrics file's path."""
    folder.mkdir()
    if kind:
        (folder / "run.json").write_text(json.dumps({"kind": kind}))
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    for name, obj in files.items():
        (folder / name).write_text(json.dumps(obj))
    return str(folder / "metrics.jsonl")


def pretraining_records(with_seq_len: bool = True) -> list[dict]:
    """Training records every 10 steps to 60, on 16-token blocks to step 30 and on 128-token ones
    after (without seq_len: a file from before train_mlm.py logged it); validation at 30 and 60."""
    records = []
    for step in range(10, 70, 10):
        records.append({"step": step, "train_loss": 8.0 - step / 20, "lr": step / 1e4})
        if with_seq_len:
            records[-1]["seq_len"] = 16 if step <= 30 else 128
        if step in (30, 60):
            records.append({"step": step, "valid_loss": 6.2 if step == 30 else 5.0})
    return records


def finetuning_records() -> list[dict]:
    """Three epochs; validation accuracy 0.70, 0.76, 0.76 (a tie: finetune.py keeps the earlier epoch)."""
    return [{"epoch": e, "step": 10 * e, "train_loss": 0.7 - 0.1 * e, "valid_loss": 0.6 - 0.02 * e, "valid_acc": acc,
             "valid_macro_f1": acc, "lr": 1e-3 / e} for e, acc in enumerate([0.70, 0.76, 0.76], start=1)]


# ---- reading a figure back ------------------------------------------------------------------------


def vertical(ax) -> list:
    """The x of every vertical line (axvline) of `ax`."""
    return [line.get_xdata()[0] for line in ax.get_lines() if list(line.get_ydata()) == [0, 1]]


def horizontal(ax) -> dict:
    """{label: y} of every horizontal line (axhline) of `ax`."""
    return {line.get_label(): line.get_ydata()[0] for line in ax.get_lines() if list(line.get_xdata()) == [0, 1]}


def line_of(ax, label_start: str):
    """The one line of `ax` whose label starts with `label_start`."""
    (line,) = [line for line in ax.get_lines() if line.get_label().startswith(label_start)]
    return line


def xy(line) -> tuple[list, list]:
    return list(line.get_xdata()), list(line.get_ydata())


def all_text(fig) -> str:
    """Every text of the figure (titles, axis and tick labels, legends, notes), one a line."""
    return "\n".join(t.get_text() for t in fig.findobj(lambda artist: hasattr(artist, "get_text")))


@pytest.fixture
def drawn():
    """plot_metrics.figure, each figure closed after the test."""
    figures = []

    def draw(path: str):
        figures.append(plot_metrics.figure(path))
        return figures[-1]

    yield draw
    for fig in figures:
        pyplot().close(fig)


# ---- pretraining ------------------------------------------------------------------------------------


def test_the_pretraining_figure_marks_the_phase_change_the_ngram_levels_and_the_rate(tmp_path, drawn, capsys):
    """Losses on top, the learning rate below on the same steps; a vertical line on both after the
    last step logged on 16-token blocks (30), the block lengths written on either side of it; the
    validation loss said to be on 128-token blocks; grey lines at probes.json's unigram and bigram
    losses, and no note asking for them."""
    fig = drawn(write_run(tmp_path / "mlm", "pretraining", pretraining_records(), **{SUMMARY_FILE: NGRAM}))
    loss_ax, lr_ax = fig.axes
    assert loss_ax.get_shared_x_axes().joined(loss_ax, lr_ax)
    assert vertical(loss_ax) == [30] and vertical(lr_ax) == [30]
    assert {t.get_text().strip(): t.get_position()[0] for t in loss_ax.texts} == {
        "16-token blocks": 30, "128-token blocks": 30}
    assert "not diverging" in loss_ax.get_title() and "not overfitting" in loss_ax.get_title()
    assert {label.split(" ")[0]: y for label, y in horizontal(loss_ax).items()} == {"unigram": 6.75, "bigram": 5.5}
    assert xy(line_of(loss_ax, "training loss")) == ([10, 20, 30, 40, 50, 60], [7.5, 7.0, 6.5, 6.0, 5.5, 5.0])
    validation = line_of(loss_ax, "validation loss")
    assert xy(validation) == ([30, 60], [6.2, 5.0]) and "always 128-token blocks" in validation.get_label()
    # approx's default rel 1e-6: float64 rates step / 1e4, each within one rounding (1.1e-16) of the decimal
    assert xy(line_of(lr_ax, "learning rate"))[1] == pytest.approx([0.001, 0.002, 0.003, 0.004, 0.005, 0.006])
    assert (loss_ax.get_ylabel(), lr_ax.get_ylabel(), lr_ax.get_xlabel()) == (
        "masked-token cross-entropy (nats)", "learning rate", "optimizer step")
    assert capsys.readouterr().err == ""


def test_a_run_with_next_sentence_pairs_gets_their_accuracy_under_the_losses(tmp_path, drawn):
    """--objective mlm+nsp: the long phase's records (steps 40-60) carry the next-sentence accuracy
    of their pairs, the validations at 30 and 60 the held-out accuracy and chance (0.51). A middle
    panel on the same steps shows the three, the phase line crosses it too; the loss panel keeps
    the masked-token loss alone, and the title names both tasks. A run without pairs has no such
    panel (the test above: two axes)."""
    records = pretraining_records()
    for r in records:
        if "train_loss" in r and r["step"] > 30:
            r["train_nsp_acc"] = r["step"] / 100
        if "valid_loss" in r:
            r |= {"valid_nsp_acc": 0.5 if r["step"] == 30 else 0.8, "nsp_chance": 0.51}
    fig = drawn(write_run(tmp_path / "nsp", "pretraining", records, **{SUMMARY_FILE: NGRAM}))
    loss_ax, nsp_ax, lr_ax = fig.axes
    assert loss_ax.get_shared_x_axes().joined(loss_ax, nsp_ax)
    assert vertical(nsp_ax) == [30]
    assert xy(line_of(nsp_ax, "training")) == ([40, 50, 60], [0.4, 0.5, 0.6])
    assert xy(line_of(nsp_ax, "validation")) == ([30, 60], [0.5, 0.8])
    assert horizontal(nsp_ax) == {"chance on the held-out pairs: 0.51": 0.51}
    assert nsp_ax.get_ylabel() == "next-sentence accuracy" and lr_ax.get_ylabel() == "learning rate"
    assert xy(line_of(loss_ax, "training loss"))[1] == [7.5, 7.0, 6.5, 6.0, 5.5, 5.0]
    assert "masked language modelling + next-sentence prediction" in fig._suptitle.get_text()


def test_an_old_metrics_file_without_seq_len_or_probes_is_drawn_with_a_one_line_note(tmp_path, drawn, capsys):
    """No seq_len in the records: no phase line, no block lengths; no probes.json: no n-gram lines
    and one note naming the command that adds them. The PNG is still written."""
    path = write_run(tmp_path / "old", "pretraining", pretraining_records(with_seq_len=False))
    fig = drawn(path)
    loss_ax, lr_ax = fig.axes
    assert vertical(loss_ax) == vertical(lr_ax) == [] and len(loss_ax.texts) == 0
    assert horizontal(loss_ax) == {}
    assert "token blocks" not in all_text(fig)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"python probe.py --summary {tmp_path / 'old'}" in err
    plot_metrics.main([path, "--out", str(tmp_path / "old.png")])
    assert (tmp_path / "old.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("line_end", ["\r\n", "\r", "\n\ufeff"])
def test_records_on_lines_that_end_otherwise_are_drawn_alike(tmp_path, drawn, line_end):
    """The records of a metrics.jsonl whose lines end in \r\n or \r alone (an editor's save), or
    each starting with a byte-order mark (logs joined, each with its own): the same lines as with
    \n (the code before this one read a file of \r-ended lines as one line and said "none of its
    lines is a record", and left out a record behind a BOM as "a line a crash cut short")."""
    path = write_run(tmp_path / "run", "pretraining", pretraining_records())
    expected = xy(line_of(drawn(path).axes[0], "training"))
    Path(path).write_bytes(Path(path).read_bytes().replace(b"\n", line_end.encode()))
    assert xy(line_of(drawn(path).axes[0], "training")) == expected and len(expected[0]) == 6


def test_probe_summary_keeps_its_numbers_in_a_pretraining_run_folder_only(tmp_path, drawn, capsys):
    """probes.json goes into a train_mlm.py run folder, where the figure finds the n-gram levels;
    a checkpoint folder (no run.json) gets nothing."""
    path = write_run(tmp_path / "mlm", "pretraining", pretraining_records())
    probe.keep_summary(str(tmp_path / "mlm"), NGRAM)
    (tmp_path / "ckpt").mkdir()
    probe.keep_summary(str(tmp_path / "ckpt"), NGRAM)
    assert json.loads((tmp_path / "mlm" / SUMMARY_FILE).read_text()) == NGRAM
    assert list((tmp_path / "ckpt").iterdir()) == []
    assert sorted(horizontal(drawn(path).axes[0]).values()) == [5.5, 6.75]
    assert capsys.readouterr().err == ""


def test_probe_summary_writes_nothing_into_a_run_another_process_holds(tmp_path, capsys):
    """While train_mlm.py holds its run's lock (it may be saving), --summary prints its numbers
    but leaves the folder as it is, with a one-line note naming the holder."""
    import fcntl
    folder = tmp_path / "mlm"
    write_run(folder, "pretraining", pretraining_records())
    with open(folder / LOCK_FILE, "a+") as holder:
        holder.write("4242\n")
        holder.flush()
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        before = sorted(p.name for p in folder.iterdir())
        probe.keep_summary(str(folder), NGRAM)
        assert sorted(p.name for p in folder.iterdir()) == before
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "in use by another process (pid 4242)" in err, err
    probe.keep_summary(str(folder), NGRAM)  # let go: written
    assert json.loads((folder / SUMMARY_FILE).read_text()) == NGRAM


# ---- fine-tuning ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fine-tuning", None], ids=["run-json", "epoch-key"])
def test_a_finetuning_run_gets_its_own_figure(tmp_path, drawn, capsys, kind):
    """Recognised by run.json or, without one, by the records' epoch: the label losses per epoch
    on the left, the validation accuracy on the right beside summary.json's bag-of-words and
    majority-class accuracy, the best epoch it names starred (3 of the tie here, though
    finetune.py keeps the earlier: what the run kept, not a guess); no word of pretraining anywhere."""
    summary = {"best_epoch": 3, "bow_valid_acc": 0.79, "majority_valid_acc": 0.47}
    fig = drawn(write_run(tmp_path / "cls", kind, finetuning_records(), **{"summary.json": summary}))
    loss_ax, acc_ax = fig.axes
    assert xy(line_of(loss_ax, "training"))[0] == [1, 2, 3]
    # approx's default rel 1e-6: the float64 losses as logged, within a rounding (1.1e-16) of the decimals
    assert xy(line_of(loss_ax, "validation")) == ([1, 2, 3], pytest.approx([0.58, 0.56, 0.54]))
    assert xy(line_of(acc_ax, "fine-tuned model")) == ([1, 2, 3], [0.70, 0.76, 0.76])
    assert {label.split(" (")[0]: y for label, y in horizontal(acc_ax).items()} == {
        "bag-of-words baseline": 0.79, "majority-class baseline": 0.47}
    assert xy(line_of(acc_ax, "best epoch")) == ([3], [0.76])
    assert (loss_ax.get_xlabel(), acc_ax.get_xlabel()) == ("epoch", "epoch")
    assert (loss_ax.get_ylabel(), acc_ax.get_ylabel()) == ("cross-entropy of the labels (nats)", "validation accuracy")
    assert not re.search(r"MLM|masked|fixed masking|token blocks|optimizer step", all_text(fig))
    assert capsys.readouterr().err == ""


def test_a_finetuning_run_without_its_summary_marks_the_first_best_epoch(tmp_path, drawn):
    """Before summary.json is written: no baseline lines, and the best epoch by finetune.py's rule
    (the highest accuracy, the earlier on a tie: epoch 2 of 0.70, 0.76, 0.76)."""
    acc_ax = drawn(write_run(tmp_path / "cls", "fine-tuning", finetuning_records())).axes[1]
    assert horizontal(acc_ax) == {}
    assert xy(line_of(acc_ax, "best epoch")) == ([2], [0.76])


def test_baselines_that_cannot_be_what_they_name_are_not_drawn(tmp_path, drawn, capsys):
    """summary.json's accuracies -5 and 7, a probes.json unigram loss below 0 (a cross-entropy is
    at least 0) and a next-sentence chance of 2: no line at an impossible level (it would stretch
    the axis and read as a real baseline). The accuracies get a note each; the damaged probes.json
    gets the note of a file that is not probe.py's summary."""
    summary = {"best_epoch": 3, "bow_valid_acc": 7, "majority_valid_acc": -5}
    acc_ax = drawn(write_run(tmp_path / "cls", "fine-tuning", finetuning_records(), **{"summary.json": summary})).axes[1]
    assert horizontal(acc_ax) == {}
    err = capsys.readouterr().err
    assert "summary.json's bow_valid_acc (7) is not an accuracy from 0 to 1" in err, err
    assert "summary.json's majority_valid_acc (-5) is not an accuracy" in err, err
    ngram = {"baselines": {"ngram": {"unigram": {"loss": -6.75}, "bigram": {"loss": 5.5}}}}
    fig = drawn(write_run(tmp_path / "mlm", "pretraining", pretraining_records(), **{SUMMARY_FILE: ngram}))
    assert horizontal(fig.axes[0]) == {}
    assert "is not probe.py's summary" in capsys.readouterr().err
    records = [{**r, "nsp_chance": 2.0, "valid_nsp_acc": 0.6} for r in pretraining_records()]
    fig = drawn(write_run(tmp_path / "nsp", "pretraining", records, **{SUMMARY_FILE: NGRAM}))
    assert [label for ax in fig.axes for label in horizontal(ax) if label.startswith("chance")] == []


def test_make_run_probes_before_the_loss_plot_and_plots_the_finetuning_run():
    """The loss plot reads probes.json, so `probe.py --summary` runs before it; the fine-tuning
    run is drawn after finetune.py."""
    recipe = make_recipe((REPO / "Makefile").read_text(encoding="utf-8"), "run")
    steps = ["train_mlm.py", "probe.py --summary runs/mlm-en", "plot_metrics.py runs/mlm-en/metrics.jsonl",
             "finetune.py", "plot_metrics.py runs/cls-en/metrics.jsonl"]
    where = [next(i for i, line in enumerate(recipe) if step in line) for step in steps]
    assert where == sorted(where)


def test_a_damaged_probes_json_is_named_as_such_not_as_missing(tmp_path, drawn, capsys):
    """probes.json that is not probe.py's summary (bad JSON, or a list): no n-gram lines, and the
    note says the file is not the summary rather than that it is missing."""
    for i, content in enumerate(("{garbage", "[1, 2]")):
        path = write_run(tmp_path / f"run{i}", "pretraining", pretraining_records())
        (tmp_path / f"run{i}" / "probes.json").write_text(content)
        assert horizontal(drawn(path).axes[0]) == {}
        err = capsys.readouterr().err
        assert "(probes.json is not probe.py's summary)" in err and "missing" not in err, err


@pytest.mark.parametrize("case", ["accuracy-7.5", "accuracy-nan", "form-feeds", "no-records", "a-key-given-twice"])
def test_the_records_decide_what_is_drawn_and_what_is_left_out_is_said(tmp_path, drawn, capsys, case):
    """A fine-tuning accuracy of 7.5 or NaN at epoch 2: left out of the accuracy curve with a
    one-line note (the old code drew 7.5, stretching the axis, and dropped NaN unsaid). Records
    followed by form feeds: read (a form feed around a record is white space, not part of it; the
    old code said "no loss to draw yet"). Lines none of which is a record: one line saying so; where
    the one record gives train_loss twice, the line names it (the code before this one said only
    that no line is a record "with an integer step", of a line that has one).
    A run.json of another kind: the next test."""
    if case.startswith("accuracy"):
        records = finetuning_records()
        records[1]["valid_acc"] = 7.5 if case == "accuracy-7.5" else float("nan")
        acc_ax = drawn(write_run(tmp_path / "cls", "fine-tuning", records)).axes[1]
        assert xy(line_of(acc_ax, "fine-tuned model")) == ([1, 3], [0.70, 0.76])
        assert "note: 1 of the 3 logged accuracies are not numbers from 0 to 1" in capsys.readouterr().err
    elif case == "form-feeds":
        path = Path(write_run(tmp_path / "mlm", "pretraining", [], **{SUMMARY_FILE: NGRAM}))
        path.write_text("".join(json.dumps(r) + "\f\n" for r in pretraining_records()))
        assert xy(line_of(drawn(str(path)).axes[0], "training loss"))[0] == [10, 20, 30, 40, 50, 60]
    else:
        path = Path(write_run(tmp_path / "mlm", "pretraining", []))
        twice = case == "a-key-given-twice"
        path.write_text('step 1 loss 3.2\n{"step": 2, "train_loss": 5.0, "train_loss": 9.0}\n' if twice
                        else "step 1 loss 3.2\nstep 2 loss 3.1\n")
        said = (r"\(a JSON object with an integer step, each key once: line 2 gives the key 'train_loss' twice\)"
                if twice else r"\(a JSON object with an integer step, each key once\)")
        with pytest.raises(SystemExit, match=r"^error: \S+metrics.jsonl: none of its lines is a record of a run's log "
                                             + said + "; give the metrics.jsonl"):
            drawn(str(path))


@pytest.mark.parametrize("case", ["mixed-records", "summary-not-json", "best-epoch-not-logged"])
def test_what_the_fine_tuning_figure_cannot_use_is_said(tmp_path, drawn, capsys, case):
    """A metrics file holding a pretraining run's records and a fine-tuning run's: refused (the old
    code drew the fine-tuning ones, dropping the others unsaid). A summary.json that is not JSON:
    a note that no baselines are drawn (the old code: none, unsaid). A best_epoch no record has:
    a note, and the best epoch by finetune.py's rule starred (the old code: nothing starred, unsaid)."""
    if case == "mixed-records":
        path = write_run(tmp_path / "m", "fine-tuning", pretraining_records() + finetuning_records())
        with pytest.raises(SystemExit, match=r"holds records of a fine-tuning run \(each with an epoch\) and of another"):
            drawn(path)
        return
    summary = "{oops" if case == "summary-not-json" else json.dumps({"best_epoch": 9})
    path = write_run(tmp_path / "cls", "fine-tuning", finetuning_records())
    (tmp_path / "cls" / "summary.json").write_text(summary)
    acc_ax = drawn(path).axes[1]
    err = capsys.readouterr().err
    if case == "summary-not-json":
        assert "note: summary.json beside the metrics is not finetune.py's summary" in err, err
    else:
        assert "note: summary.json's best_epoch (9) is no epoch of the records" in err, err
        assert xy(line_of(acc_ax, "best epoch")) == ([2], [0.76])


@pytest.mark.parametrize("said, records, drawn_as", [
    ("fine-tuning", pretraining_records(), "pretraining"),
    ("probes", pretraining_records(), "pretraining"),
    ("pretraining", finetuning_records(), "fine-tuning"),
], ids=["fine-tuning-beside-pretraining", "probes-beside-pretraining", "pretraining-beside-fine-tuning"])
def test_a_run_json_of_another_kind_is_named_and_the_records_drawn(tmp_path, drawn, capsys, said, records, drawn_as):
    """run.json says one kind of run, the records beside it are another's: the records decide
    (the figure of their kind, whole), and a one-line note names the contradiction, which may be a
    folder copied over another or a file moved by hand. The old code drew the records' figure
    unsaid (and, before that, an empty fine-tuning figure for pretraining records)."""
    fig = drawn(write_run(tmp_path / "run", said, records, **{SUMMARY_FILE: NGRAM}))
    if drawn_as == "pretraining":
        assert xy(line_of(fig.axes[0], "training loss"))[0] == [10, 20, 30, 40, 50, 60]
    else:
        assert xy(line_of(fig.axes[1], "fine-tuned model")) == ([1, 2, 3], [0.70, 0.76, 0.76])
    assert capsys.readouterr().err == (f"note: run.json beside the metrics says a {said} run; the records are a "
                                       f"{drawn_as} run's, drawn as such\n")


def with_changed(records: list[dict], where: dict, **values) -> list[dict]:
    """`records`, those that hold every key and value of `where` given `values` too."""
    return [r | values if where.items() <= r.items() else r for r in records]


LOSSES_NOTE = "note: 1 of the {n} logged losses are below 0, NaN, infinite, not a number or beyond 1e100; they are " \
              "left out of the plot"
NO_RECORD_NOTE = "note: 1 of the 9 lines of {path} are no record (a JSON object with an integer step, each key once: " \
                 "a line a crash cut short, or one written by hand); they are left out of the plot"
# case: (records, summary.json, the one line on stderr, (axis, line's label, the (x, y) it draws))
ODD_VALUES = {
    "negative-train-loss": (
        with_changed(pretraining_records(), {"step": 20}, train_loss=-0.6), None, LOSSES_NOTE,
        (0, "training loss", ([10, 30, 40, 50, 60], [7.5, 6.5, 6.0, 5.5, 5.0]))),
    "negative-valid-loss": (
        with_changed(finetuning_records(), {"epoch": 2}, valid_loss=-0.6), {}, LOSSES_NOTE,
        (0, "validation", ([1, 3], [0.58, 0.54]))),
    "epoch-twice": (
        finetuning_records() + [finetuning_records()[1] | {"valid_acc": 0.9}], {},
        "note: epoch 2 of {path} is logged more than once; the last record of each epoch is drawn",
        (1, "fine-tuned model", ([1, 2, 3], [0.70, 0.9, 0.76]))),
    "best-epoch-true": (
        finetuning_records(), {"best_epoch": True},
        "note: summary.json's best_epoch (True) is no epoch of the records; the best one by finetune.py's rule is "
        "starred", (1, "best epoch", ([2], [0.76]))),
    "bool-step": (
        pretraining_records() + [{"step": True, "train_loss": 1.0}], None, NO_RECORD_NOTE,
        (0, "training loss", ([10, 20, 30, 40, 50, 60], [7.5, 7.0, 6.5, 6.0, 5.5, 5.0]))),
    "fractional-step": (
        pretraining_records() + [{"step": 2.5, "train_loss": 1.0}], None, NO_RECORD_NOTE,
        (0, "training loss", ([10, 20, 30, 40, 50, 60], [7.5, 7.0, 6.5, 6.0, 5.5, 5.0]))),
}


@pytest.mark.parametrize("case", list(ODD_VALUES))
def test_values_no_run_logs_are_left_out_or_chosen_among_with_a_note(tmp_path, drawn, capsys, case):
    """Values a run never logs, each drawn around with one note. A loss below 0 (a cross-entropy
    never is), training or validation: left out, counted in the losses' note (the old code drew it,
    unsaid). An epoch logged twice (files joined or edited by hand: finetune.py appends one record
    an epoch): the last record drawn, the epoch named (the old code drew both, the curve doubling
    back to epoch 2, unsaid). summary.json's best_epoch true: no epoch (True == 1 in Python), so
    the note of a best_epoch the records lack, and the best by finetune.py's rule starred (the old
    code starred epoch 1). A step true or 2.5: no record, counted in that note (as the old code did)."""
    records, summary, note, (axis, label, points) = ODD_VALUES[case]
    files = {SUMMARY_FILE: NGRAM} if summary is None else {"summary.json": summary}
    path = write_run(tmp_path / "run", None, records, **files)
    line = line_of(drawn(path).axes[axis], label)
    assert xy(line) == (points[0], pytest.approx(points[1]))
    losses = sum(k in r for r in records for k in ("train_loss", "valid_loss"))
    assert capsys.readouterr().err == note.format(n=losses, path=path) + "\n"


def test_a_file_whose_every_loss_is_below_0_is_refused_in_one_line(tmp_path, drawn):
    """Every loss negative: nothing to draw, refused naming why (the old code drew them)."""
    path = write_run(tmp_path / "run", None, [{"step": 1, "train_loss": -0.6}, {"step": 2, "valid_loss": -0.5}])
    with pytest.raises(SystemExit, match=r"none of its 2 logged losses can be drawn \(each is below 0, NaN"):
        drawn(path)
