"""save_pretrained / from_pretrained: HF's folder layout, strict loading, atomic writes."""

import json
import logging
import os
import re
import struct
import warnings

import pytest
import torch
from safetensors.torch import load_file, save_file

import minibert.checkpoint as ckpt
from minibert import (BertForClassification, BertForMaskedLM, BertForSequenceClassification, BertModel,
                      CheckpointError, load_tokenizer)

from conftest import TINY_REORDER, assert_close, perturb_, tiny_config


def _models():
    return [BertModel(tiny_config()), BertForMaskedLM(tiny_config()),
            BertForSequenceClassification(tiny_config(), num_labels=3),
            BertForClassification(BertModel(tiny_config()), num_labels=4)]


def _main_output(out):
    """logits for the heads (BertForClassification returns the tensor itself), else hidden states."""
    if torch.is_tensor(out):
        return out
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


@pytest.mark.parametrize("model", _models(), ids=lambda m: type(m).__name__)
def test_round_trip_every_class(tmp_path, model, batch):
    """Every class writes config.json + model.safetensors and reads back identical weights
    and identical outputs (the same bytes run by the same kernels on the same batch: bit for bit)."""
    ids, mask, types = batch
    model = perturb_(model).eval()
    model.save_pretrained(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["config.json", "model.safetensors"]
    loaded = type(model).from_pretrained(tmp_path).eval()
    for (k, a), (k2, b) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(a, b), k
    assert torch.equal(_main_output(model(ids, mask)), _main_output(loaded(ids, mask)))


def test_saved_names_are_hf_names(tmp_path):
    """The file holds HF's names (the one mapping table in checkpoint.py), no tied alias."""
    BertForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    keys = set(load_file(tmp_path / "model.safetensors"))
    assert "bert.encoder.layer.1.attention.self.query.weight" in keys
    assert "bert.encoder.layer.0.attention.output.LayerNorm.bias" in keys
    assert "bert.encoder.layer.0.output.dense.weight" in keys
    assert "cls.predictions.transform.LayerNorm.weight" in keys and "cls.predictions.bias" in keys
    assert "cls.predictions.decoder.weight" not in keys and len(keys) == 5 + 2 * 16 + 5


def test_tokenizer_is_saved_beside_the_weights(tmp_path):
    """Any tokenizer that frames a text as [CLS] text [SEP] (here a word-level one) is saved and
    read back; without that framing it is refused at load."""
    from tokenizers import Tokenizer, processors
    from tokenizers.models import WordLevel

    tok = Tokenizer(WordLevel({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3}, unk_token="[UNK]"))
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    BertModel(tiny_config(vocab_size=tok.get_vocab_size())).save_pretrained(tmp_path, tokenizer=tok)
    assert load_tokenizer(tmp_path).token_to_id("hello") == 3
    tok.post_processor = None
    BertModel(tiny_config(vocab_size=tok.get_vocab_size())).save_pretrained(tmp_path, tokenizer=tok)
    with pytest.raises(CheckpointError, match=r"its post_processor is missing, not BERT's TemplateProcessing"):
        load_tokenizer(tmp_path)


def test_transformers_reads_text_with_a_saved_tokenizer_as_minibert_does(tmp_path):
    """A checkpoint's folder read by transformers' AutoTokenizer gives the ids minibert's tokenizer
    gives, for capitals, accents and Chinese characters, with minibert's WordPiece and with a
    word-level tokenizer: save_pretrained writes tokenizer_config.json naming transformers' generic
    fast tokenizer, which reads tokenizer.json as it is, and the special tokens. (Without it
    transformers built its BertTokenizer with its defaults: strip_accents null strips the accents
    minibert's WordPiece keeps, so 'café' was read as 'cafe' there.)"""
    import transformers
    from tokenizers import Tokenizer, pre_tokenizers, processors
    from tokenizers.models import WordLevel
    from minibert.text import train_wordpiece
    lines = ["The caf\u00e9 was na\u00efve and the th\u00e9 was hot .", "\u4e2d\u6587 text here ."] * 50
    words = Tokenizer(WordLevel({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "Caf\u00e9": 5},
                                unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    words.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2),
                                                                                                  ("[SEP]", 3)])
    text = "The CAF\u00c9 was na\u00efve , th\u00e9 \u4e2d\u6587 Caf\u00e9"
    for name, tok in (("wordpiece", train_wordpiece(lines, 200)), ("word-level", words)):
        folder = tmp_path / name
        BertForMaskedLM(tiny_config(vocab_size=tok.get_vocab_size())).save_pretrained(folder, tokenizer=tok)
        ours = load_tokenizer(folder).encode(text)
        assert "caf\u00e9" in ours.tokens or "Caf\u00e9" in ours.tokens  # accents kept: what the defaults changed
        theirs = transformers.AutoTokenizer.from_pretrained(folder)
        assert theirs(text)["input_ids"] == ours.ids, name
        assert (theirs.mask_token, theirs.cls_token, theirs.pad_token_id) == ("[MASK]", "[CLS]", 0), name


