"""BertConfig: HF's field names and defaults, config.json round trip, presets, validation."""

import json
import re
import warnings

import pytest

from minibert import PRESETS, BertConfig


def test_defaults_are_bert_base():
    c = BertConfig()
    assert (c.vocab_size, c.hidden_size, c.num_hidden_layers, c.num_attention_heads,
            c.intermediate_size, c.max_position_embeddings, c.type_vocab_size) == (30522, 768, 12, 12, 3072, 512, 2)
    assert (c.hidden_act, c.layer_norm_eps, c.pad_token_id, c.initializer_range) == ("gelu", 1e-12, 0, 0.02)
    assert c.hidden_dropout_prob == c.attention_probs_dropout_prob == 0.1 and c.head_size == 64


@pytest.mark.parametrize("name,layers,hidden,heads", [
    ("bert-tiny", 2, 128, 2), ("bert-mini", 4, 256, 4), ("bert-small", 4, 512, 8),
    ("bert-medium", 8, 512, 8), ("bert-base", 12, 768, 12)])
def test_presets(name, layers, hidden, heads):
    c = BertConfig.from_preset(name)
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size) == \
        (layers, hidden, heads, 4 * hidden)
    assert len(PRESETS) == 5
    assert BertConfig.from_preset(name, vocab_size=8000).vocab_size == 8000


def test_unknown_preset_is_a_clear_error():
    with pytest.raises(ValueError, match="bert-tiny"):
        BertConfig.from_preset("bert-huge")


@pytest.mark.parametrize("field,value,message", [
    ("num_attention_heads", 5, "divisible"),
    ("hidden_size", 0, "hidden_size must be a positive integer"),
    ("num_hidden_layers", -1, "num_hidden_layers must be a positive integer"),
    ("vocab_size", 2.5, "vocab_size must be a positive integer"),
    ("hidden_dropout_prob", 1.5, "hidden_dropout_prob"),
    ("hidden_act", "swish2", "hidden_act"),
    ("layer_norm_eps", 0.0, "layer_norm_eps"),
    ("layer_norm_eps", float("inf"), "layer_norm_eps must be a positive number, got inf"),
    ("position_embedding_type", "relative_key", "position_embedding_type"),
    ("pad_token_id", 40000, "pad_token_id"),
    ("hidden_size", "768", "hidden_size must be a positive integer, got '768'"),
    ("hidden_dropout_prob", "0.1x", r"hidden_dropout_prob must be a number in \[0, 1\), got '0.1x'"),
    ("attention_probs_dropout_prob", None, "attention_probs_dropout_prob must be a number"),
    ("initializer_range", "0.02", "initializer_range must be a positive number, got '0.02'"),
    ("pad_token_id", "0", "pad_token_id \\('0'\\) must be a token id"),
    ("hidden_act", ["gelu"], "hidden_act \\['gelu'\\] is not supported"),
    ("id2label", ["neg", "pos"], "id2label must be an object {id: label}, got a list"),
    ("id2label", {"a": "neg", "b": "pos"}, r"id2label keys must be 0..N-1, got \['a', 'b'\]"),
])
def test_invalid_configs_name_the_field(field, value, message):
    """A value of the wrong type (a string for a number, a list for the label table) is a
    ValueError naming the field, like a value out of range, never a TypeError from a comparison."""
    with pytest.raises(ValueError, match=message):
        BertConfig(**{field: value})


def test_classifier_dropout_none_means_hidden_dropout():
    """None is allowed for classifier_dropout only (HF's "use hidden_dropout_prob")."""
    assert BertConfig(classifier_dropout=None).classifier_dropout is None


@pytest.mark.parametrize("field,value,message", [
    ("hidden_dropout_prob", "0.1x", r"hidden_dropout_prob must be a number in \[0, 1\), got '0.1x'"),
    ("id2label", ["neg", "pos"], "id2label must be an object"),
    ("hidden_size", "768", "hidden_size must be a positive integer, got '768'"),
])
def test_a_config_json_of_wrong_types_names_the_file_and_the_field(tmp_path, field, value, message):
    """config.json holding a wrong type: one ValueError line `<path>/config.json: BertConfig.<field> ...`."""
    (tmp_path / "config.json").write_text(json.dumps({**BertConfig().to_dict(), field: value}))
    with pytest.raises(ValueError, match=r"config\.json: BertConfig\." + message) as e:
        BertConfig.load(tmp_path)
    assert str(e.value).startswith(str(tmp_path / "config.json")) and "\n" not in str(e.value)


