"""Look inside: one sentence pair's attention, every layer and every head, as a picture (what
bertviz's head view shows, drawn as one heatmap per head), and how much [CLS] attends to each token.

    python attention.py --checkpoint runs/mlm-en                       # writes runs/mlm-en/attention.png
    python attention.py --checkpoint runs/mlm-en runs/nsp-en --out attention.png   # side by side
    python attention.py --checkpoint runs/mlm-en --text "a first sentence ." --next "and the next one ."

The input is `[CLS] text [SEP] next [SEP]`, segment ids 0 then 1, as pretraining builds a pair.
Each heatmap's row i is what token i attends to (its softmax over the columns, summing to 1). Beside
each layer's heads, a bar chart: [CLS]'s attention to each token, averaged over the heads: the
pooler (and the next-sentence head, when the model was pretrained with it) reads [CLS]'s vector.
The printed table gives, per head, the mean weight a token puts on the token right after it and
right before it (an even spread over T tokens gives 1/T), and [CLS]'s weight on [CLS] and [SEP].
"""

import argparse
import os

import torch

from minibert import BertModel, CheckpointError, load_tokenizer
from minibert.checkpoint import NOT_FINITE, overflowing
from minibert.files import write_file
from minibert.run import die, run_script
from minibert.run.flags import Parser, utf8_text
from minibert.run.folders import inside_a_runs_folder, no_checkpoint_folder, resolve_checkpoint, said_for_its_run
from minibert.run.report import NO_MATPLOTLIB, figure_bytes, picture_problem, pyplot, table
from minibert.text import plain_tokenizer, shows_nothing

TEXT = "the story is simple and the ending is easy to guess ."
NEXT = "but the actors make it worth watching ."


def load(path: str):
    """(name, encoder, tokenizer) of a checkpoint or train_mlm.py run folder (its newest checkpoint)."""
    if not os.path.isdir(path):
        die(f"--checkpoint {path}: {no_checkpoint_folder(path)}")
    folder = resolve_checkpoint(path)
    try:
        model = BertModel.from_pretrained(folder, use_sdpa=False).eval()
        tokenizer = load_tokenizer(folder)
    except (CheckpointError, OSError, ValueError) as e:
        die(f"--checkpoint {path}: {said_for_its_run(folder, e)}")
    return os.path.basename(os.path.normpath(path)), model, tokenizer


@torch.no_grad()
def attention(model, tokenizer, text: str, following: str, source: str) -> tuple[list[str], torch.Tensor]:
    """(tokens, probabilities (L, H, T, T)) of `[CLS] text [SEP] following [SEP]`; segment ids
    0 then 1, or 0 throughout for a model with one segment embedding (type_vocab_size 1).
    `source`, the --checkpoint given, is named where its numbers are not finite."""
    plain = plain_tokenizer(tokenizer)
    enc = plain.encode(text, following)
    a, b = (plain.encode(t, add_special_tokens=False).ids for t in (text, following))
    for flag, given, pieces in (("--text", text, a), ("--next", following, b)):
        if not pieces or shows_nothing(given) is not None:  # BERT's normalizer drops them, or reads [UNK]
            die(f"{flag} holds nothing the tokenizer reads (only invisible or control characters)")
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    if enc.ids != [cls, *a, sep, *b, sep] or enc.type_ids != [0] * (len(a) + 2) + [1] * (len(b) + 1):
        die("the tokenizer does not frame a pair as BERT's input, [CLS] text [SEP] next [SEP] with segments 0 then 1 "
            "(its post_processor has no such pair template)")
    if len(enc.ids) > model.config.max_position_embeddings:
        die(f"the pair is {len(enc.ids)} tokens, more than the model's {model.config.max_position_embeddings}")
    ids, types = torch.tensor([enc.ids]), torch.tensor([enc.type_ids])             # (1, T) each
    types = types.clamp(max=model.config.type_vocab_size - 1)
    out = model(ids, token_type_ids=types, output_attentions=True)
    probs = torch.stack([a[0] for a in out.attentions])                         # (L, H, T, T)
    finite = bool(torch.isfinite(probs).all()) and not overflowing(out.last_hidden_state)
    if not finite:  # finite weights too large for float32 (in attention, or after it): never a NaN drawn
        die(f"--checkpoint {source}: the model {NOT_FINITE}")
    return enc.tokens, probs


def head_table(tokens: list[str], probs: torch.Tensor) -> list[list[str]]:
    """Per head: layer, head, the mean weight of a token on the next and on the previous token
    (over the tokens but [CLS] and [SEP] whose neighbour is such a token too), [CLS] on [CLS] and
    [CLS] on the [SEP]s."""
    words = [i for i, t in enumerate(tokens) if t not in ("[CLS]", "[SEP]")]
    after = [i for i in words if i + 1 in words]
    before = [i for i in words if i - 1 in words]
    seps = [i for i, t in enumerate(tokens) if t == "[SEP]"]
    rows = []
    for layer, heads in enumerate(probs, 1):
        for head, p in enumerate(heads, 1):                                          # p: (T, T)
            rows.append([str(layer), str(head), f"{p[after, [i + 1 for i in after]].mean():.3f}",
                         f"{p[before, [i - 1 for i in before]].mean():.3f}", f"{p[0, 0]:.3f}",
                         f"{p[0, seps].sum():.3f}"])
    return rows


