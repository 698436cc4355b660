"""BERT, written out by hand, top to bottom (Devlin et al. 2019; HF's modeling_bert.py).

Shape legend: B batch, T sequence length, C hidden size, H attention heads, D head size
(C / H), I intermediate size, V vocabulary, K labels, M masked (target) positions, N real
(non-padding) tokens, P target slots per row. The same letters mean the same everywhere.

Numerically this is HuggingFace's BertModel: post-LN blocks LayerNorm(x + dropout(f(x))),
eps 1e-12, exact erf GELU, additive padding mask (1 - m) * finfo.min, tanh pooler on
[CLS], MLM head dense -> GELU -> LayerNorm -> decoder whose weight IS the word embedding.
Deliberate differences, none of which changes a number:
- module names are shorter than HF's; checkpoint.py holds the one name-mapping table;
- the MLM decoder is not a module: the head is handed the word-embedding matrix, so the
  tie cannot come undone and the state dict has no alias to drop;
- `masked_only=True` projects onto the vocabulary only at the M labelled positions;
- attention probabilities are returned before attention dropout;
- `unpad=True` (minibert/unpad.py) runs every Linear, LayerNorm and GELU on the real tokens
  only: real positions get the same numbers, padding positions come back as 0.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

from .checkpoint import CheckpointError, Pretrained, read_config, warnings_if_loaded, weight_shapes
from .config import ACTIVATIONS, BertConfig
from .loss import IGNORE_INDEX, mlm_loss
from .unpad import RealTokens



def sum_embeddings(*parts: torch.Tensor) -> torch.Tensor:
    """S1: the input representation is the element-wise SUM of its parts, all in R^C.

    Parts of different widths are an error: BERT never broadcasts or pads a width; a part
    of another width needs an explicit projection first. (Leading dims broadcast as usual,
    e.g. a (T, C) position table over (B, T, C).) The sum cannot be split back uniquely.
    """
    widths = [p.shape[-1] for p in parts]
    if len(set(widths)) != 1:
        raise ValueError(f"embeddings to sum must share one width C, got widths {widths}; "
                         "project them to a common width explicitly")
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def additive_mask(attention_mask: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """(B, T) 1 = attend, 0 = padding  ->  (B, 1, 1, T) 0 / finfo.min, added to every head's scores.

    finfo.min, not -inf: a row whose keys are all padding softmaxes to a uniform (finite)
    distribution instead of NaN, and exp(min - max) is exactly 0 for padding keys otherwise.
    The dtype is that of the attention scores: autocast's when it is on, else x's.
    """
    device = x.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype
    keep = attention_mask[:, None, None, :].to(dtype)  # (B, 1, 1, T)
    return (1.0 - keep) * torch.finfo(dtype).min


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        C = config.hidden_size
        self.word_embeddings = nn.Embedding(config.vocab_size, C, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, C)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, C)
        self.norm = nn.LayerNorm(C, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
                position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """token + segment + position (S1), then LayerNorm and dropout: (B, T) ids -> (B, T, C).

        position_ids (HF's argument) default to 0..T-1 in every row."""
        if position_ids is None:
            position_ids = torch.arange(input_ids.shape[-1], device=input_ids.device)  # (T,)
        x = sum_embeddings(self.word_embeddings(input_ids),             # (B, T, C)
                           self.token_type_embeddings(token_type_ids),  # (B, T, C)
                           self.position_embeddings(position_ids))      # (T, C), the same for every row
        return self.dropout(self.norm(x))                          # (B, T, C)


class SelfAttention(nn.Module):
    """Multi-head self-attention: softmax(Q K^T / sqrt(D) + mask) V, then the output projection."""

    def __init__(self, config: BertConfig):
        super().__init__()
        C = config.hidden_size
        self.n_head = config.num_attention_heads
        self.use_sdpa = config.use_sdpa
        self.query = nn.Linear(C, C)
        self.key = nn.Linear(C, C)
        self.value = nn.Linear(C, C)
        self.output = nn.Linear(C, C)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, return_probs: bool = False):
        """x (B, T, C), mask (B, 1, 1, T) additive or None (no padding) -> (B, T, C), and
        probs (B, H, T, T) or None."""
        q, k, v = self.query(x), self.key(x), self.value(x)        # (B, T, C) each
        context, probs = self.attend(q, k, v, mask, return_probs)  # (B, T, C)
        return self.output(context), probs

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
               return_probs: bool = False):
        """The attention itself, H heads of size D side by side in C: (B, T, C) x 3 -> (B, T, C)."""
        q = rearrange(q, "b t (h d) -> b h t d", h=self.n_head)  # (B, H, T, D)
        k = rearrange(k, "b t (h d) -> b h t d", h=self.n_head)  # (B, H, T, D)
        v = rearrange(v, "b t (h d) -> b h t d", h=self.n_head)  # (B, H, T, D)
        if self.use_sdpa and not return_probs:
            # fast path: the same math in one fused kernel, given the same additive mask (without
            # one, e.g. for packed blocks that hold no padding, it may pick flash attention)
            p = self.dropout.p if self.training else 0.0
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)  # (B, H, T, D)
            probs = None
        else:
            D = q.shape[-1]
            scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, T): query t, key s
            if mask is not None:
                scores = scores + mask                       # padding keys -> finfo.min
            probs = scores.softmax(dim=-1)                   # (B, H, T, T), rows sum to 1
            context = self.dropout(probs) @ v                # (B, H, T, D)
        return rearrange(context, "b h t d -> b t (h d)"), probs  # (B, T, C): heads side by side