def _edit(path, fn):
    f = path / "model.safetensors"
    state = load_file(f)
    fn(state)
    save_file(state, f, metadata={"format": "pt"})


@pytest.mark.parametrize("damage,message", [
    (lambda s: s.pop("bert.encoder.layer.0.attention.self.key.bias"), "missing from the checkpoint"),
    (lambda s: s.update({"bert.encoder.extra": torch.zeros(1)}), "unexpected in the checkpoint"),
    (lambda s: s.update({"bert.pooler.dense.bias": torch.zeros(31)}), "shape mismatch"),
], ids=["missing", "unexpected", "mismatched"])
def test_each_kind_of_misfit_alone_is_refused(tmp_path, damage, message):
    perturb_(BertForSequenceClassification(tiny_config(), 2)).save_pretrained(tmp_path)
    _edit(tmp_path, damage)
    with pytest.raises(CheckpointError, match=message):
        BertForSequenceClassification.from_pretrained(tmp_path)


def test_missing_unexpected_and_mismatched_tensors_are_all_listed(tmp_path):
    perturb_(BertForMaskedLM(tiny_config())).save_pretrained(tmp_path)

    def damage(state):
        del state["bert.encoder.layer.1.intermediate.dense.bias"]
        state["bert.encoder.layer.7.output.dense.weight"] = torch.zeros(2, 2)
        state["cls.predictions.bias"] = torch.zeros(98)

    _edit(tmp_path, damage)
    with pytest.raises(CheckpointError) as e:
        BertForMaskedLM.from_pretrained(tmp_path)
    msg = str(e.value)
    assert "nothing was loaded" in msg
    assert "missing from the checkpoint (1):\n    bert.encoder.layer.1.intermediate.dense.bias" in msg
    assert "unexpected in the checkpoint (1):\n    bert.encoder.layer.7.output.dense.weight" in msg
    assert "cls.predictions.bias: checkpoint (98,), model (99,)" in msg


def test_a_different_vocabulary_is_a_shape_error(tmp_path):
    BertForMaskedLM(tiny_config()).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match=r"word_embeddings.weight: checkpoint \(99, 32\), model \(120, 32\)"):
        BertForMaskedLM.from_pretrained(tmp_path, vocab_size=120)


def test_bin_with_tied_aliases_and_skipped_tensors_loads(tmp_path, batch):
    """A pytorch_model.bin holding the tied aliases cls.predictions.decoder.weight/.bias, the
    position_ids buffer and an NSP head loads (weights_only), giving the source's logits bit for
    bit (the same bytes, the same kernels); an alias that differs is refused."""
    ids, mask, types = batch
    src = perturb_(BertForMaskedLM(tiny_config())).eval()
    state = {ckpt.to_hf_name(k): v for k, v in src.state_dict().items()}
    state["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"].clone()
    state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"].clone()
    state["bert.embeddings.position_ids"] = torch.arange(64)[None]
    state["cls.seq_relationship.weight"] = torch.zeros(2, 32)
    state["bert.pooler.dense.weight"] = torch.zeros(32, 32)
    src.config.save(tmp_path / "config.json")
    torch.save(state, tmp_path / "pytorch_model.bin")
    loaded = BertForMaskedLM.from_pretrained(tmp_path).eval()
    assert torch.equal(loaded(ids, mask, types).logits, src(ids, mask, types).logits)
    state["cls.predictions.decoder.weight"] += 1
    torch.save(state, tmp_path / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="untied decoder"):
        BertForMaskedLM.from_pretrained(tmp_path)


