"""BertConfig validation and round trips; checkpoint loading rules and bad-input messages."""

import json
import os
import shutil

import pytest
import torch

import bertkit
from bertkit import BertConfig, CheckpointError, ConfigError

TINY = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=24, max_position_embeddings=32)


@pytest.mark.parametrize("name,shape", [("tiny", (2, 128, 2)), ("mini", (4, 256, 4)),
                                        ("small", (4, 512, 8)), ("medium", (8, 512, 8)),
                                        ("base", (12, 768, 12)), ("large", (24, 1024, 16))])
def test_presets(name, shape):
    c = BertConfig.preset(name)
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads) == shape
    assert c.intermediate_size == 4 * c.hidden_size


@pytest.mark.parametrize("changes,message", [
    (dict(hidden_size=100, num_attention_heads=12), "divisible by num_attention_heads"),
    (dict(hidden_size=0), "hidden_size must be a positive integer"),
    (dict(hidden_act="gleu"), "hidden_act 'gleu' is not known"),
    (dict(position_embedding_type="rotary"), "position_embedding_type"),
    (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob must be in"),
])
def test_validation_says_what_to_change(changes, message):
    with pytest.raises(ConfigError, match=message):
        BertConfig(**changes)


def test_unknown_preset():
    with pytest.raises(ConfigError, match="choose one of"):
        BertConfig.preset("huge")


def test_config_round_trip_keeps_unknown_fields(tmp_path):
    data = dict(TINY, model_type="bert", some_future_field={"a": 1}, transformers_version="9.9",
                _name_or_path="org/source-model",
                id2label={"0": "neg", "1": "pos"})
    (tmp_path / "config.json").write_text(json.dumps(data))
    c = BertConfig.from_pretrained(tmp_path)
    assert c.id2label == {0: "neg", 1: "pos"} and c.label2id == {"neg": 0, "pos": 1}
    assert c.num_labels == 2
    c.save_pretrained(tmp_path / "out")
    again = json.loads((tmp_path / "out" / "config.json").read_text())
    assert again["some_future_field"] == {"a": 1} and again["id2label"] == {"0": "neg", "1": "pos"}
    # bertkit wrote this file: its version, not the source's transformers version (nor its name)
    assert "transformers_version" not in again and "_name_or_path" not in again and again["bertkit_version"]
    reread = BertConfig.from_pretrained(tmp_path / "out")
    assert reread.extra == {"some_future_field": {"a": 1}}  # bertkit_version is not kept as a field
    assert reread.to_dict() == {k: v for k, v in c.to_dict().items()
                                  if k not in ("transformers_version", "_name_or_path")}
    reread.save_pretrained(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "config.json").read_text()) == again


def test_config_reads_in_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    BertConfig(**TINY, id2label={0: "a", 1: "b", 2: "c"}).save_pretrained(tmp_path)
    theirs = transformers.BertConfig.from_pretrained(tmp_path)
    assert theirs.hidden_size == 16 and theirs.num_labels == 3 and theirs.id2label[2] == "c"


def test_missing_and_corrupt_config(tmp_path):
    with pytest.raises(ConfigError, match="needs config.json"):
        BertConfig.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        BertConfig.from_pretrained(tmp_path)


@pytest.fixture
def saved_mlm(tmp_path):
    model = bertkit.BertForMaskedLM(BertConfig(**TINY))
    model.save_pretrained(tmp_path / "mlm")
    return model, tmp_path / "mlm"


