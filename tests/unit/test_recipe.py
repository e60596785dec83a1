"""Recipes: YAML typing, extends + deep merge, --set overrides, unknown keys with suggestions, type checks."""

import pytest

from smolalign.errors import SmolalignError
from smolalign.recipe.load import apply_overrides, deep_merge, read_recipe
from smolalign.recipe.validate import validate_recipe
from smolalign.recipe.yamlio import load_yaml, parse_value


def minimal(tmp_path) -> dict:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "hello"}\n')
    return {"model": {"source": "some-org/some-model"}, "data": {"sources": [{"path": str(data)}]}}


def test_yaml_reads_exponent_floats_as_numbers():
    assert load_yaml("lr: 2e-5\nb: 1e6\nc: 1.0e-4\nd: '2e-5'") == {"lr": 2e-5, "b": 1e6, "c": 1e-4, "d": "2e-5"}


@pytest.mark.parametrize(("text", "value"), [("3", 3), ("2e-5", 2e-5), ("true", True), ("[a, b]", ["a", "b"]),
                                             ("null", None), ("bfd", "bfd"), ("", "")])
def test_override_values_are_yaml_typed(text, value):
    assert parse_value(text) == value


def test_deep_merge_merges_mappings_and_replaces_lists():
    base = {"train": {"lr": 1, "epochs": 3}, "data": {"sources": [1, 2]}}
    merged = deep_merge(base, {"train": {"lr": 2}, "data": {"sources": [3]}})
    assert merged == {"train": {"lr": 2, "epochs": 3}, "data": {"sources": [3]}}
    assert base["train"]["lr"] == 1


def test_extends_chain_with_relative_paths(tmp_path):
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "data.jsonl").write_text('{"text": "x"}\n')
    (tmp_path / "base" / "base.yaml").write_text(
        "model: {source: org/base}\ndata: {sources: [{path: data.jsonl}]}\ntrain: {learning_rate: 1e-5, max_steps: 5}\n")
    (tmp_path / "child.yaml").write_text("extends: base/base.yaml\ntrain: {max_steps: 7}\n")
    merged = read_recipe(tmp_path / "child.yaml")
    assert merged["train"] == {"learning_rate": 1e-5, "max_steps": 7}
    assert merged["data"]["sources"][0]["path"] == str((tmp_path / "base" / "data.jsonl").resolve())
    assert "extends" not in merged


def test_extends_a_shipped_recipe_by_name(tmp_path):
    (tmp_path / "mine.yaml").write_text("extends: quickstart/sft\ntrain: {max_steps: 2}\n")
    merged = read_recipe(tmp_path / "mine.yaml")
    assert merged["train"]["max_steps"] == 2
    assert merged["model"]["source"] == "smollm2-135m-instruct"


def test_extends_cycle_is_reported(tmp_path):
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(SmolalignError, match="extends itself"):
        read_recipe(tmp_path / "a.yaml")


def test_overrides_set_nested_keys_and_list_items():
    raw = {"train": {"learning_rate": 1e-5}, "data": {"sources": [{"path": "a", "weight": 1.0}]}}
    out = apply_overrides(raw, ["train.learning_rate=3e-4", "data.sources.0.weight=2", "train.packing=bfd"])
    assert out["train"] == {"learning_rate": 3e-4, "packing": "bfd"}
    assert out["data"]["sources"][0]["weight"] == 2
    with pytest.raises(SmolalignError, match="KEY=VALUE"):
        apply_overrides(raw, ["train.learning_rate"])
    with pytest.raises(SmolalignError, match="index"):
        apply_overrides(raw, ["data.sources.3.weight=1"])


def test_unknown_train_key_suggests_the_nearest_field(tmp_path):
    raw = {**minimal(tmp_path), "train": {"learnin_rate": 1e-5}}
    with pytest.raises(SmolalignError, match=r"unknown key train\.learnin_rate \(did you mean learning_rate\?\)"):
        validate_recipe(raw, "sft", "test")