class BertLayer(nn.Module):
    """One post-LN encoder block: x = LN(x + Attn(x)); x = LN(x + FFN(x))."""

    def __init__(self, config: BertConfig):
        super().__init__()
        C, I = config.hidden_size, config.intermediate_size
        self.attention = SelfAttention(config)
        self.attention_norm = nn.LayerNorm(C, eps=config.layer_norm_eps)
        self.intermediate = nn.Linear(C, I)
        self.act = ACTIVATIONS[config.hidden_act]
        self.output = nn.Linear(I, C)
        self.output_norm = nn.LayerNorm(C, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, return_probs: bool = False):
        """x (B, T, C), mask (B, 1, 1, T) or None -> (B, T, C), and probs (B, H, T, T) or None."""
        a, probs = self.attention(x, mask, return_probs)  # (B, T, C)
        return self.add_and_feed_forward(x, a), probs     # (B, T, C)

    def add_and_feed_forward(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """Everything after attention works token by token: x, a (..., C) -> (..., C)."""
        x = self.attention_norm(x + self.dropout(a))              # (..., C)
        h = self.act(self.intermediate(x))                        # (..., I)
        return self.output_norm(x + self.dropout(self.output(h)))  # (..., C)


@torch.no_grad()
def init_weights(module: nn.Module, std: float) -> None:
    """HF's init: N(0, std) matrices and embeddings, zero biases, padding row 0, LayerNorm 1/0."""
    if isinstance(module, nn.Linear):
        module.weight.normal_(0.0, std)
        if module.bias is not None:
            module.bias.zero_()
    elif isinstance(module, nn.Embedding):
        module.weight.normal_(0.0, std)
        if module.padding_idx is not None:
            module.weight[module.padding_idx].zero_()
    elif isinstance(module, nn.LayerNorm):
        module.weight.fill_(1.0)
        module.bias.zero_()


@dataclass
class EncoderOutput:
    last_hidden_state: torch.Tensor          # (B, T, C)
    pooler_output: torch.Tensor | None       # (B, C); None without a pooler
    attentions: tuple[torch.Tensor, ...] | None = None  # L x (B, H, T, T)


@dataclass
class MaskedLMOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor                     # (B, T, V), or (M, V) with masked_only


@dataclass
class SequenceClassifierOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor                     # (B, K)


@dataclass
class PreTrainingOutput:
    loss: torch.Tensor | None                # MLM + NSP, when both labels are given
    prediction_logits: torch.Tensor          # (B, T, V), or (M, V) / (B, P, V) as in BertForMaskedLM
    seq_relationship_logits: torch.Tensor    # (B, 2): 0 = B follows A, 1 = B is random
    mlm_loss: torch.Tensor | None = None     # the two parts of the loss, for logging
    nsp_loss: torch.Tensor | None = None


class BertPreTrainedModel(Pretrained, nn.Module):
    """What every model class shares: from_pretrained / save_pretrained in HF's folder layout
    (checkpoint.py), and the encoder under its HF name."""

    @property
    def base_model(self) -> "BertModel":
        """The encoder: `self.bert` in a model with a head, the model itself otherwise."""
        return getattr(self, "bert", self)


class BertModel(BertPreTrainedModel):
    """Embeddings -> L encoder blocks -> (optional) tanh pooler on [CLS]."""

    hf_architecture = "BertModel"

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if add_pooling_layer else None
        self.apply(lambda m: init_weights(m, config.initializer_range))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None,
                output_attentions: bool = False) -> EncoderOutput:
        """input_ids, attention_mask (1 = real token), token_type_ids: (B, T). Without an
        attention_mask every position is real and attention gets no mask at all."""
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        self._check_inputs(input_ids, attention_mask, token_type_ids)
        if (self.config.unpad and attention_mask is not None and not output_attentions
                and not attention_mask.bool().all()):
            x = self.forward_unpadded(input_ids, attention_mask, token_type_ids)  # (B, T, C)
            return EncoderOutput(x, self.pool(x))
        x = self.embeddings(input_ids, token_type_ids)                # (B, T, C)
        mask = additive_mask(attention_mask, x) if attention_mask is not None else None  # (B, 1, 1, T), once
        attentions = []
        for layer in self.layers:
            x, probs = layer(x, mask, output_attentions)              # (B, T, C)
            attentions.append(probs)
        return EncoderOutput(x, self.pool(x), tuple(attentions) if output_attentions else None)

    def forward_unpadded(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                         token_type_ids: torch.Tensor) -> torch.Tensor:
        """The fast path behind `unpad=True`: the same layers on the N real tokens only (unpad.py);
        (B, T) inputs -> (B, T, C) last hidden state, zeros at padding positions."""
        real = RealTokens.from_mask(attention_mask)
        rows, cols = real.rows, real.cols
        x = self.embeddings(input_ids[rows, cols], token_type_ids[rows, cols], cols)  # (N, C)
        mask = additive_mask(attention_mask[:, :real.T], x)                          # (B, 1, 1, T')
        for layer in self.layers:
            att = layer.attention
            q, k, v = (real.to_grid(f(x)) for f in (att.query, att.key, att.value))  # (B, T', C) each
            context, _ = att.attend(q, k, v, mask)                                   # (B, T', C)
            a = att.output(real.from_grid(context))                                  # (N, C)
            x = layer.add_and_feed_forward(x, a)                                     # (N, C)
        return real.to_grid(x, input_ids.shape[1])                                   # (B, T, C)

    def pool(self, x: torch.Tensor) -> torch.Tensor | None:
        """tanh(Linear(h_[CLS])): (B, T, C) -> (B, C); None without a pooler."""
        return torch.tanh(self.pooler(x[:, 0])) if self.pooler is not None else None

    def _check_inputs(self, input_ids, attention_mask, token_type_ids) -> None:
        """Shapes always; id ranges and the attention mask's values (0 or 1: other values would make
        the padded and unpadded paths disagree) only on a CPU and outside torch.compile, where
        reading a value costs no device sync and no graph break (on a GPU an out-of-range id stops
        the embedding lookup itself)."""
        cfg = self.config
        if input_ids.dim() != 2 or input_ids.dtype.is_floating_point or input_ids.numel() == 0:
            raise ValueError(f"input_ids must be a non-empty (B, T) tensor of token ids, got "
                             f"shape {tuple(input_ids.shape)} dtype {input_ids.dtype}")
        if input_ids.shape[1] > cfg.max_position_embeddings:
            raise ValueError(f"sequence length {input_ids.shape[1]} exceeds "
                             f"max_position_embeddings ({cfg.max_position_embeddings})")
        if attention_mask is not None and attention_mask.shape != input_ids.shape:
            raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)}, "
                             f"input_ids {tuple(input_ids.shape)}")
        if (attention_mask is not None and attention_mask.device.type == "cpu" and not torch.compiler.is_compiling()
                and not ((attention_mask == 0) | (attention_mask == 1)).all()):
            raise ValueError("attention_mask must hold 0 (padding) and 1 (real token) only, got values "
                             f"{sorted(set(attention_mask.unique().tolist()))[:6]}")
        for name, t, limit in (("input_ids", input_ids, cfg.vocab_size),
                               ("token_type_ids", token_type_ids, cfg.type_vocab_size)):
            if t.shape != input_ids.shape:
                raise ValueError(f"{name} has shape {tuple(t.shape)}, input_ids {tuple(input_ids.shape)}")
            if t.device.type == "cpu" and not torch.compiler.is_compiling() and (t.min() < 0 or t.max() >= limit):
                raise ValueError(f"{name} must lie in [0, {limit}); got values from "
                                 f"{int(t.min())} to {int(t.max())}")