def test_save_writes_hf_layout(saved_mlm):
    _, path = saved_mlm
    assert sorted(os.listdir(path)) == ["config.json", "model.safetensors"]
    assert json.loads((path / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]


def test_bare_encoder_and_headed_checkpoints_interchange(saved_mlm, tmp_path):
    mlm, path = saved_mlm
    with pytest.warns(UserWarning, match="newly initialised"):
        encoder = bertkit.BertModel.from_pretrained(path)  # MLM has no pooler: reported
    assert torch.equal(encoder.embeddings.word_embeddings.weight, mlm.bert.embeddings.word_embeddings.weight)
    encoder.save_pretrained(tmp_path / "enc")
    with pytest.warns(UserWarning, match="newly initialised"):  # the classifier is new
        clf = bertkit.BertForSequenceClassification.from_pretrained(tmp_path / "enc", num_labels=4)
    assert clf.classifier.out_features == 4
    assert torch.equal(clf.bert.encoder.layer[1].output.dense.weight,
                       mlm.bert.encoder.layer[1].output.dense.weight)


def test_mlm_decoder_stays_tied_after_loading(saved_mlm):
    _, path = saved_mlm
    model = bertkit.BertForMaskedLM.from_pretrained(path)
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight[7] += 1.0
    ids = torch.tensor([[2, 7, 3]])
    before = model(ids).logits
    assert model.cls.predictions.word_embeddings is model.bert.embeddings.word_embeddings
    assert before.shape == (1, 3, 50)


def test_pytorch_bin_loads_with_weights_only(saved_mlm, tmp_path):
    mlm, path = saved_mlm
    out = tmp_path / "bin"
    out.mkdir()
    shutil.copy(path / "config.json", out / "config.json")
    state = {k: v for k, v in mlm.state_dict().items()}
    state = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
             for k, v in state.items()}
    torch.save(state, out / "pytorch_model.bin")
    loaded = bertkit.BertForMaskedLM.from_pretrained(out)
    ids = torch.tensor([[2, 9, 11, 3]])
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, mlm.eval()(ids).logits, atol=1e-6)


def test_pickled_code_is_refused(saved_mlm, tmp_path):
    _, path = saved_mlm
    out = tmp_path / "evil"
    out.mkdir()
    shutil.copy(path / "config.json", out / "config.json")
    torch.save({"x": os.system}, out / "pytorch_model.bin")  # a callable needs unpickling code
    with pytest.raises(CheckpointError, match="never unpickles code"):
        bertkit.BertForMaskedLM.from_pretrained(out)


def test_missing_and_corrupt_weights(saved_mlm, tmp_path):
    _, path = saved_mlm
    out = tmp_path / "noweights"
    out.mkdir()
    shutil.copy(path / "config.json", out / "config.json")
    with pytest.raises(CheckpointError, match="no weights in"):
        bertkit.BertModel.from_pretrained(out)
    (out / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(CheckpointError, match="not a valid safetensors file"):
        bertkit.BertModel.from_pretrained(out)
    with pytest.raises(CheckpointError, match="does not exist"):
        bertkit.BertModel.from_pretrained(tmp_path / "nowhere")


def test_shape_mismatch_is_refused(saved_mlm):
    _, path = saved_mlm
    config = json.loads((path / "config.json").read_text())
    config["intermediate_size"] = 40
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="weight shapes differ"):
        bertkit.BertForMaskedLM.from_pretrained(path)


def test_model_input_errors():
    model = bertkit.BertModel(BertConfig(**TINY)).eval()
    with pytest.raises(bertkit.BertkitError, match="token id 50 is outside the model's vocabulary"):
        model(torch.tensor([[1, 50]]))
    with pytest.raises(bertkit.BertkitError, match="token id -3 is outside"):  # the bad id named, not the largest
        model(torch.tensor([[-3, 7]]))
    with pytest.raises(bertkit.BertkitError, match="exceeds max_position_embeddings"):
        model(torch.ones(1, 33, dtype=torch.long))
    with pytest.raises(bertkit.BertkitError, match="shape"):
        model(torch.ones(3, dtype=torch.long))
    # not a tensor: was "'list' object has no attribute 'dim'" from inside the model
    with pytest.raises(bertkit.BertkitError, match="input_ids must be a torch tensor .* got list; .*return_tensors='pt'"):
        model(input_ids=[[1, 7, 2]])
    with pytest.raises(bertkit.BertkitError, match="attention_mask must be a torch tensor .* got list"):
        model(torch.tensor([[1, 7]]), attention_mask=[[1, 1]])
    with pytest.raises(bertkit.BertkitError, match="integer token ids, got a torch.float32 tensor"):
        model(torch.tensor([[1.0, 7.0]]))
    modern = bertkit.ModernBertConfig.preset("tiny")
    for head in (bertkit.BertForSequenceClassification(BertConfig(**TINY)), bertkit.BertForMultipleChoice(BertConfig(**TINY)),
                 bertkit.ModernBertForSequenceClassification(modern), bertkit.ModernBertForMultipleChoice(modern)):
        with pytest.raises(bertkit.BertkitError, match="input_ids must be a torch tensor"):
            head.eval()(input_ids=[[1, 7, 2]])


