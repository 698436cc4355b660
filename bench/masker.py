"""The MLM masker: minibert's mask_batch vs transformers' DataCollatorForLanguageModeling vs the
exercise's per-element loop, on the same 16 x 128 batches of real text (tokens/s, medians).

    python -m bench.masker

Two kinds of batch: sentences padded to 128 (~27% real tokens) and packed 128-token blocks
(what train_mlm.py masks: every position real). The collator is given the special-tokens mask
(as when the tokenizer returns it) and mask_batch its attention and special masks, so neither
side re-derives them. mask_batch is timed as train_mlm.py calls it on every step (check=False,
the pool checked once beforehand by check_replacement_pool), and once more with check=True and
special_ids, which reads values on the host on every call. The exercise's loop,
`random_mask_tokens` as the exercise guide writes it, indexes the tensors element by element;
it is timed on fewer batches because it is slow. Tokens/s counts all B x T positions. A
benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import transformers

from bench.common import packed_inputs, padded_inputs
from data.prepare import fetch_minilm
from minibert import IGNORE_INDEX, MaskingVocab, load_tokenizer, mask_batch
from minibert.masking import check_replacement_pool


def exercise_loop(input_ids, vocab_size, mask_token_id, special_tokens=None, mask_prob=0.15):
    """The exercise guide's random_mask_tokens, verbatim in logic: one Python step per element."""
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    masked_input_ids = input_ids.clone()
    prob_matrix = torch.rand(input_ids.shape)
    mask_positions = prob_matrix < mask_prob
    for sp in special_tokens:
        mask_positions = mask_positions & (input_ids != sp)
    for i in range(input_ids.size(0)):
        for j in range(input_ids.size(1)):
            if mask_positions[i, j]:
                labels[i, j] = input_ids[i, j]
                rand_val = torch.rand(1).item()
                if rand_val < 0.8:
                    masked_input_ids[i, j] = mask_token_id
                elif rand_val < 0.9:
                    masked_input_ids[i, j] = torch.randint(0, vocab_size, (1,)).item()
    return masked_input_ids, labels


def median_tokens_per_s(fn, batches) -> float:
    times = []
    for batch in batches:
        t = time.perf_counter()
        fn(batch)
        times.append(time.perf_counter() - t)
    return batches[0].numel() / statistics.median(times)


def compare(batches, vocab, collator) -> dict[str, float]:
    special = {id(b): vocab.special_mask(b) for b in batches}
    attention = {id(b): (b != 0).long() for b in batches}
    pool = check_replacement_pool(vocab.ordinary_tensor, vocab.special_ids, vocab.mask_id)  # once per run
    g = torch.Generator().manual_seed(0)
    return {
        "minibert mask_batch": median_tokens_per_s(
            lambda b: mask_batch(b, attention[id(b)], special[id(b)], vocab.mask_id, pool, g, check=False), batches),
        "mask_batch checked": median_tokens_per_s(
            lambda b: mask_batch(b, attention[id(b)], special[id(b)], vocab.mask_id, pool, g,
                                 special_ids=vocab.special_ids), batches),
        "transformers collator": median_tokens_per_s(
            lambda b: collator.torch_mask_tokens(b.clone(), special_tokens_mask=special[id(b)]), batches),
        "exercise loop": median_tokens_per_s(
            lambda b: exercise_loop(b, 30522, vocab.mask_id, list(vocab.special_ids)), batches[:5]),
    }


def main(argv=None):
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    minilm = fetch_minilm()
    tok = load_tokenizer(minilm)
    vocab = MaskingVocab.from_tokenizer(tok)
    collator = transformers.DataCollatorForLanguageModeling(
        transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(minilm, "tokenizer.json"),
                                             mask_token="[MASK]", pad_token="[PAD]"), mlm_probability=0.15)
    inputs = {"padded sentences": list(padded_inputs(tok, 30 * 16, 128).split(16)),
              "packed blocks": list(packed_inputs(tok, 30 * 16, 128).split(16))}
    print(f"masking 16 x 128 batches of real text; torch {torch.__version__}, {torch.get_num_threads()} threads")
    record = {"bench": "masker", "torch": torch.__version__, "threads": torch.get_num_threads()}
    for kind, batches in inputs.items():
        results = compare(batches, vocab, collator)
        real = sum(int((b != 0).sum()) for b in batches) / sum(b.numel() for b in batches)
        print(f"{kind} ({real:.0%} real tokens):")
        for name, tps in results.items():
            print(f"  {name:22s} {tps:14,.0f} tokens/s")
        fast = results["minibert mask_batch"]
        loop_x, collator_x = fast / results["exercise loop"], fast / results["transformers collator"]
        print(f"  mask_batch / exercise loop: {loop_x:,.0f}x; mask_batch / collator: {collator_x:.2f}x")
        key = kind.replace(" ", "_")
        record[key] = {**{k.replace(" ", "_"): v for k, v in results.items()},
                       "vs_exercise_loop": loop_x, "vs_collator": collator_x}
    print(json.dumps(record))


if __name__ == "__main__":
    main()