def test_backbone_from_an_mlm_checkpoint_names_what_it_dropped_and_initialised(tmp_path, batch, caplog):
    """Taking the encoder out of an MLM checkpoint is expected: one info line (not a warning)
    names the head's tensors dropped and the pooler initialised. The encoder's output is the MLM
    model's own, bit for bit (the same bytes, the same kernels, the pooler only after)."""
    ids, mask, types = batch
    mlm = perturb_(BertForMaskedLM(tiny_config())).eval()
    mlm.save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with caplog.at_level(logging.INFO, logger="minibert"):
            bert = BertModel.from_pretrained(tmp_path).eval()
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    assert re.search(r"dropped the task head's tensors \['cls.predictions.bias'.*new pooler", caplog.text)
    assert torch.equal(bert(ids, mask, types).last_hidden_state, mlm.bert(ids, mask, types).last_hidden_state)
    with pytest.raises(CheckpointError, match="missing from the checkpoint"):
        BertForSequenceClassification.from_pretrained(tmp_path)


def test_exercise_head_checkpoint_is_not_loaded_as_hf_classifier(tmp_path):
    BertForClassification(BertModel(tiny_config()), 2).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match="holds a BertForClassification"):
        BertForSequenceClassification.from_pretrained(tmp_path)
    assert BertForClassification.from_pretrained(tmp_path).classifier.out_features == 2


def test_missing_weights_file_is_a_clear_error(tmp_path):
    tiny_config().save(tmp_path / "config.json")
    with pytest.raises(FileNotFoundError, match="no model.safetensors or pytorch_model.bin"):
        BertModel.from_pretrained(tmp_path)


def test_an_interrupted_save_leaves_the_old_checkpoint_intact(tmp_path, monkeypatch):
    """save_pretrained writes a temporary file and renames it: if writing dies half-way,
    the previous model.safetensors is untouched and no temporary file is left behind (the old
    weights read back byte for byte: atol 0)."""
    old = perturb_(BertModel(tiny_config()), seed=1)
    old.save_pretrained(tmp_path)
    before = (tmp_path / "model.safetensors").read_bytes()

    def dies_half_way(*args):  # the header is written, the first tensor's bytes never come
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt.ctypes, "string_at", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        perturb_(BertModel(tiny_config()), seed=2).save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["config.json", "model.safetensors"]
    monkeypatch.undo()
    loaded = BertModel.from_pretrained(tmp_path)
    assert_close(loaded.pooler.weight, old.pooler.weight, atol=0.0)


def test_config_overrides_on_load(tmp_path, batch):
    """from_pretrained(path, use_sdpa=True) switches the attention path, same numbers (to float32
    rounding: SDPA sums in its own order, atol TINY_REORDER, conftest; a wrong mask or scale is off
    by 0.3 or more). The
    run-time switches are not written into config.json, and an older config.json that has them
    still loads, with the switches left to the caller."""
    ids, mask, types = batch
    BertModel(tiny_config(use_sdpa=True, unpad=True)).save_pretrained(tmp_path / "switches")
    saved = json.loads((tmp_path / "switches" / "config.json").read_text())
    assert "use_sdpa" not in saved and "unpad" not in saved
    model = perturb_(BertModel(tiny_config())).eval()
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**saved, "use_sdpa": True, "unpad": True}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # known keys: no "unknown key" warning
        plain = BertModel.from_pretrained(tmp_path)
    assert not plain.config.use_sdpa and not plain.config.unpad
    fast = BertModel.from_pretrained(tmp_path, use_sdpa=True).eval()
    assert fast.config.use_sdpa
    assert_close(fast(ids, mask, types).last_hidden_state, model(ids, mask, types).last_hidden_state,
                 atol=TINY_REORDER, what="hidden")


def test_hand_written_safetensors_is_byte_identical_to_the_library(tmp_path):
    """minibert writes safetensors itself (the library's writer needs NumPy); for every dtype a
    BERT uses, plus an empty tensor, the file equals safetensors.torch.save_file's byte for byte."""
    from safetensors.torch import save_file as library_save_file

    g = torch.Generator().manual_seed(0)
    tensors = {"w": torch.randn(3, 4, generator=g), "ids": torch.arange(5), "half": torch.randn(7).half(),
               "bf": torch.randn(2, 3).bfloat16(), "flags": torch.tensor([True, False]),
               "empty": torch.zeros(0), "byte": torch.tensor([1, 2, 3], dtype=torch.uint8)}
    ckpt.save_file(tensors, tmp_path / "ours.safetensors", metadata={"format": "pt"})
    library_save_file(tensors, tmp_path / "theirs.safetensors", metadata={"format": "pt"})
    assert (tmp_path / "ours.safetensors").read_bytes() == (tmp_path / "theirs.safetensors").read_bytes()