class MLMHead(nn.Module):
    """dense -> GELU -> LayerNorm -> decoder; the decoder weight is the word-embedding matrix."""

    def __init__(self, config: BertConfig):
        super().__init__()
        C = config.hidden_size
        self.dense = nn.Linear(C, C)
        self.act = ACTIVATIONS[config.hidden_act]
        self.norm = nn.LayerNorm(C, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))  # the decoder's own bias

    def forward(self, h: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        h = self.norm(self.act(self.dense(h)))            # (..., C)
        return F.linear(h, word_embeddings, self.bias)     # (..., V) = h @ E^T + b

    def predict(self, h: torch.Tensor, word_embeddings: torch.Tensor, labels=None, masked_only: bool = False,
                target_positions=None) -> "MaskedLMOutput":
        """The logits (and, with labels, the MLM loss) of the hidden states h (B, T, C), at every
        position, at the masked ones only, or at fixed target slots (BertForMaskedLM.forward)."""
        if target_positions is not None:
            index = target_positions[..., None].expand(-1, -1, h.shape[-1])  # (B, P, C)
            logits = self(h.gather(1, index), word_embeddings)                # (B, P, V)
            return MaskedLMOutput(mlm_loss(logits, labels, check=False), logits)
        if masked_only:
            if labels is None:
                raise ValueError("masked_only=True needs labels to know which positions to score")
            is_target = labels != IGNORE_INDEX  # (B, T)
            h, labels = h[is_target], labels[is_target]  # (M, C), (M,)
        logits = self(h, word_embeddings)  # (B, T, V) | (M, V)
        loss = mlm_loss(logits, labels) if labels is not None else None
        return MaskedLMOutput(loss, logits)


class BertForMaskedLM(BertPreTrainedModel):
    """BertModel without pooler, plus the MLM head tied to the word embeddings (HF's layout)."""

    hf_architecture = "BertForMaskedLM"

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=False)
        self.mlm_head = MLMHead(config)
        self.mlm_head.apply(lambda m: init_weights(m, config.initializer_range))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                masked_only: bool = False, target_positions=None) -> MaskedLMOutput:
        """labels (B, T): the original id at target positions, -100 elsewhere.

        masked_only=True (needs labels) projects onto the V-word vocabulary only at the N
        target positions: logits are then (N, V) in row-major order, and the loss is the
        same number as the dense (B, T, V) computation at a fraction of the FLOPs.

        target_positions (B, P) with labels (B, P), from masking.target_slots, is the same
        projection on a fixed number of slots per row: logits (B, P, V), every shape static and
        no value read on the host, so the step compiles into one graph (unused slots are
        labelled -100 and skipped; the loss divides by the number of real targets).
        """
        h = self.bert(input_ids, attention_mask, token_type_ids).last_hidden_state  # (B, T, C)
        return self.mlm_head.predict(h, self.bert.embeddings.word_embeddings.weight, labels, masked_only,
                                     target_positions)


