"""Exercise 3: does BERT give one word different vectors in different senses? (S28)

    python polysemy.py                                  # MiniLM beside `make run`'s English model (runs/mlm-en)
    python polysemy.py --checkpoint runs/mlm-en         # the same, naming the English minibert model
    python polysemy.py --zh-checkpoint runs/mlm-zh      # plus a Chinese minibert model, which
                                                        # `python train_mlm.py --corpus zh --out runs/mlm-zh` trains

For each pair of sentences the target word's contextual vector (the mean of its word pieces
in the last hidden state) is compared by cosine similarity, with the exercise's
`compare_polysemous_embeddings`. The static view, the input word embedding, is the same in
every context: 1 for the same word pieces, below 1 for another word or casing. The English
pairs are the exercise's (bank, apple) and four more words in two senses each (bat, spring,
match, plant); they run on MiniLM and on the English minibert model, the Chinese pairs on
MiniLM and the Chinese one. Prints the table, then per model and language the mean
similarity of the same-sense pairs and of the different-sense pairs (a model that separates
senses has a gap above 0), and saves a heat map.
"""

from __future__ import annotations

import argparse
import os
import unicodedata
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from data.prepare import DataError, fetch_minilm
from minibert import BertModel, CheckpointError, load_tokenizer
from minibert.files import write_file
from minibert.run import die, os_problem, run_script
from minibert.run.flags import Parser
from minibert.run.exercises import CHINESE, CHINESE_PAIRS, ENGLISH, ENGLISH_PAIRS, polysemy_table, word_vector
from minibert.run.folders import resolve_checkpoint, run_kind, said_for_its_run, the_run_it_is_or_is_in
from minibert.run.probes import run_flags
from minibert.text import plain_tokenizer
from minibert.run.report import NO_MATPLOTLIB, figure_bytes, folder_problem, pyplot

# More English words in two senses each, two sentences per sense (both nouns, so the senses are
# not told apart by the part of speech): each word gives two same-sense pairs and two
# different-sense pairs. Every target word occurs once, not inside a longer word (word_vector
# takes the first match).
MORE_ENGLISH = {
    "bat/animal": ("A bat flew out of the cave at dusk.", "bat"),
    "bat/animal2": ("The bat hung upside down in the barn.", "bat"),
    "bat/club": ("He swung the bat and hit the ball.", "bat"),
    "bat/club2": ("She bought a new cricket bat for the season.", "bat"),
    "spring/season": ("The flowers bloom in spring every year.", "spring"),
    "spring/season2": ("We planted the garden in early spring.", "spring"),
    "spring/coil": ("The spring inside the old mattress broke.", "spring"),
    "spring/coil2": ("A metal spring keeps the door closed.", "spring"),
    "match/game": ("Our team won the football match on Sunday.", "match"),
    "match/game2": ("The tennis match lasted three hours.", "match"),
    "match/fire": ("He struck a match to see in the dark.", "match"),
    "match/fire2": ("She lit the stove with a single match.", "match"),
    "plant/factory": ("The power plant supplies the whole city.", "plant"),
    "plant/factory2": ("He works at a chemical plant near the coast.", "plant"),
    "plant/flora": ("She waters the plant on her windowsill.", "plant"),
    "plant/flora2": ("This plant needs a lot of sunlight.", "plant"),
}
MORE_ENGLISH_PAIRS = [  # (a, b, same sense?)
    ("bat/animal", "bat/animal2", "same"), ("bat/club", "bat/club2", "same"),
    ("bat/animal", "bat/club", "different"), ("bat/animal2", "bat/club2", "different"),
    ("spring/season", "spring/season2", "same"), ("spring/coil", "spring/coil2", "same"),
    ("spring/season", "spring/coil", "different"), ("spring/season2", "spring/coil2", "different"),
    ("match/game", "match/game2", "same"), ("match/fire", "match/fire2", "same"),
    ("match/game", "match/fire", "different"), ("match/game2", "match/fire2", "different"),
    ("plant/factory", "plant/factory2", "same"), ("plant/flora", "plant/flora2", "same"),
    ("plant/factory", "plant/flora", "different"), ("plant/factory2", "plant/flora2", "different"),
]
ENGLISH_ALL = {**ENGLISH, **MORE_ENGLISH}
ENGLISH_ALL_PAIRS = ENGLISH_PAIRS + MORE_ENGLISH_PAIRS