def draw(plt, models: list[tuple[str, list[str], torch.Tensor]]):
    """One block of rows per checkpoint: a row per layer, a heatmap per head, then [CLS]'s bars."""
    L, H = models[0][2].shape[:2]
    T = max(len(tokens) for _, tokens, _ in models)
    size = 1.2 + 0.16 * T
    fig, axes = plt.subplots(L * len(models), H + 1, figsize=(size * (H + 1.6), size * L * len(models)),
                             squeeze=False, gridspec_kw={"width_ratios": [1] * H + [1.6]})
    for m, (name, tokens, probs) in enumerate(models):
        ticks = range(len(tokens))
        for layer in range(L):
            row = axes[m * L + layer]
            for head in range(H):
                ax = row[head]
                ax.imshow(probs[layer, head].tolist(), cmap="Blues", vmin=0, vmax=1)
                ax.set_title(f"{name}: layer {layer + 1}, head {head + 1}", fontsize=8)
                ax.set_xticks(ticks, tokens, rotation=90, fontsize=6)
                ax.set_yticks(ticks, tokens, fontsize=6)
            cls = probs[layer, :, 0].mean(0)                                     # (T,): [CLS]'s row, mean of heads
            row[H].bar(list(ticks), cls.tolist(), color="tab:orange")
            row[H].set_xticks(ticks, tokens, rotation=90, fontsize=6)
            row[H].set_ylim(0, 1)
            row[H].set_title(f"{name}: layer {layer + 1}, [CLS] attends to (mean of heads)", fontsize=8)
    fig.tight_layout()
    return fig


def main(argv=None):
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", nargs="+", required=True, metavar="FOLDER",
                   help="checkpoint or train_mlm.py run folders (a run: its newest checkpoint), drawn one below "
                        "another")
    p.add_argument("--text", default=TEXT, type=utf8_text, help=f"segment A (default: {TEXT!r})")
    p.add_argument("--next", default=NEXT, type=utf8_text, help=f"segment B (default: {NEXT!r})")
    p.add_argument("--out", help="the picture (.png, .pdf, .svg; default: attention.png in the first folder, or in "
                                 "its run's folder for a checkpoint of a run)")
    args = p.parse_args(argv)
    if not args.text.strip() or not args.next.strip():
        p.error("--text and --next must each hold some text")
    if args.out and picture_problem(args.out):  # said before any model is loaded
        p.error(f"--out {args.out}: {picture_problem(args.out)}")
    if args.out and inside_a_runs_folder(args.out):
        p.error(f"--out {args.out} lies inside a folder of the run {inside_a_runs_folder(args.out)} (a checkpoint, "
                "best/ ...), which the run itself replaces or prunes; give a path in the run's own folder or outside it")
    models = []
    for path in args.checkpoint:
        name, model, tokenizer = load(path)
        tokens, probs = attention(model, tokenizer, args.text, args.next, path)
        if models and probs.shape[:2] != models[0][2].shape[:2]:
            die(f"--checkpoint {path} has {probs.shape[0]} layers of {probs.shape[1]} heads, the first has "
                f"{models[0][2].shape[0]} of {models[0][2].shape[1]}: draw checkpoints of one size together")
        models.append((name, tokens, probs))
    first = args.checkpoint[0]  # a checkpoint of a run: the picture goes into the run's own folder
    out = args.out or os.path.join(inside_a_runs_folder(os.path.join(first, "attention.png")) or first, "attention.png")
    if picture_problem(out):  # the default, in a checkpoint folder that may not be writable
        die(f"cannot draw into {out}: {picture_problem(out)}; give --out")
    for name, tokens, probs in models:
        print(f"{name}: {' '.join(tokens)}")
        print(table(["layer", "head", "on the next token", "on the previous token", "[CLS] on [CLS]", "[CLS] on [SEP]"],
                    head_table(tokens, probs)))
        print(f"(an even spread gives {1 / len(tokens):.3f} to each of the {len(tokens)} tokens)")
    plt = pyplot()
    if plt is None:
        die(f"no picture: {NO_MATPLOTLIB}")
    try:
        write_file(out, figure_bytes(draw(plt, models), os.path.splitext(out)[1][1:].lower() or "png", dpi=110))
    except OSError as e:
        die(f"cannot write {out} ({e.strerror})")
    print(f"picture: {out}")


if __name__ == "__main__":
    run_script(main, "nothing was written")