def _label_loss(logits: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor | None:
    """The mean cross-entropy of (B, K) logits against (B,) label ids in [0, K), checked (a
    ValueError naming the shape or range otherwise); None without labels."""
    if labels is None:
        return None
    K = logits.shape[-1]
    if labels.shape != logits.shape[:1]:
        raise ValueError(f"labels must have shape ({logits.shape[0]},), got {tuple(labels.shape)}")
    if labels.min() < 0 or labels.max() >= K:
        raise ValueError(f"labels must lie in [0, {K}); got values from "
                         f"{int(labels.min())} to {int(labels.max())}")
    return F.cross_entropy(logits, labels)


class BertForPreTraining(BertPreTrainedModel):
    """BERT's two pretraining tasks on one encoder (HF's layout): the MLM head tied to the word
    embeddings, and the next-sentence head, a Linear(C, 2) on the pooler output (tanh on [CLS]):
    label 0 when segment B follows A in the text, 1 when B was drawn from another document."""

    hf_architecture = "BertForPreTraining"

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.mlm_head = MLMHead(config)
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        for head in (self.mlm_head, self.nsp_head):
            head.apply(lambda m: init_weights(m, config.initializer_range))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None, next_sentence_label=None,
                masked_only: bool = False, target_positions=None) -> PreTrainingOutput:
        """labels as BertForMaskedLM's; next_sentence_label (B,) in {0, 1}. The loss is the MLM
        loss plus the NSP cross-entropy (each a mean), when both labels are given, as in HF."""
        out = self.bert(input_ids, attention_mask, token_type_ids)
        mlm = self.mlm_head.predict(out.last_hidden_state, self.bert.embeddings.word_embeddings.weight, labels,
                                    masked_only, target_positions)
        nsp_logits = self.nsp_head(out.pooler_output)  # (B, 2)
        nsp_loss = _label_loss(nsp_logits, next_sentence_label)
        loss = mlm.loss + nsp_loss if mlm.loss is not None and nsp_loss is not None else None
        return PreTrainingOutput(loss, mlm.logits, nsp_logits, mlm.loss, nsp_loss)


