"""Fill in the blanks: a BERT masked-LM's most probable tokens for every [MASK] in each text.

    python fill_mask.py --checkpoint runs/mlm-en "the movie was [MASK] ." "i [MASK] this film ."
    echo "the soup was [MASK] ." | python fill_mask.py --checkpoint runs/mlm-en --top-k 3   # one text a line, or < FILE
    python fill_mask.py --checkpoint runs/mlm-en --examples --beside-random-init   # what make run shows

--checkpoint is a checkpoint folder in HF's layout (config.json, model.safetensors or
pytorch_model.bin, tokenizer.json) that holds a masked-LM head: one written by train_mlm.py or
save_pretrained, or by transformers' BertForMaskedLM.save_pretrained; or a train_mlm.py run
folder (its newest checkpoint). With no texts on the command line, standard input is read, one
text per line (blank lines skipped). A text is never truncated.

Output: one block per text, blocks separated by a blank line: the text, then one line per
[MASK], left to right, with its --top-k tokens, most probable first, as `token (probability)`.
A token is the tokenizer's vocabulary entry (a word piece reads `##s`); its probability is the
softmax over the whole vocabulary at that position, to three decimals:

    TEXT
      mask 1: TOKEN (P)  TOKEN (P)  ...       the first [MASK]'s top-k
      mask 2: TOKEN (P)  TOKEN (P)  ...       the second [MASK]'s, and so on

--examples fills the fixed sentences below (a sentiment slot, a verb's number, a named thing, a
superlative); --beside-random-init adds, under each mask's line, the same model's guesses before
any training (its config, weights initialised from seed 0): what pretraining changed.

Every error is one line on standard error: exit status 2 for a wrong command line, 1 for anything else.
"""

from __future__ import annotations

import argparse
import os

import torch

from minibert import BertForMaskedLM, CheckpointError, load_tokenizer
from minibert.fill_mask import FillMaskError, fill_mask, load_masked_lm
from minibert.run import die, input_lines, run_script
from minibert.run.flags import AT_LEAST_1, Parser, add_device, check_ranges, utf8_text
from minibert.run.folders import no_checkpoint_folder, resolve_checkpoint, said_for_its_run
from minibert.run.probes import twin_not_finite
from minibert.run.training import pick_device
from minibert.text import one_line


EXAMPLES = [
    "the movie was [MASK] .",                              # a sentiment slot: an adjective
    "the actors [MASK] very good in this film .",         # a verb's number: were
    "the president of the united [MASK] .",              # a named thing: states
    "it is one of the [MASK] films i have ever seen .",  # a superlative: best, worst
    "she [MASK] to the store yesterday .",               # a past-tense verb
]


def checkpoint_folder(path: str) -> str:
    """--checkpoint as a checkpoint folder: as given, or a run folder's newest checkpoint."""
    if not os.path.isdir(path):
        die(f"--checkpoint {path}: {no_checkpoint_folder(path)}")
    folder = resolve_checkpoint(path)  # one line for a run without a checkpoint yet
    if not os.path.lexists(os.path.join(folder, "config.json")):  # anything else there is refused when read
        die(f"--checkpoint {path} holds no config.json: give a checkpoint folder or a train_mlm.py run folder")
    return folder


def read_texts(texts: list[str]) -> list[str]:
    """The texts given on the command line, else the non-blank lines of standard input."""
    if not texts:
        texts = input_lines(None, "text")
    if not texts:
        die("no text given: pass texts as arguments, or one per line on standard input")
    return texts


def main(argv=None):
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("texts", nargs="*", type=utf8_text,
                   help="texts holding [MASK] (default: one per line from standard input)")
    p.add_argument("--checkpoint", required=True,
                   help="a masked-LM checkpoint folder (HF's layout), or a train_mlm.py run folder (its newest checkpoint)")
    p.add_argument("--top-k", type=int, default=5, help="tokens shown for each [MASK] (default: 5)")
    p.add_argument("--examples", action="store_true", help="fill the fixed example sentences (with any texts given)")
    p.add_argument("--beside-random-init", action="store_true",
                   help="show the same model before training (its config, seed 0) under each mask's line")
    add_device(p)
    args = p.parse_args(argv)
    check_ranges(p, args, {"top_k": AT_LEAST_1})
    device = pick_device(args.device)
    folder = checkpoint_folder(args.checkpoint)
    try:
        model, tokenizer = load_masked_lm(folder), load_tokenizer(folder)
    except (CheckpointError, FileNotFoundError) as e:
        die(f"cannot load --checkpoint {args.checkpoint}: {said_for_its_run(folder, e)}")
    texts = (EXAMPLES if args.examples else []) + (args.texts if args.texts or args.examples else read_texts([]))
    try:
        results = fill_mask(model.to(device), tokenizer, texts, k=args.top_k)
    except FillMaskError as e:
        die(str(e))
    if args.beside_random_init:
        torch.manual_seed(0)
        try:  # the texts were read once already: only its own weights can fail here
            random_init = fill_mask(BertForMaskedLM(model.config).to(device), tokenizer, texts, k=args.top_k)
        except FillMaskError:
            die(f"--beside-random-init: {twin_not_finite(model.config)}")
    for i, (text, masks) in enumerate(zip(texts, results, strict=True)):
        print(("\n" if i else "") + one_line(text))
        for j, guesses in enumerate(masks):
            print(f"  mask {j + 1}: " + shown(guesses))
            if args.beside_random_init:
                print("    random init: " + shown(random_init[i][j]))
    return results


def shown(guesses) -> str:
    """A mask's line of guesses; a token holding a line end or a tab (a tokenizer.json may) is escaped."""
    return "  ".join(f"{one_line(g.token)} ({g.probability:.3f})" for g in guesses)


if __name__ == "__main__":
    run_script(main, "nothing was written")