def pad(text: str, width: int) -> str:
    """Left-align in `width` terminal columns (a CJK character takes two)."""
    used = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    return text + " " * max(0, width - used)


def sense_means(rows: list[dict]) -> dict:
    """The mean contextual similarity of the rows whose sense is "same" and of those whose sense
    is "different" (rows of another word are in neither), their counts, and the gap (same minus
    different: above 0 when the model tells the senses apart). `rows`: one model's table."""
    same = [r["contextual"] for r in rows if r["sense"] == "same"]
    different = [r["contextual"] for r in rows if r["sense"] == "different"]
    mean_same, mean_different = sum(same) / len(same), sum(different) / len(different)
    return {"same": mean_same, "n_same": len(same), "different": mean_different,
            "n_different": len(different), "gap": mean_same - mean_different}


def pairs(n: int) -> str:
    return f"{n} pair" if n == 1 else f"{n} pairs"


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
        die(f"cannot load {flag} {path}: {said_for_its_run(path, e)}")


def minibert_folder(path: str | None, flag: str, default: str) -> str | None:
    """The checkpoint folder (the newest of a train_mlm.py run folder) that `flag` names. Not
    given, its default may be missing (None: the caller notes how to make it); a folder the user
    named must hold a model (one line otherwise: a mistyped path is not skipped)."""
    folder = resolve_checkpoint(path or default)
    if os.path.lexists(os.path.join(folder, "config.json")):
        return folder
    if path is not None:
        die(f"{flag} {path}: no checkpoint there (no config.json); give a checkpoint or a train_mlm.py run folder")
    return None


CORPUS_LANGUAGE = {"en": "en", "en-large": "en", "zh": "zh"}  # train_mlm.py's corpora and their language


def trained_on(folder: str) -> str | None:
    """The corpus the train_mlm.py run of a checkpoint was pretrained on, from its training_state.pt;
    None where it has none or it does not read back (the weights, not this, are what polysemy uses)."""
    try:
        flags = run_flags(folder)
    except CheckpointError:
        return None
    return flags["corpus"] if flags else None


@dataclass
class Language:
    """One language's sense pairs, and the minibert checkpoint to compare on them with MiniLM."""
    name: str                 # "English"
    code: str                 # the suffix of the model's name in the tables: minibert-en
    flag: str                 # the flag naming the checkpoint
    default: str              # the checkpoint looked for without the flag
    makes: str                # how the default is made, for the note when it is missing
    sentences: dict
    pairs: list
    folder: str | None = None  # the checkpoint folder found (None: the default is missing)


def checked_table(name: str, language: str, model, tokenizer, sentences: dict, pairs, where: str) -> list:
    """[(model name, language, rows)], or one line naming `where` (the flag and its folder) for a
    model too short for the sentences or whose vectors are not finite (finite weights too large for
    float32)."""
    longest = max(len(plain_tokenizer(tokenizer).encode(sentence).ids) for sentence, _ in sentences.values())
    if longest > model.config.max_position_embeddings:
        die(f"{where}: the model reads at most {model.config.max_position_embeddings} positions, and a sentence of "
            f"the {language} sense pairs is {longest} tokens long; give a model of {longest} positions or more")
    try:
        return [(name, language, polysemy_table(name, model, tokenizer, sentences, pairs))]
    except CheckpointError as e:
        die(f"{where}: {e}")