@pytest.mark.parametrize(("patch", "message"), [
    ({"modle": {}}, r"unknown key modle \(did you mean model\?\)"),
    ({"model": {"source": "x/y", "dtyp": "auto"}}, r"unknown key model\.dtyp \(did you mean dtype\?\)"),
    ({"template": {"nmae": "chatml"}}, r"unknown key template\.nmae \(did you mean name\?\)"),
    ({"peft": {"rr": 8}}, r"unknown key peft\.rr \(did you mean r\?\)"),
])
def test_unknown_keys_anywhere_are_errors(tmp_path, patch, message):
    with pytest.raises(SmolalignError, match=message):
        validate_recipe({**minimal(tmp_path), **patch}, "sft", "test")


def test_unknown_source_key_names_its_index(tmp_path):
    raw = minimal(tmp_path)
    raw["data"]["sources"][0]["weigth"] = 2
    with pytest.raises(SmolalignError, match=r"data\.sources\.0\.weigth \(did you mean weight\?\)"):
        validate_recipe(raw, "sft", "test")


@pytest.mark.parametrize(("section", "key", "value", "message"), [
    ("train", "learning_rate", "fast", r"train\.learning_rate must be a number, got 'fast'"),
    ("train", "per_device_train_batch_size", 2.5, r"train\.per_device_train_batch_size must be an integer"),
    ("train", "packing", 3, r"train\.packing must be true or false"),
    ("model", "dtype", "float64", r"model\.dtype must be one of"),
])
def test_wrong_types_name_the_key(tmp_path, section, key, value, message):
    raw = minimal(tmp_path)
    raw.setdefault(section, {})[key] = value
    with pytest.raises(SmolalignError, match=message):
        validate_recipe(raw, "sft", "test")


def test_packing_shorthand_and_legacy_ffd(tmp_path, capsys):
    recipe = validate_recipe({**minimal(tmp_path), "train": {"packing": "bfd_split"}}, "sft", "t")
    assert recipe.train["packing"] is True and recipe.train["packing_strategy"] == "bfd_split"
    recipe = validate_recipe({**minimal(tmp_path), "train": {"packing": True, "packing_strategy": "ffd"}}, "sft", "t")
    assert recipe.train["packing_strategy"] == "bfd"
    assert "legacy" in capsys.readouterr().err
    with pytest.raises(SmolalignError, match="train.packing must be false or one of"):
        validate_recipe({**minimal(tmp_path), "train": {"packing": "greedy"}}, "sft", "t")


def test_stage_mismatch_and_required_sections(tmp_path):
    with pytest.raises(SmolalignError, match="not `smolalign sft`"):
        validate_recipe({**minimal(tmp_path), "stage": "po"}, "sft", "t")
    with pytest.raises(SmolalignError, match="model is required"):
        validate_recipe({"data": minimal(tmp_path)["data"]}, "sft", "t")
    with pytest.raises(SmolalignError, match=r"data\.sources is required"):
        validate_recipe({"model": {"source": "a/b"}, "data": {}}, "sft", "t")


def test_quantization_requires_adapters(tmp_path):
    raw = minimal(tmp_path)
    raw["model"]["quantization"] = "4bit"
    with pytest.raises(SmolalignError, match="needs a peft"):
        validate_recipe(raw, "sft", "t")


def test_shipped_recipes_validate(monkeypatch):
    """On the machine they are written for: the GPU image (vLLM, DeepSpeed, Liger installed) on an 8-GPU node."""
    from smolalign.preflight import Target, on_target
    from smolalign.recipe.load import shipped_recipes

    shipped = shipped_recipes()
    assert "quickstart/sft" in shipped
    monkeypatch.setattr("smolalign.preflight.installed", lambda module: module != "flash_attn")
    with on_target(Target(8, "an 8-GPU node", bf16=True, processes=7)):
        for name, path in shipped.items():
            raw = read_recipe(path)
            validate_recipe(raw, raw.get("stage", "sft"), name)