class BertForNextSentencePrediction(BertPreTrainedModel):
    """The next-sentence head alone on the encoder (HF's BertForNextSentencePrediction)."""

    hf_architecture = "BertForNextSentencePrediction"

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.nsp_head = nn.Linear(config.hidden_size, 2)
        init_weights(self.nsp_head, config.initializer_range)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> SequenceClassifierOutput:
        logits = self.nsp_head(self.bert(input_ids, attention_mask, token_type_ids).pooler_output)  # (B, 2)
        return SequenceClassifierOutput(_label_loss(logits, labels), logits)


class BertForSequenceClassification(BertPreTrainedModel):
    """HF's classifier: pooler (tanh on [CLS]) -> dropout -> Linear(C, K)."""

    hf_architecture = "BertForSequenceClassification"

    def __init__(self, config: BertConfig, num_labels: int = 2):
        super().__init__()
        if num_labels < 2:
            raise ValueError(f"num_labels must be at least 2, got {num_labels}")
        if config.id2label is None or len(config.id2label) != num_labels:
            config = replace(config, id2label={i: f"LABEL_{i}" for i in range(num_labels)})
        self.config = config
        self.num_labels = num_labels
        self.bert = BertModel(config)
        p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        init_weights(self.classifier, config.initializer_range)

    @classmethod
    def _from_config(cls, config: BertConfig):
        return cls(config, len(config.id2label) if config.id2label else 2)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        pooled = self.bert(input_ids, attention_mask, token_type_ids).pooler_output  # (B, C)
        logits = self.classifier(self.dropout(pooled))                                 # (B, K)
        return SequenceClassifierOutput(_label_loss(logits, labels), logits)


