"""ZeRO-3 resume for every kind of stage (SFT, DPO, GRPO, distillation) on two CPU processes: a 4-step run cut back
to checkpoint-2 and resumed leaves the checkpoint untouched, logs only steps 3-4 with the uninterrupted run's losses
and ends on its weights; with the first moments negated in both ranks' DeepSpeed optimizer shards it ends elsewhere
(the sharded optimizer state is read back). The single-process checks are tests/integration/test_resume.py; SFT and
DPO's plain ZeRO-3 resume is in the default tier (tests/integration/test_zero3_cpu.py)."""

import subprocess
import sys

import pytest
import torch
import yaml
from resume_checks import (
    VERBS,
    assert_resumed,
    build_teacher,
    cut_back,
    largest_difference,
    perturb_optimizer_state,
    stage_recipe,
    weights,
)
from tiny_models import deepspeed_skip_reason

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path (on GPUs accelerate launches DeepSpeed)"),
    pytest.mark.skipif(deepspeed_skip_reason() is not None, reason=str(deepspeed_skip_reason())),
]


def zero3(verb: str, *args) -> None:
    done = subprocess.run([sys.executable, "-m", "smolalign", verb, *map(str, args), "--launch", "zero3",
                           "--num-processes", "2"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.mark.parametrize("name", list(VERBS))
def test_zero3_resume_reads_weights_and_optimizer_shards(name, tiny_dir, tiny_tokenizer, tmp_path):
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(yaml.safe_dump(stage_recipe(name, tmp_path, tiny_dir, build_teacher(tmp_path, tiny_tokenizer))))
    full, resumed, perturbed = tmp_path / "full", tmp_path / "resumed", tmp_path / "perturbed"
    zero3(VERBS[name], recipe, "-o", full)
    assert any((full / "checkpoint-2").glob("global_step*/*optim_states.pt"))  # DeepSpeed's sharded checkpoint
    cut = cut_back(full, resumed)
    zero3(VERBS[name], recipe, "-o", resumed, "--resume")
    assert_resumed(full, resumed, cut)
    cut_back(full, perturbed)
    assert perturb_optimizer_state(perturbed / "checkpoint-2") >= 2  # both ranks' shards
    zero3(VERBS[name], recipe, "-o", perturbed, "--resume")
    assert largest_difference(weights(perturbed / "model"), weights(full / "model")) > 1e-4