# ---- damaged files: one CheckpointError line naming the file ------------------------------


def _one_line_naming(error, file):
    """The message starts with the file's full path and is a single line."""
    msg = str(error.value)
    assert msg.startswith(str(file)) and "\n" not in msg, msg


@pytest.mark.parametrize("damage", [
    lambda b: b[:len(b) // 2],                               # cut in half: the data is shorter than the header says
    lambda b: b[:8] + b"\xff" * 16 + b[24:],                 # header bytes garbled: not UTF-8 JSON
    lambda b: struct.pack("<Q", 2 ** 60) + b[8:],            # header claims 2^60 bytes (1 EiB)
    lambda b: b"",                                           # empty file
], ids=["truncated", "garbled header", "huge header size", "empty"])
def test_damaged_safetensors_is_a_checkpoint_error_naming_the_file(tmp_path, damage):
    """A model.safetensors damaged in each way raises CheckpointError (not SafetensorError),
    naming the file, saying why in a few words and what to do."""
    BertModel(tiny_config()).save_pretrained(tmp_path)
    f = tmp_path / "model.safetensors"
    f.write_bytes(damage(f.read_bytes()))
    with pytest.raises(CheckpointError, match=r"model\.safetensors: not a readable safetensors file \(.+\); "
                                              "the checkpoint is damaged — re-save or re-download it") as e:
        BertModel.from_pretrained(tmp_path)
    _one_line_naming(e, f)


def _shard(tmp_path):
    """Turn a saved checkpoint into a one-shard index: model-00001-of-00001.safetensors + index."""
    BertModel(tiny_config()).save_pretrained(tmp_path)
    shard = tmp_path / "model-00001-of-00001.safetensors"
    (tmp_path / "model.safetensors").rename(shard)
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {k: shard.name for k in load_file(shard)}}))
    return shard, index


def test_damaged_shard_or_index_is_a_checkpoint_error_naming_the_file(tmp_path):
    """A sharded checkpoint loads; with its shard cut in half the error names the shard; an
    index that is not JSON, or has no weight_map, names the index."""
    shard, index = _shard(tmp_path)
    BertModel.from_pretrained(tmp_path)  # the sharded path works on good files
    shard.write_bytes(shard.read_bytes()[:100])
    with pytest.raises(CheckpointError, match=r"model-00001-of-00001\.safetensors: not a readable safetensors") as e:
        BertModel.from_pretrained(tmp_path)
    _one_line_naming(e, shard)
    for text, message in [('{"weight_map": ', "not valid JSON"), ('{"metadata": {}}', 'no "weight_map"'),
                          ('["model.safetensors"]', 'no "weight_map"')]:
        index.write_text(text)
        with pytest.raises(CheckpointError, match=rf"index\.json: {message}.*damaged") as e:
            BertModel.from_pretrained(tmp_path)
        _one_line_naming(e, index)


