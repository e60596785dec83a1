"""Property-based fuzzing of the readers that take user files and arguments: whatever the recipe text, the recipe
mapping, the `--set` items or the bytes of a checkpoint header, the reader either returns or raises the user error
the CLI turns into exit 2 with one line; never another exception (a traceback). Examples are capped so the whole
file runs in a few seconds."""

import json
import pickle
import string

import pytest
from checkpoint_bytes import raw_safetensors, safetensors, torch_archive
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from smolalign.errors import USER_ERRORS

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                      HealthCheck.too_slow])


def refused_or_returned(call, *args, **kwargs):
    """Run a reader: its value, or None when it refused with a one-line user error."""
    try:
        return call(*args, **kwargs)
    except USER_ERRORS as exc:
        message = str(exc)
        assert message.strip() and "\n" not in message.strip(), f"not one line: {message!r}"
        return None


_SCALARS = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True) | st.text(max_size=12)
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(string.ascii_lowercase + "_", max_size=10), inner, max_size=3),
                       max_leaves=8)
_SECTIONS = ("model", "template", "data", "train", "method", "peft", "pairs", "eval", "hub", "launch", "stage",
             "extends", "rewards", "generation", "teacher", "reference", "nonsense")
_KEYS = {"model": ("source", "dtype", "revision", "trust_remote_code"), "train": ("learning_rate", "max_steps",
         "per_device_train_batch_size", "max_length", "save_steps", "num_train_epochs"),
         "data": ("sources", "eval_split", "mixture"), "template": ("name", "path")}


@st.composite
def recipe_mappings(draw):
    """Mostly recipe-shaped mappings: known sections with known or random keys and random values."""
    recipe = {}
    for section in draw(st.lists(st.sampled_from(_SECTIONS), max_size=6, unique=True)):
        if section in _KEYS and draw(st.booleans()):
            keys = st.sampled_from(_KEYS[section]) | st.text(string.ascii_lowercase, min_size=1, max_size=8)
            recipe[section] = draw(st.dictionaries(keys, _VALUES, max_size=4))
        else:
            recipe[section] = draw(_VALUES)
    return recipe


def _load(tmp_path, text: str | bytes, stage: str = "sft", overrides: tuple[str, ...] = ()):
    from recipe_runs import loaded_run

    path = tmp_path / "fuzz.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return refused_or_returned(loaded_run, str(path), list(overrides), stage)


@FUZZ
@given(text=st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=200))
def test_any_recipe_text_is_read_or_refused(tmp_path, text):
    _load(tmp_path, text)


@FUZZ
@given(lines=st.lists(st.sampled_from(["model:", "  source: x", "train:", "  learning_rate: .nan", "data: [", "- a",
                                       "  max_steps: -1", "stage: po", "&a [*a]", "!!python/object:os.system", "{",
                                       "  : :", "template: {name: 7}", "extends: fuzz.yaml", "\t"]), max_size=8))
def test_yaml_shaped_recipe_text_is_read_or_refused(tmp_path, lines):
    _load(tmp_path, "\n".join(lines))


@FUZZ
@given(mapping=recipe_mappings(), stage=st.sampled_from(["sft", "po", "rl"]))
@example(mapping={"extends": "\n"}, stage="sft")  # a recipe name with a newline was echoed raw
def test_any_recipe_mapping_is_read_or_refused(tmp_path, mapping, stage):
    _load(tmp_path, json.dumps(mapping, allow_nan=True), stage)


_SEGMENT = st.sampled_from(["train", "model", "data", "sources", "0", "1", "-1", "", " ", "learning_rate", "x"])


@FUZZ
@given(items=st.lists(st.text(max_size=30) | st.builds(lambda parts, value: ".".join(parts) + "=" + value,
                                                     st.lists(_SEGMENT, min_size=1, max_size=4), st.text(max_size=10)),
                      max_size=4))
@example(items=["0=\x1f\n"])   # a value that is not YAML, holding a newline: the message stays one line
def test_any_set_items_are_applied_or_refused(items):
    from smolalign.recipe.load import apply_overrides

    base = {"model": {"source": "x"}, "data": {"sources": [{"path": "a.jsonl"}]}, "train": {"max_steps": 1}}
    result = refused_or_returned(apply_overrides, base, items)
    assert result is None or isinstance(result, dict)