def test_gradient_checkpointing_gives_same_gradients():
    torch.manual_seed(0)
    model = bertkit.BertForMaskedLM(BertConfig(**TINY, hidden_dropout_prob=0.0,
                                               attention_probs_dropout_prob=0.0)).train()
    ids = torch.randint(5, 50, (2, 9))
    labels = ids.clone()

    def grads():
        model.zero_grad()
        model(ids, labels=labels).loss.backward()
        return [p.grad.clone() for p in model.parameters()]

    plain = grads()
    model.set_gradient_checkpointing(True)
    checkpointed = grads()
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(plain, checkpointed))


def test_init_follows_bert():
    model = bertkit.BertModel(BertConfig.preset("tiny"))
    w = model.encoder.layer[0].attention.self.query.weight
    assert abs(w.std().item() - 0.02) < 0.002
    assert model.encoder.layer[0].attention.self.query.bias.abs().max() == 0
    assert model.embeddings.word_embeddings.weight[0].abs().max() == 0  # the [PAD] row


def test_saved_files_are_readable_like_any_other(saved_mlm):
    _, path = saved_mlm
    umask = os.umask(0)
    os.umask(umask)
    for name in ("config.json", "model.safetensors"):
        assert os.stat(path / name).st_mode & 0o777 == 0o666 & ~umask


def test_new_label_names_replace_a_stale_label2id():
    """A 2-label config given 5 named labels (a new head on a checkpoint) derives label2id from
    them instead of keeping the checkpoint's LABEL_0/LABEL_1 map; a consistent one is kept."""
    from bertkit.models.config import BertConfig
    from bertkit.models.modern.config import ModernBertConfig

    topics = dict(enumerate(["business", "entertainment", "politics", "sport", "tech"]))
    stored = {"id2label": {0: "LABEL_0", 1: "LABEL_1"}, "label2id": {"LABEL_0": 0, "LABEL_1": 1}}
    for config in (BertConfig(**stored), ModernBertConfig(**stored)):
        renamed = config.replace(id2label=topics)
        assert renamed.label2id == {name: i for i, name in topics.items()} and renamed.num_labels == 5
    own = {"pos": 1, "neg": 0}
    assert BertConfig(id2label={0: "neg", 1: "pos"}, label2id=own).label2id == own


def test_a_misspelt_keyword_is_refused_with_the_field_meant(saved_mlm, tmp_path):
    """A keyword that is no config field would only land in config.extra and change nothing:
    from_pretrained and replace refuse it, naming the field meant, in both families; unknown keys
    of a config.json are still kept, and registered switch fields still pass."""
    from bertkit.models.modern.config import ModernBertConfig

    _, path = saved_mlm
    with pytest.raises(ConfigError, match="'hidden_dropout' is not a BertConfig field.*did you mean hidden_dropout_prob"):
        bertkit.BertModel.from_pretrained(path, hidden_dropout=0.2)
    with pytest.raises(ConfigError, match="output_attentions.*pass it to the model's call"):
        bertkit.BertModel.from_pretrained(path, output_attentions=True)
    assert bertkit.BertModel.from_pretrained(path, hidden_dropout_prob=0.2).config.hidden_dropout_prob == 0.2
    for config in (BertConfig(**TINY), ModernBertConfig.preset("tiny")):
        with pytest.raises(ConfigError, match="did you mean num_labels"):
            config.replace(num_label=3)
    assert BertConfig(**TINY).replace(moe_top_k=2).moe_top_k == 2
    data = dict(TINY, some_future_field=1)
    (tmp_path / "config.json").write_text(json.dumps(data))
    assert BertConfig.from_pretrained(tmp_path).extra == {"some_future_field": 1}


