"""Dispatch by direct references: the method table (`recipe.method_table`: one row per method, with its config and
trainer classes and the stage module that runs it) and the stage table (`stages.registry`) hold functions and
classes, never import strings; every method a recipe can name has a row, whose stage module has a stage; and each
method's dry run goes through the stage its row names."""

import inspect
import typing

import pytest
from tiny_models import chat_rows, pair_rows, write_jsonl

from smolalign.recipe import method_table
from smolalign.recipe.method_keys import PO_METHODS, RL_METHODS, parse_method
from smolalign.recipe.method_table import METHODS, method_spec
from smolalign.recipe.schema import Method
from smolalign.stages import registry
from smolalign.stages.registry import STAGES


def test_the_tables_hold_functions_not_import_strings():
    for name, spec in METHODS.items():
        assert inspect.isfunction(spec.config_class), name
        assert inspect.isfunction(spec.trainer), name
        runner = STAGES[spec.stage_module]
        for function in (runner.check, runner.load, runner.check_batch):
            assert function is None or inspect.isfunction(function), name
        assert runner.load.__module__.startswith("smolalign.stages."), name
        assert runner.check.__module__ == runner.load.__module__, name
    for module in (method_table, registry):
        assert "importlib" not in inspect.getsource(module), module.__name__


def test_every_method_a_recipe_can_name_has_a_row_in_each_table():
    accepted = {*typing.get_args(typing.get_type_hints(Method)["trainer"]), "sft"}
    assert set(METHODS) == accepted
    assert {spec.stage_module for spec in METHODS.values()} == set(STAGES)
    for name in PO_METHODS:
        assert method_spec("po", parse_method(name)).stage == "po", name
    assert {METHODS[name].stage for name in RL_METHODS} == {"rl"}


PROMPTS = [{"prompt": f"what is {i} plus {i + 1}", "solution": str(2 * i + 1), "completion": str(2 * i + 1)}
           for i in range(8)]  # a completion: GOLD reads one for every row
RL_TRAIN = {"per_device_train_batch_size": 2, "max_steps": 1}
RECIPES = {
    "sft": ("sft", {}, {"max_length": 128, "per_device_train_batch_size": 2, "max_steps": 1}),
    "dpo": ("po", {"method": "dpo"}, {"max_length": 160, "per_device_train_batch_size": 2, "max_steps": 1}),
    "kto": ("po", {"method": "kto"}, {"max_length": 160, "per_device_train_batch_size": 2, "max_steps": 1}),
    "orpo": ("po", {"method": "orpo"}, {"max_length": 160, "per_device_train_batch_size": 2, "max_steps": 1}),
    "reward": ("po", {"method": "reward"}, {"max_length": 160, "per_device_train_batch_size": 2, "max_steps": 1}),
    "grpo": ("rl", {"method": "grpo", "rewards": [{"name": "math_accuracy"}]},
             {**RL_TRAIN, "num_generations": 2, "max_completion_length": 8}),
    "online_dpo": ("rl", {"method": "online_dpo", "rewards": [{"name": "math_accuracy"}]},
                   {**RL_TRAIN, "max_new_tokens": 8, "max_length": 64}),
    "distill": ("rl", {"method": "distill"}, {**RL_TRAIN, "max_completion_length": 8}),
    "gold": ("rl", {"method": "gold"}, {**RL_TRAIN, "max_completion_length": 8, "lmbda": 1.0}),
    "auto": ("rl", {"method": "auto"}, {**RL_TRAIN, "max_completion_length": 8, "lmbda": 1.0}),
}
PLAN_SAYS = {"sft": "packing", "dpo": "dpo trainer", "kto": "kto trainer",
             "orpo": "NLL on prompt + chosen answer",  # TRL's ORPO trains its NLL term on the prompt too
             "reward": "a sequence classifier", "grpo": "generations per prompt", "online_dpo": "candidates per prompt",
             "distill": "distill -> distill", "gold": "gold -> gold", "auto": "auto -> gold"}
"""What only the plan of the method's own stage prints."""


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_dry_runs_through_the_stage_its_row_names(name, cli, write_recipe, tiny_dir, tmp_path):
    verb, sections, train = RECIPES[name]
    rows = {"sft": chat_rows(8), "po": pair_rows(8), "rl": PROMPTS}[verb]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    if METHODS[name].distills:
        sections = {**sections, "teacher": {"source": str(tiny_dir)}}
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, **sections,
                           "data": {"sources": [{"path": str(data)}]}, "train": train})
    code, out, err = cli(verb, recipe, "--dry-run")
    assert code == 0, err
    assert PLAN_SAYS[name] in out, out


@pytest.mark.parametrize("name", sorted(STAGES))
def test_each_stage_summary_names_a_logged_value_and_a_tuple_of_companions(name):
    """`runs.metrics.summary(run_dir, key, companions)`: companions passed as a bare string would be read letter by
    letter, and the summary would report none of them."""
    summary = STAGES[name].summary
    assert len(summary) <= 2, summary
    assert all(isinstance(key, str) for key in summary[:1]), summary
    assert all(isinstance(companions, tuple) and all(isinstance(c, str) for c in companions)
               for companions in summary[1:]), summary
