"""minibert: a from-scratch, minimal, readable BERT in PyTorch, numerically HF's BERT."""

from .checkpoint import CheckpointError, load_tokenizer
from .config import PRESETS, BertConfig
from .loss import IGNORE_INDEX, NoMaskedTokensError, mlm_loss
from .masking import MaskingError, MaskingVocab, mask_batch, random_mask_tokens
from .model import (
    BertForClassification,
    BertForMaskedLM,
    BertForNextSentencePrediction,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
    EncoderOutput,
    MaskedLMOutput,
    PreTrainingOutput,
    SequenceClassifierOutput,
)

__all__ = [
    "BertConfig", "PRESETS",
    "BertModel", "BertForMaskedLM", "BertForPreTraining", "BertForNextSentencePrediction",
    "BertForSequenceClassification", "BertForClassification",
    "EncoderOutput", "MaskedLMOutput", "PreTrainingOutput", "SequenceClassifierOutput",
    "mask_batch", "random_mask_tokens", "MaskingVocab", "MaskingError",
    "mlm_loss", "NoMaskedTokensError", "IGNORE_INDEX",
    "CheckpointError", "load_tokenizer",
]