def test_num_labels_and_id2label_that_disagree_are_refused(tmp_path):
    """num_labels=3 with two names gave a 2-way head silently: now refused in both families; a
    new count alone renames the labels LABEL_i (as transformers' setter), new names alone set the
    count, and a config.json's names still win over a stale count in the same file."""
    from bertkit.models.modern.config import ModernBertConfig

    for make in (BertConfig, ModernBertConfig):
        with pytest.raises(ConfigError, match=r"num_labels=3 but id2label names 2 labels \(neg, pos\)"):
            make(num_labels=3, id2label={0: "neg", 1: "pos"})
    named = BertConfig(**TINY, id2label={0: "neg", 1: "pos"})
    with pytest.raises(ConfigError, match="they disagree"):
        named.replace(num_labels=3, id2label={0: "a", 1: "b"})
    assert named.replace(num_labels=3).id2label == {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}
    assert named.replace(num_labels=2).id2label == {0: "neg", 1: "pos"}
    assert named.replace(id2label={0: "a", 1: "b", 2: "c"}).num_labels == 3
    (tmp_path / "config.json").write_text(json.dumps(dict(TINY, num_labels=5, id2label={"0": "neg", "1": "pos"})))
    assert BertConfig.from_pretrained(tmp_path).num_labels == 2


def test_a_head_of_another_size_needs_ignore_mismatched_sizes(tmp_path):
    """A 4-label classifier loaded with num_labels=3 kept the old 4-way head and its names
    silently; now it is refused naming both sizes and the fix, and ignore_mismatched_sizes=True
    starts a fresh 3-way head (reported), as transformers does. Same sizes keep the head."""
    torch.manual_seed(0)
    names = {0: "business", 1: "sport", 2: "tech", 3: "politics"}
    bertkit.BertForSequenceClassification(BertConfig(**TINY, id2label=names)).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match=r"classifier.weight: checkpoint \(4, 16\) vs model \(3, 16\).*"
                                              r"head has 4 labels and you asked for 3: pass ignore_mismatched_sizes=True"):
        bertkit.BertForSequenceClassification.from_pretrained(tmp_path, num_labels=3)
    with pytest.warns(UserWarning, match="2 weights .* have other shapes .* newly initialised"):
        fresh = bertkit.BertForSequenceClassification.from_pretrained(tmp_path, num_labels=3,
                                                                      ignore_mismatched_sizes=True)
    assert fresh.classifier.out_features == 3 and fresh.config.id2label[2] == "LABEL_2"
    kept = bertkit.BertForSequenceClassification.from_pretrained(tmp_path, num_labels=4)
    assert kept.config.id2label == names


def test_saving_onto_an_existing_file_names_it(tmp_path):
    """save_pretrained("data.csv") on an existing file was a bare FileExistsError; model and
    config saves (test_encode.py: encoder and tokenizer) say it is a file and to pass a directory."""
    from bertkit.errors import WriteError

    target = tmp_path / "train.csv"
    target.write_text("text,label\n")
    model = bertkit.BertModel(BertConfig(**TINY))
    for save in (model.save_pretrained, model.config.save_pretrained):
        with pytest.raises(WriteError, match=f"cannot save into {target}: it is a file, not a directory"):
            save(target)
    assert target.read_text() == "text,label\n"