class BertForClassification(BertPreTrainedModel):
    """The exercise's head (S6): [CLS] vector -> one Linear -> cross-entropy. No pooler: the
    backbone's is removed, so it is neither counted, trained nor saved.

    For hidden 768 and 2 labels the head has 768 * 2 + 2 = 1538 parameters (S7). Saved in
    minibert's layout (architectures = ["BertForClassification"]): `transformers` has no
    such class, and loading it as BertForSequenceClassification would put the pooler in.
    """

    hf_architecture = "BertForClassification"

    def __init__(self, bert_backbone: BertModel, num_labels: int):
        super().__init__()
        if num_labels < 2:
            raise ValueError(f"num_labels must be at least 2, got {num_labels}")
        self.bert = bert_backbone
        self.bert.pooler = None  # [CLS] goes straight to the classifier
        hidden_size = self.bert.config.hidden_size
        self.classifier = nn.Linear(hidden_size, num_labels)
        init_weights(self.classifier, self.bert.config.initializer_range)

    @property
    def config(self) -> BertConfig:
        config, n = self.bert.config, self.classifier.out_features
        if config.id2label is not None and len(config.id2label) == n:
            return config
        return replace(config, id2label={i: f"LABEL_{i}" for i in range(n)})

    @classmethod
    def _from_config(cls, config: BertConfig):
        return cls(BertModel(config, add_pooling_layer=False), len(config.id2label) if config.id2label else 2)

    def forward(self, input_ids, attention_mask=None, labels=None, *, token_type_ids=None):
        outputs = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                            token_type_ids=token_type_ids)
        cls_embedding = outputs.last_hidden_state[:, 0, :]  # (B, C): the [CLS] position
        logits = self.classifier(cls_embedding)             # (B, K)
        if labels is not None:
            return _label_loss(logits, labels), logits
        return logits


MODEL_CLASSES = {c.hf_architecture: c for c in (BertModel, BertForMaskedLM, BertForPreTraining,
                                                 BertForNextSentencePrediction, BertForSequenceClassification,
                                                 BertForClassification)}


def load_model(path: str | os.PathLike, default: type = BertModel, **config_overrides) -> BertPreTrainedModel:
    """The model class a checkpoint's config.json names in `architectures` (else `default`),
    loaded from it: what HF's AutoModel does, for these six classes. A class it names that is
    none of them (BertForTokenClassification, BertForQuestionAnswering ...) is a CheckpointError:
    its head is not `default`'s, even where the weights would fit; so is a class without a
    classifier over a classifier's weights, where `default` is one."""
    path = os.fspath(path)
    with warnings_if_loaded():
        config, architectures = read_config(path)
        if architectures and not any(a in MODEL_CLASSES for a in architectures):
            raise CheckpointError(f"{path} holds a {architectures[0]} (its config.json's architectures), whose head "
                                  f"minibert does not have; it loads {', '.join(MODEL_CLASSES)}")
        cls = next((MODEL_CLASSES[a] for a in architectures if a in MODEL_CLASSES), default)
        classifiers = (BertForSequenceClassification, BertForClassification)
        if default in classifiers and cls not in classifiers and "classifier.weight" in weight_shapes(path):
            raise CheckpointError(f"{path}: its config.json's architectures names {cls.hf_architecture}, which has "
                                  "no classifier, but its weights hold one (classifier.weight): name the classifier in "
                                  "architectures (BertForSequenceClassification with a pooler, BertForClassification "
                                  "without)")
        return cls._load(path, config, architectures, config_overrides)