@pytest.mark.parametrize("content,message", [
    (b"[1, 2]", "a config must be a JSON object {field: value}, got a list"),
    (b'"bert"', "a config must be a JSON object {field: value}, got a str"),
    (b"\xff\xfe\x00garbage", "is not valid JSON"),
    (b'{"hidden_size": 32', "is not valid JSON"),
], ids=["list", "string", "binary", "cut"])
def test_a_config_json_that_is_not_an_object_names_the_file(tmp_path, content, message):
    """A top-level JSON list or string, bytes that are not UTF-8, or a cut-off file: ValueError naming config.json."""
    (tmp_path / "config.json").write_bytes(content)
    with pytest.raises(ValueError, match=r"config\.json:? " + message):
        BertConfig.load(tmp_path)


def test_config_json_round_trip(tmp_path):
    c = BertConfig.from_preset("bert-mini", vocab_size=1000, id2label={0: "neg", 1: "pos"})
    c.save(tmp_path / "config.json", ["BertForSequenceClassification"])
    d = json.loads((tmp_path / "config.json").read_text())
    assert d["model_type"] == "bert" and d["architectures"] == ["BertForSequenceClassification"]
    assert d["id2label"] == {"0": "neg", "1": "pos"} and d["label2id"] == {"neg": 0, "pos": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # HF bookkeeping keys (model_type, label2id, ...) are silent
        assert BertConfig.load(tmp_path) == c


def test_unknown_keys_are_ignored_with_one_warning(tmp_path):
    d = {**BertConfig().to_dict(), "rope_theta": 1e4, "flash_magic": True, "transformers_version": "5.0"}
    (tmp_path / "config.json").write_text(json.dumps(d))
    with pytest.warns(UserWarning) as record:
        c = BertConfig.load(tmp_path)
    assert len(record) == 1 and "['flash_magic', 'rope_theta']" in str(record[0].message)
    assert c == BertConfig()


def test_not_a_bert_config_is_refused(tmp_path):
    """By its model_type, or without one by its architectures (a RoBERTa config whose model_type
    was removed), or by an architectures naming another known family beside model_type "bert" (a
    RoBERTa relabelled: its positions start at 2, silently wrong as a BERT); BERT's own classes,
    minibert's BertForClassification, a user's own class beside model_type "bert", and an
    architectures that is neither a list nor a name, load."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ValueError, match="gpt2"):
        BertConfig.load(tmp_path)
    for names in (["RobertaForMaskedLM"], "RobertaForMaskedLM"):  # a list, or one name given as a string
        with pytest.raises(ValueError, match="describes a 'RobertaForMaskedLM' model, not a BERT"):
            BertConfig.from_dict({"architectures": names})
    for names in (["BertForMaskedLM"], ["BertForClassification"], [], None, 1, ["BertModel", None]):
        BertConfig.from_dict({"architectures": names})
    BertConfig.from_dict({"model_type": "bert", "architectures": ["MyEncoder"]})
    for names in (["RobertaForMaskedLM"], ["BertModel", "ElectraForPreTraining"], "AlbertModel"):  # beside "bert"
        with pytest.raises(ValueError, match=r"describes a '(Roberta|Electra|Albert)\w+' model, not a BERT"):
            BertConfig.from_dict({"model_type": "bert", "architectures": names})
    with pytest.raises(FileNotFoundError, match="config.json"):
        BertConfig.load(tmp_path / "nowhere")


@pytest.mark.parametrize("key,value,meaning", [
    ("is_decoder", True, "causal"), ("add_cross_attention", True, "cross-attention"),
    ("tie_word_embeddings", False, "untied"), ("problem_type", "multi_label_classification", "single-label"),
    ("problem_type", "regression", "single-label"), ("is_decoder", [1], "causal"),
    ("pruned_heads", {"0": [1]}, "attention heads removed"), ("pruned_heads", [[0, 1]], "attention heads removed"),
])
def test_a_key_that_changes_the_math_is_refused(key, value, meaning):
    """transformers applies causal attention for is_decoder, adds cross-attention layers, unties
    the decoder, uses sigmoids (multi-label) or a squared error (regression) for problem_type, and
    cuts the pruned_heads out of their layers (a pruned_heads was read as an unknown key, with a
    warning, and every head computed): minibert implements none of these, so it refuses rather
    than compute something else. The values it does compute (False, True, single-label, no
    pruned head) load."""
    with pytest.raises(ValueError, match=rf"the config sets {key} = .* \(.*{meaning}.*\), which minibert does not"):
        BertConfig.from_dict({key: value})
    for ok in ({"is_decoder": False, "add_cross_attention": False, "tie_word_embeddings": True,
                "problem_type": "single_label_classification", "pruned_heads": {}}, {"problem_type": None}):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            BertConfig.from_dict(ok)


BOOKKEEPING = {"use_cache": False, "bos_token_id": 7, "eos_token_id": 8, "gradient_checkpointing": True,
               "output_past": False, "directionality": "bidi", "pooler_fc_size": 999, "pooler_num_attention_heads": 3,
               "pooler_num_fc_layers": 5, "pooler_size_per_head": 17, "pooler_type": "first_token_transform",
               "finetuning_task": "sst2", "_name_or_path": "somewhere", "tokenizer_class": "BertTokenizer"}


@pytest.mark.parametrize("key", sorted(BOOKKEEPING))
def test_each_bookkeeping_key_changes_nothing_in_transformers_either(key, tmp_path):
    """Each key minibert reads silently, written with an unusual value into a checkpoint's
    config.json: transformers loads it and gives logits bit-identical to the same weights without
    it (the same code on the same weights: bit for bit), and minibert loads it without a warning
    and agrees with transformers within conftest's worst-case bound TINY_REORDER (this model, 1 layer
    of C = 16 and I = 20, has fewer and shorter sums than the bound counts):
    reading it as bookkeeping loses nothing."""
    import torch
    import transformers
    from minibert import BertForMaskedLM
    from conftest import TINY_REORDER, assert_close, perturb_
    torch.manual_seed(0)
    hf = perturb_(transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=20,
        max_position_embeddings=16))).eval()
    ids = torch.tensor([[2, 5, 9, 11, 3]])
    with torch.no_grad():
        plain = hf(input_ids=ids).logits
    hf.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, key: BOOKKEEPING[key]}))
    keyed = transformers.BertForMaskedLM.from_pretrained(tmp_path).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = BertForMaskedLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(keyed(input_ids=ids).logits, plain)
        assert_close(ours(ids).logits, plain, atol=TINY_REORDER, what=f"minibert with {key}")


@pytest.mark.parametrize("key", ["dtype", "torch_dtype"])
def test_a_config_dtype_other_than_float32_is_said_and_computed_in_float32(key, tmp_path):
    """config.json's dtype (torch_dtype before transformers 5) records how the weights were
    stored, and transformers 5 also computes in it by default: "bfloat16" over float32 weights
    gives bfloat16 logits there. minibert computes in float32, as transformers does when given
    dtype=torch.float32 (agreeing within conftest's TINY_REORDER, as for any key it reads), and
    says so in one warning (the old code read the key silently). "float32" is said nothing of."""
    import torch
    import transformers
    from minibert import BertForMaskedLM
    from conftest import TINY_REORDER, assert_close, perturb_
    torch.manual_seed(0)
    hf = perturb_(transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=20,
        max_position_embeddings=16))).eval()
    hf.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config.pop("dtype", None), config.pop("torch_dtype", None)
    ids = torch.tensor([[2, 5, 9, 11, 3]])
    for stored, said in (("float32", None), ("bfloat16", r"config.json's dtype is 'bfloat16'; minibert computes in "
                                                         r"float32 \(transformers 5 computes in the config's dtype")):
        (tmp_path / "config.json").write_text(json.dumps({**config, key: stored}))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = BertForMaskedLM.from_pretrained(tmp_path).eval()
        messages = [str(w.message) for w in caught]
        assert (len(messages) == 1 and re.search(said, messages[0])) if said else messages == [], messages
        reference = transformers.BertForMaskedLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
        with torch.no_grad():
            assert_close(ours(ids).logits, reference(input_ids=ids).logits, atol=TINY_REORDER, what=f"{key} {stored}")
    assert transformers.BertForMaskedLM.from_pretrained(tmp_path).dtype == torch.bfloat16  # why it is said


@pytest.mark.parametrize("change,message", [
    ({"id2label": {"0": None, "1": "pos"}}, r"id2label gives id 0 no label \(None\)"),
    ({"id2label": {"0": " ", "1": "pos"}}, r"id2label gives id 0 no label"),
    ({"id2label": {"0": "\u200b", "1": "pos"}}, r"id2label gives id 0 no label \('\\u200b'\)"),
    ({"id2label": {"0": "neg", "1": "\ufe0f\u3164"}}, r"id2label gives id 1 no label \('\\ufe0f\\u3164'\)"),
    ({"id2label": {"0": "pos", "1": "pos"}}, r"id2label names two classes 'pos'"),
    ({"id2label": {"0": "neg", "1": "pos"}, "num_labels": 3}, r"num_labels 3 disagrees with id2label's 2 labels"),
    ({"num_labels": "two"}, r"num_labels must be a count of classes"),
    ({"id2label": {"0": "neg", "1": "pos"}, "label2id": {"neg": 1, "pos": 0}},
     r"label2id gives 'neg' the id 1, and id2label gives it 0"),
    ({"id2label": {"0": "neg", "1": "pos"}, "label2id": {"neg": 0, "pos": "one"}},
     r"label2id gives 'pos' the id 'one', and id2label gives it 1"),
    ({"id2label": {"0": "neg", "1": "pos"}, "label2id": {"a": 0, "b": 1}}, r"label2id \(.*\) is neither the inverse"),
    ({"id2label": {"0": "neg", "1": "pos"}, "label2id": {"neg": 0}}, r"label2id \(.*\) is neither the inverse"),
    ({"id2label": {"0": "neg", "1": "pos"}, "label2id": ["neg", "pos"]}, r"label2id \(.*\) is neither the inverse"),
], ids=["null-label", "blank-label", "zero-width-space-label", "variation-selector-and-filler-label",
        "two-classes-one-name", "num-labels-disagrees",
        "num-labels-not-a-count", "label2id-swapped", "label2id-not-an-id", "label2id-other-names",
        "label2id-a-label-missing", "label2id-not-a-table"])
def test_a_label_table_that_cannot_name_each_class_once_is_refused(change, message):
    """predict prints id2label's names: a null or blank one printed None or nothing (a zero-width
    space, which str.strip() keeps, too, or a variation selector and a Hangul filler: the code
    before this one read them), two classes of
    one name could not be told apart, and a num_labels that contradicts id2label was read
    silently (and called unknown), and a label2id that is not id2label's inverse (another id for
    a class, other names, a class missing) was not read at all: each a ValueError naming the key."""
    with pytest.raises(ValueError, match=message):
        BertConfig.from_dict({**BertConfig().to_dict(), **change})


def test_label2id_that_is_the_inverse_or_hfs_default_is_read():
    """label2id equal to id2label's inverse (ids as numbers or as the strings JSON keys are), or
    HF's default LABEL_0, LABEL_1 left beside a renamed id2label, loads; any other table is
    refused (above)."""
    for inverse in ({"neg": 0, "pos": 1}, {"neg": "0", "pos": "1"}, {"LABEL_0": 0, "LABEL_1": 1}):
        config = BertConfig.from_dict({**BertConfig().to_dict(), "id2label": {"0": "neg", "1": "pos"},
                                       "label2id": inverse})
        assert config.id2label == {0: "neg", 1: "pos"}


def test_num_labels_that_agrees_with_id2label_is_known_and_silent():
    """num_labels equal to id2label's length is HF's own key: read without a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = BertConfig.from_dict({**BertConfig().to_dict(), "id2label": {"0": "neg", "1": "pos"}, "num_labels": 2})
    assert config.id2label == {0: "neg", 1: "pos"}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_weights_stored_in_half_precision_without_a_config_dtype_are_said(dtype, tmp_path):
    """Weights stored in bfloat16 or float16 behind a config.json that names no dtype: transformers 5
    computes in the weights' dtype (shown), minibert in float32, agreeing with transformers given
    dtype=torch.float32. One warning says so, as for a config dtype (the code before this one said
    nothing: fill-mask scores differed from transformers' in the third decimal)."""
    import torch
    import transformers
    from safetensors.torch import load_file, save_file
    from minibert import BertForMaskedLM
    from conftest import TINY_REORDER, assert_close, perturb_
    torch.manual_seed(0)
    perturb_(transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=20,
        max_position_embeddings=16))).eval().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config.pop("dtype", None), config.pop("torch_dtype", None)
    (tmp_path / "config.json").write_text(json.dumps(config))
    weights = load_file(tmp_path / "model.safetensors")
    save_file({k: v.to(getattr(torch, dtype)) for k, v in weights.items()}, str(tmp_path / "model.safetensors"),
              metadata={"format": "pt"})
    assert transformers.BertForMaskedLM.from_pretrained(tmp_path).dtype == getattr(torch, dtype)  # why it is said
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = BertForMaskedLM.from_pretrained(tmp_path).eval()
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and re.search(rf"its weights are stored in {dtype} and config.json names no dtype; "
                                            r"minibert computes in float32 \(transformers 5 computes in the weights' "
                                            "dtype", messages[0]), messages
    reference = transformers.BertForMaskedLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    ids = torch.tensor([[2, 5, 9, 11, 3]])
    with torch.no_grad():
        assert_close(ours(ids).logits, reference(input_ids=ids).logits, atol=TINY_REORDER, what=dtype)
