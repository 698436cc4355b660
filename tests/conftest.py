"""Shared helpers. Tolerances are explicit at each call site."""

import pytest
import torch

from minibert import BertConfig


def assert_close(actual, expected, atol, rtol=0.0, what="tensor"):
    """allclose that, on failure, says how far off it was (max and mean |difference|)."""
    actual, expected = torch.as_tensor(actual), torch.as_tensor(expected, dtype=torch.as_tensor(actual).dtype)
    assert actual.shape == expected.shape, f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    diff = (actual - expected).abs()
    ok = torch.allclose(actual, expected, atol=atol, rtol=rtol)
    assert ok, (f"{what}: max |diff| {diff.max().item():.3e}, mean {diff.mean().item():.3e} "
                f"(atol {atol}, rtol {rtol})")


def tiny_config(**overrides) -> BertConfig:
    """A 2-layer, 32-wide BERT: C=32, H=4 (D=8), I=37 (odd, so no width is confused), V=99."""
    sizes = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=37, max_position_embeddings=64, type_vocab_size=2)
    return BertConfig(**{**sizes, **overrides})


def perturb_(model, scale=0.1, seed=0):
    """Add noise to EVERY parameter, so zero biases and unit LayerNorms are tested too."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return model


@pytest.fixture
def batch():
    """Three rows of length 10, [CLS]=1 ... [SEP]=2, padding (id 0) after position 6 in row 1,
    segment B from position 5 on."""
    g = torch.Generator().manual_seed(1234)
    ids = torch.randint(5, 99, (3, 10), generator=g)
    ids[:, 0] = 1
    ids[:, -1] = 2
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    ids[1, 5] = 2
    ids[1, 6:] = 0
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    types[1, 6:] = 0
    return ids, mask, types