def main(argv=None):
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minilm", default=None, help="the MiniLM folder (default: fetched into data/cache/minilm)")
    p.add_argument("--checkpoint",
                   help="a minibert checkpoint (or train_mlm.py run folder) pretrained on English "
                        "(default: runs/mlm-en, the one `make run` trains; skipped with a note if missing)")
    p.add_argument("--zh-checkpoint",
                   help="a minibert checkpoint (or train_mlm.py run folder) pretrained with --corpus zh "
                        "(default: runs/mlm-zh; skipped with a note if missing)")
    p.add_argument("--out", default="runs/polysemy", help="where the heat map goes (default: runs/polysemy)")
    args = p.parse_args(argv)
    if folder_problem(args.out):  # said before any model is loaded or any table printed
        die(f"--out {args.out}: {folder_problem(args.out)}; give a folder")
    run = the_run_it_is_or_is_in(args.out)
    if run is not None:  # the run would take the picture for a file put there by hand, or delete it
        die(f"--out {args.out} is {'' if run == args.out else 'in '}the {run_kind(run)} run {run}; its pictures never "
            "go inside a run: choose another --out")
    languages = [
        Language("English", "en", "--checkpoint", "runs/mlm-en", "run `make run` (or `python train_mlm.py --out "
                 "runs/mlm-en`)", ENGLISH_ALL, ENGLISH_ALL_PAIRS),
        Language("Chinese", "zh", "--zh-checkpoint", "runs/mlm-zh", "run `python train_mlm.py --corpus zh --out "
                 "runs/mlm-zh`", CHINESE, CHINESE_PAIRS)]
    for language, given in zip(languages, (args.checkpoint, args.zh_checkpoint)):
        language.folder = minibert_folder(given, language.flag, language.default)
        corpus = trained_on(language.folder) if language.folder else None
        if corpus in CORPUS_LANGUAGE and CORPUS_LANGUAGE[corpus] != language.code:
            die(f"{language.flag} {language.folder} was pretrained on the corpus {corpus!r} (its training_state.pt), "
                f"not on {language.name}: give a checkpoint of a run on {language.name}")
    if args.minilm is None:
        try:
            args.minilm = fetch_minilm()
        except DataError as e:
            die(str(e))
    minilm, minilm_tok = load(args.minilm, "--minilm")
    tables = []
    for lang in languages:
        tables += checked_table("MiniLM", lang.name, minilm, minilm_tok, lang.sentences, lang.pairs,
                                f"--minilm {args.minilm}")
        if lang.folder is not None:
            model, tokenizer = load(lang.folder, lang.flag)
            name = f"minibert-{lang.code} ({os.path.basename(os.path.normpath(lang.folder))})"
            tables += checked_table(name, lang.name, model, tokenizer, lang.sentences, lang.pairs,
                                    f"{lang.flag} {lang.folder}")
    for lang in languages:  # said once every model given has loaded
        if lang.folder is None:
            print(f"(no {lang.name} minibert checkpoint at {lang.default}: {lang.makes} to add it)\n")
    rows = [r for _, _, table in tables for r in table]
    print(f"{pad('model', 26)} {pad('target in sentence A', 22)} {pad('target in sentence B', 22)} "
          f"{pad('senses', 22)} {'contextual':>10s} {'static':>7s}")
    for r in rows:
        print(f"{pad(r['model'], 26)} {pad(r['a'], 22)} {pad(r['b'], 22)} {pad(r['sense'], 22)} "
              f"{r['contextual']:10.3f} {r['static']:7.3f}")
    print("\nmean contextual similarity (same sense, different senses; gap = same - different):")
    for name, language, table in tables:
        m = sense_means(table)
        print(f"{pad(name, 26)} {language:8s} same {m['same']:.3f} ({pairs(m['n_same'])})  "
              f"different {m['different']:.3f} ({pairs(m['n_different'])})  gap {m['gap']:+.3f}")
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        die(f"cannot make --out {args.out}: {e.strerror}; give a folder")
    png = os.path.join(args.out, "heatmap-minilm-en.png")
    try:
        png = heat_map(minilm, minilm_tok, ENGLISH, png, "MiniLM: cosine similarity of the target word's contextual vectors")
    except OSError as e:
        die(os_problem(e, png))
    print(f"\nheat map: {png}" if png else f"\nno heat map: {NO_MATPLOTLIB}")
    return rows


if __name__ == "__main__":
    run_script(main, "nothing is half-written")
