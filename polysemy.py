"""Exercise 3: does BERT give one word different vectors in different senses? (S28)

    python polysemy.py                                  # MiniLM (English and the exercise's Chinese pairs)
    python polysemy.py --zh-checkpoint runs/mlm-zh      # plus a minibert model pretrained on Chinese

For each pair of sentences the target word's contextual vector (the mean of its word pieces
in the last hidden state) is compared by cosine similarity, with the exercise's
`compare_polysemous_embeddings`. The static view, the input word embedding, is the same in
every context: 1 for the same word pieces, below 1 for another word or casing. Prints the
table and saves a heat map.
"""

from __future__ import annotations

import argparse
import os
import unicodedata

import torch
import torch.nn.functional as F

from data.prepare import DataError, fetch_minilm
from minibert import BertModel, CheckpointError, load_tokenizer
from minibert.files import write_file
from minibert.run import die
from minibert.run.exercises import CHINESE, CHINESE_PAIRS, ENGLISH, ENGLISH_PAIRS, polysemy_table, word_vector
from minibert.run.folders import resolve_checkpoint
from minibert.run.report import NO_MATPLOTLIB, figure_bytes, pyplot


def pad(text: str, width: int) -> str:
    """Left-align in `width` terminal columns (a CJK character takes two)."""
    used = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    return text + " " * max(0, width - used)


def heat_map(model, tokenizer, sentences: dict, png: str, title: str) -> str | None:
    """The cosine similarities of the target word's vectors across `sentences`, drawn into `png`
    through files.write_file; None (nothing drawn) without matplotlib."""
    plt = pyplot()
    if plt is None:
        return None
    keys = list(sentences)
    vecs = torch.stack([word_vector(model, tokenizer, *sentences[k]) for k in keys])
    sims = F.cosine_similarity(vecs[:, None, :], vecs[None, :, :], dim=-1)
    fig, ax = plt.subplots(figsize=(7, 6), dpi=110)
    im = ax.imshow(sims.tolist(), cmap="viridis", vmin=float(sims.min()), vmax=1.0)
    ax.set_xticks(range(len(keys)), keys, rotation=45, ha="right")
    ax.set_yticks(range(len(keys)), keys)
    for i in range(len(keys)):
        for j in range(len(keys)):
            ax.text(j, i, f"{sims[i, j]:.2f}", ha="center", va="center", color="w", fontsize=8)
    ax.set_title(title)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    write_file(png, figure_bytes(fig))
    return png


def load(path: str, flag: str):
    """(encoder, tokenizer) of a checkpoint folder, or one line naming the flag and what is wrong."""
    try:
        return BertModel.from_pretrained(path), load_tokenizer(path)
    except (CheckpointError, FileNotFoundError) as e:
        die(f"cannot load {flag} {path}: {e}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minilm", default=None, help="the MiniLM folder (default: fetched into data/cache/minilm)")
    p.add_argument("--zh-checkpoint", default="runs/mlm-zh",
                   help="a minibert checkpoint (or train_mlm.py run folder) pretrained with --corpus zh "
                        "(default: runs/mlm-zh; skipped with a note if missing)")
    p.add_argument("--out", default="runs/polysemy", help="where the heat map goes (default: runs/polysemy)")
    args = p.parse_args(argv)
    if args.minilm is None:
        try:
            args.minilm = fetch_minilm()
        except DataError as e:
            die(str(e))
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        die(f"cannot make --out {args.out}: {e.strerror}; give a folder")
    minilm, minilm_tok = load(args.minilm, "--minilm")
    zh = resolve_checkpoint(args.zh_checkpoint)
    zh_found = os.path.isfile(os.path.join(zh, "config.json"))
    zh_model, zh_tok = load(zh, "--zh-checkpoint") if zh_found else (None, None)
    rows = polysemy_table("MiniLM", minilm, minilm_tok, ENGLISH, ENGLISH_PAIRS)
    rows += polysemy_table("MiniLM", minilm, minilm_tok, CHINESE, CHINESE_PAIRS)
    if zh_found:
        rows += polysemy_table(f"minibert-zh ({os.path.basename(zh)})", zh_model, zh_tok, CHINESE, CHINESE_PAIRS)
    else:
        print(f"(no Chinese minibert checkpoint at {args.zh_checkpoint}: run "
              f"`python train_mlm.py --corpus zh --out runs/mlm-zh` to add it)\n")
    print(f"{pad('model', 26)} {pad('target in sentence A', 22)} {pad('target in sentence B', 22)} "
          f"{pad('senses', 22)} {'contextual':>10s} {'static':>7s}")
    for r in rows:
        print(f"{pad(r['model'], 26)} {pad(r['a'], 22)} {pad(r['b'], 22)} {pad(r['sense'], 22)} "
              f"{r['contextual']:10.3f} {r['static']:7.3f}")
    png = heat_map(minilm, minilm_tok, ENGLISH, os.path.join(args.out, "heatmap-minilm-en.png"),
                   "MiniLM: cosine similarity of the target word's contextual vectors")
    print(f"\nheat map: {png}" if png else f"\nno heat map: {NO_MATPLOTLIB}")
    return rows


if __name__ == "__main__":
    main()
