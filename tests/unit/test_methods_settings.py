"""The method table resolves to real TRL classes and stage modules, and the effective settings are TRL's own
defaults under the recipe's values (compared with an instantiated TRL config, not with numbers copied here)."""

import pytest

from smolalign.recipe.method_table import METHODS, method_spec
from smolalign.recipe.schema import LaunchSection, Method
from smolalign.recipe.settings import TrainSettings, train_settings


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_names_a_config_a_trainer_and_a_stage(name):
    from transformers import Trainer, TrainingArguments

    from smolalign.stages.registry import STAGES

    spec = METHODS[name]
    assert issubclass(spec.config_class(), TrainingArguments)
    assert issubclass(spec.trainer(), Trainer)
    assert callable(STAGES[spec.stage_module].load) and callable(STAGES[spec.stage_module].check)
    assert method_spec(spec.stage, None if spec.stage == "sft" else Method(name, name)) is spec


@pytest.mark.parametrize("name", sorted(METHODS))
def test_the_table_facts_about_each_config_are_trls(name):
    """The facts smolalign acts on that TRL's config class also says, read from the class's own fields."""
    import dataclasses
    import typing

    spec = METHODS[name]
    fields = {f.name: f for f in dataclasses.fields(spec.config_class())}
    assert spec.combines_losses == ("loss_weights" in fields)
    assert spec.cross_tokenizer == ("use_uld_loss" in fields)
    assert spec.off_policy == ("lmbda" in fields)
    assert spec.beta_per_epoch == ("beta" in fields and typing.get_origin(fields["beta"].type) is list)
    if spec.stage == "po":
        assert (not spec.reference_free) == ("precompute_ref_log_probs" in fields)


def test_settings_are_the_trl_config_under_the_recipe(tmp_path):
    from trl import GRPOConfig

    train = {"num_generations": 4, "learning_rate": 3e-6, "output_dir": str(tmp_path), "use_cpu": True}
    settings = TrainSettings(GRPOConfig, train, world_size=1)
    config = GRPOConfig(**train)
    for key in ("per_device_train_batch_size", "gradient_accumulation_steps", "num_train_epochs", "max_steps",
                "beta", "loss_type", "temperature", "max_completion_length", "num_generations", "learning_rate"):
        assert settings[key] == getattr(config, key), key
    assert settings.is_set("learning_rate") and not settings.is_set("beta")


def test_generation_batches_match_grpo_config(tmp_path):
    from trl import GRPOConfig

    for extra in ({}, {"steps_per_generation": 3}, {"generation_batch_size": 12}):
        train = {"num_generations": 2, "per_device_train_batch_size": 2, "gradient_accumulation_steps": 2,
                 "output_dir": str(tmp_path), "use_cpu": True, **extra}
        config = GRPOConfig(**train)
        assert TrainSettings(GRPOConfig, train, 1).generation_batches() == (config.steps_per_generation,
                                                                            config.generation_batch_size)


def test_global_batch_accumulation_comes_from_the_world_size_given():
    from trl import SFTConfig

    settings = train_settings(SFTConfig, {"per_device_train_batch_size": 2}, LaunchSection(global_batch_size=32), 4)
    assert settings.accumulation == 4 and settings.global_batch == 32
    assert settings.train["gradient_accumulation_steps"] == 4