# --- checkpoint headers ---------------------------------------------------------------------------------------------


@FUZZ
@given(data=st.binary(max_size=300))
def test_random_bytes_as_a_safetensors_file(tmp_path, data):
    from smolalign.checkpoints.files import read_safetensors_header

    path = tmp_path / "model.safetensors"
    path.write_bytes(data)
    header = refused_or_returned(read_safetensors_header, path)
    assert header is None or isinstance(header, dict)


_ENTRY = st.fixed_dictionaries({}, optional={
    "dtype": st.sampled_from(["F32", "BF16", "I64", "F42", 3, None]),
    "shape": st.lists(st.integers(-2, 9), max_size=3) | _SCALARS,
    "data_offsets": st.lists(st.integers(-5, 400), max_size=3) | _SCALARS})


@FUZZ
@given(header=st.dictionaries(st.text(max_size=8) | st.just("__metadata__"), _ENTRY | _VALUES, max_size=4),
       data=st.integers(0, 400))
def test_random_safetensors_headers(tmp_path, header, data):
    """Headers of the right framing with random entries: accepted only when every tensor lies inside the file."""
    from smolalign.checkpoints.files import read_safetensors_header

    path = tmp_path / "model.safetensors"
    path.write_bytes(raw_safetensors(header, bytes(data)))
    read = refused_or_returned(read_safetensors_header, path)
    if read is not None:
        assert all(entry["data_offsets"][1] <= data for name, entry in read.items() if name != "__metadata__")


@FUZZ
@given(cut=st.integers(0, 10_000))
def test_any_truncation_of_a_safetensors_file_is_refused(tmp_path, cut):
    from smolalign.checkpoints.files import read_safetensors_header

    whole = safetensors({"a": ("F32", [16, 8]), "b": ("BF16", [40])})
    path = tmp_path / "model.safetensors"
    path.write_bytes(whole[: cut % len(whole)])
    assert refused_or_returned(read_safetensors_header, path) is None


@FUZZ
@given(data=st.binary(max_size=200) | st.builds(pickle.dumps, _VALUES))
def test_random_bytes_as_dcp_metadata(tmp_path, data):
    from smolalign.checkpoints.files import read_dcp_metadata

    (tmp_path / ".metadata").write_bytes(data)
    assert refused_or_returned(read_dcp_metadata, tmp_path) is None


@FUZZ
@given(data=st.binary(max_size=200), cut=st.integers(1, 10_000))
def test_random_bytes_and_truncations_as_a_torch_archive(tmp_path, data, cut):
    from smolalign.checkpoints.files import check_torch_archive

    path = tmp_path / "optimizer.pt"
    for content in (data, torch_archive()[:-(cut % 900 + 1)]):
        path.write_bytes(content)
        refused_or_returned(check_torch_archive, path)


_JSON_TEXT = st.text(max_size=80) | st.builds(json.dumps, _VALUES) | st.builds(
    lambda d: json.dumps(d), st.dictionaries(st.sampled_from(["hidden_size", "intermediate_size", "num_hidden_layers",
                                                             "num_attention_heads", "num_key_value_heads",
                                                             "is_llama_config", "tp", "version"]), _SCALARS))


@FUZZ
@given(metadata=_JSON_TEXT | st.binary(max_size=60), config=_JSON_TEXT | st.binary(max_size=60))
def test_random_nanotron_metadata_and_config(tmp_path, metadata, config):
    from smolalign.checkpoints.detect import nanotron_layout
    from smolalign.checkpoints.nanotron_hf import architecture, read_model_config

    (tmp_path / "model").mkdir(exist_ok=True)
    for name, content in (("checkpoint_metadata.json", metadata), ("model_config.json", config)):
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "replace"))
    refused_or_returned(nanotron_layout, tmp_path)
    read = refused_or_returned(read_model_config, tmp_path)
    if read is not None:
        refused_or_returned(architecture, read[0], tmp_path)


@pytest.mark.parametrize("name", ["latest", "latest.txt"])
@FUZZ
@given(data=st.binary(max_size=40))
def test_random_latest_pointers(tmp_path, name, data):
    from smolalign.checkpoints.detect import detect

    folder = tmp_path / "ck"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    refused_or_returned(detect, folder)
