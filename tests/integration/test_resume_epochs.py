"""A resume in a later epoch of a stage that samples its prompts with TRL's RepeatSampler (GRPO, distillation; RLOO
and GOLD share it): the resumed steps read the prompts the uninterrupted run read, and the run ends on its weights.
The sampler shuffles with a generator of its own that the checkpoint does not hold, and transformers skips finished
epochs without iterating them: without `stages.epoch_order` the resumed run read the first epoch's order again.

Three prompts, one a step: an epoch is three steps; the 6-step run saves at step 4, in its second epoch."""

import pytest
import yaml
from resume_checks import assert_resumed, build_teacher, cut_back, stage_recipe
from tiny_models import write_jsonl

from smolalign.cli import main

STEPS = {"max_steps": 6, "save_steps": 4}


def _recipe(stage: str, folder, tiny_dir, tiny_tokenizer) -> dict:
    teacher = build_teacher(folder, tiny_tokenizer) if stage == "distill" else None
    recipe = stage_recipe(stage, folder, tiny_dir, teacher)
    prompts = write_jsonl(folder / f"{stage}-prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}"}
                                                              for i in range(3)])
    recipe["data"] = {"sources": [{"path": str(prompts)}]}
    batch = {"grpo": {"per_device_train_batch_size": 4}, "distill": {"per_device_train_batch_size": 1}}[stage]
    recipe["train"] = {**recipe["train"], **batch, **STEPS}
    return recipe


def _run(recipe_path, *args) -> None:
    try:
        main(["rl", str(recipe_path), *map(str, args)])
    except SystemExit as exc:
        assert not exc.code, f"{args}: exit {exc.code}"


@pytest.mark.parametrize("stage", ["grpo", "distill"])
def test_a_resume_in_the_second_epoch_reads_the_uninterrupted_order(stage, tiny_dir, tiny_tokenizer, tmp_path):
    recipe = tmp_path / f"{stage}.yaml"
    recipe.write_text(yaml.safe_dump(_recipe(stage, tmp_path, tiny_dir, tiny_tokenizer)))
    full, resumed = tmp_path / "full", tmp_path / "resumed"
    _run(recipe, "-o", full)
    cut = cut_back(full, resumed, "checkpoint-4")
    _run(recipe, "-o", resumed, "--resume")
    assert_resumed(full, resumed, cut)