class _RunsACommand:
    """Unpickling this calls os.system(command): what a malicious pytorch_model.bin does."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def test_a_malicious_pickle_is_refused_and_never_runs(tmp_path):
    """A pytorch_model.bin whose unpickling would run `touch MARKER`: CheckpointError naming the
    file, advising safetensors (not torch's "retry with weights_only=False"), and MARKER is not
    created. The same message for a .bin cut short."""
    marker = tmp_path / "MARKER"
    tiny_config().save(tmp_path / "config.json")
    binary = tmp_path / "pytorch_model.bin"
    torch.save({"bert.pooler.dense.bias": _RunsACommand(f"touch {marker}")}, binary)
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin: cannot be loaded safely with weights_only=True: "
                                              r"it holds more than tensors \(or is damaged\); minibert never "
                                              "unpickles arbitrary objects — convert it to model.safetensors") as e:
        BertModel.from_pretrained(tmp_path)
    _one_line_naming(e, binary)
    assert "weights_only=False" not in str(e.value)
    assert not marker.exists()
    torch.save({"w": torch.zeros(100)}, binary)
    binary.write_bytes(binary.read_bytes()[:200])
    with pytest.raises(CheckpointError, match="cannot be loaded safely"):
        BertModel.from_pretrained(tmp_path)


def test_a_bin_that_is_not_a_state_dict_is_refused(tmp_path):
    """A pytorch_model.bin holding a list of tensors loads with weights_only=True but is no {name: tensor}."""
    tiny_config().save(tmp_path / "config.json")
    torch.save([torch.zeros(2)], tmp_path / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin: holds a list, not a state dict"):
        BertModel.from_pretrained(tmp_path)


def test_from_pretrained_wants_a_folder(tmp_path):
    """Given the model.safetensors file itself (a UnicodeDecodeError before), or a folder that
    does not exist: CheckpointError naming the path and saying a folder is expected."""
    BertModel(tiny_config()).save_pretrained(tmp_path)
    file = tmp_path / "model.safetensors"
    with pytest.raises(CheckpointError, match=r"model\.safetensors is a file; from_pretrained takes a checkpoint "
                                              r"folder \(config\.json \+ model\.safetensors\)") as e:
        BertModel.from_pretrained(file)
    _one_line_naming(e, file)
    with pytest.raises(CheckpointError, match="nowhere does not exist"):
        BertModel.from_pretrained(tmp_path / "nowhere")


@pytest.mark.parametrize("field,value,message", [
    ("hidden_dropout_prob", "0.1x", r"BertConfig\.hidden_dropout_prob must be a number in \[0, 1\), got '0.1x'"),
    ("id2label", ["neg", "pos"], r"BertConfig\.id2label must be an object"),
    ("hidden_size", "768", r"BertConfig\.hidden_size must be a positive integer, got '768'"),
    ("model_type", "gpt2", "model_type is 'gpt2', not 'bert': not a BERT's config"),
    ("model_type", "BERT", "model_type is 'BERT', not 'bert'"),
])
def test_config_json_problems_are_a_checkpoint_error(tmp_path, field, value, message):
    """from_pretrained turns config.json's problems into CheckpointError naming config.json
    (still a ValueError for callers that catch that)."""
    BertModel(tiny_config()).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**saved, field: value}))
    with pytest.raises(CheckpointError, match=r"config\.json: " + message) as e:
        BertModel.from_pretrained(tmp_path)
    _one_line_naming(e, tmp_path / "config.json")
    (tmp_path / "config.json").write_text("[]")
    with pytest.raises(CheckpointError, match=r"config\.json: a config must be a JSON object"):
        BertModel.from_pretrained(tmp_path)


@pytest.mark.parametrize("content", ['{"model": ', '{"a": 1}', "[]"], ids=["cut", "not a tokenizer", "list"])
def test_corrupt_tokenizer_json_is_a_checkpoint_error(tmp_path, content):
    """A tokenizer.json the tokenizers library cannot read (it raises a bare Exception):
    CheckpointError naming the file, with the library's reason."""
    file = tmp_path / "tokenizer.json"
    file.write_text(content)
    with pytest.raises(CheckpointError, match=r"tokenizer\.json: not a valid tokenizer\.json \(.+\)$") as e:
        load_tokenizer(tmp_path)
    _one_line_naming(e, file)


def test_a_tokenizer_of_another_size_than_the_vocabulary_is_refused(tmp_path):
    """A model of 60 word vectors beside a tokenizer of fewer tokens would let fill-mask guess ids
    that have no token (printed as None); beside more, ids past the embedding table. Both are
    refused when the tokenizer is loaded, naming the two sizes; the right size loads."""
    from minibert.text import train_wordpiece
    tok = train_wordpiece(["the cat sat on the mat", "a dog ran"] * 5, vocab_size=60)
    size = tok.get_vocab_size()
    for vocab, word in ((size + 7, "fewer"), (size - 3, "more")):
        folder = tmp_path / f"v{vocab}"
        BertForMaskedLM(tiny_config(vocab_size=vocab)).save_pretrained(folder)
        tok.save(str(folder / "tokenizer.json"))
        with pytest.raises(CheckpointError, match=rf"has {size} tokens, {word} than its model's vocabulary "
                                                  rf"\({vocab}\): the tokenizer does not belong to its model"):
            load_tokenizer(folder)
    BertForMaskedLM(tiny_config(vocab_size=size)).save_pretrained(tmp_path / "ok", tokenizer=tok)
    assert load_tokenizer(tmp_path / "ok").get_vocab_size() == size
