"""The model-family seam (bertkit/models/families.py): every registered family builds, saves and
reloads a tiny model of each of its classes, names its heads and answers for its model types;
callers outside a family's folder do not name it."""

import pathlib
import re

import pytest
import torch

from bertkit.errors import ConfigError
from bertkit.models.checkpoint import read_config
from bertkit.models.families import FAMILIES, architectures_for, families, family_for, family_of, register_family
from bertkit.models.heads import (BertForMaskedLM, BertForPreTraining, BertForQuestionAnswering,
                                  BertForSequenceClassification, BertForTokenClassification)

ROOT = pathlib.Path(__file__).resolve().parents[1] / "bertkit"


def tiny_config(family, model_type):
    return family.config_from_recipe({"model_type": model_type, "hidden_size": 32, "intermediate_size": 48},
                                     "tiny", 120, 0, 24)


@pytest.mark.parametrize("family", families(), ids=lambda f: f.name)
def test_every_family_builds_saves_and_reloads_each_of_its_classes(family, tmp_path):
    for model_type in family.model_types:
        assert family_for(model_type) is family
    config = tiny_config(family, family.model_types[0])
    assert isinstance(config, family.config_class) and family_of(config) is family
    ids = torch.randint(1, 120, (2, 9))
    for cls in (family.base_class, *family.heads):
        torch.manual_seed(0)
        model = cls(config).eval()
        model.save_pretrained(tmp_path / cls.__name__)
        assert isinstance(read_config(tmp_path / cls.__name__), family.config_class)
        again = cls.from_pretrained(tmp_path / cls.__name__)
        assert again.state_dict().keys() == model.state_dict().keys()
        inputs = {"input_ids": ids.unsqueeze(1).expand(-1, 2, -1)} if cls.__name__.endswith("MultipleChoice") \
            else {"input_ids": ids}
        with torch.no_grad():
            first, second = model(**inputs), again(**inputs)
        out = next(k for k in ("logits", "prediction_logits", "start_logits", "last_hidden_state") if k in vars(first))
        torch.testing.assert_close(getattr(second, out), getattr(first, out))


@pytest.mark.parametrize("family", families(), ids=lambda f: f.name)
def test_every_family_names_its_heads_and_their_transformers_classes(family):
    assert family.head_for(BertForMaskedLM) is family.heads[0]  # the masked-LM class comes first
    for role in (BertForSequenceClassification, BertForTokenClassification, BertForQuestionAnswering):
        head = family.head_for(role)
        assert head in family.heads and family.role(head) == family.role(role)
        assert head.__name__ in family.architectures(role)
        assert set(family.architectures(role)) <= set(architectures_for(role))
    assert family.recipe_keys and set(family.finetune_keys) <= set(family.recipe_keys)
    assert family.dropout_key in family.finetune_keys
    _, prefixes = family.mlm_head(family.heads[0](tiny_config(family, family.model_types[0])))
    assert prefixes


def test_a_role_the_family_lacks_is_refused_in_one_line():
    modern = next(f for f in families() if not f.has_segments)
    with pytest.raises(ConfigError, match="has no ForPreTraining model"):
        modern.head_for(BertForPreTraining)
    with pytest.raises(ConfigError, match="model_type 'xlnet' is not supported; use one of"):
        family_for("xlnet")
    with pytest.raises(ConfigError, match="already belongs to the BERT family"):
        register_family(family_for("roberta").__class__(**{**vars(family_for("roberta")), "name": "again"}))
    assert FAMILIES["roberta"].name == "BERT"


def test_transformers_names_cover_every_model_type_that_has_the_class():
    names = architectures_for(BertForSequenceClassification)
    assert {"BertForSequenceClassification", "RobertaForSequenceClassification",
            "ElectraForSequenceClassification"} <= set(names)
    assert len(names) == len(set(names))


def test_the_second_family_is_named_in_at_most_three_files_outside_its_folder():
    # the package's face (exports), the registry (its one line), and the scaling sweep's default
    # recipe (data: model_type = "modernbert"); callers ask the family instead
    naming = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
                    if "models/modern" not in p.as_posix() and re.search("modern", p.read_text(encoding="utf-8"), re.I))
    assert len(naming) <= 3, naming
