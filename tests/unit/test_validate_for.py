"""`smolalign recipes validate RECIPE --for 8xH100`: a recipe written for a GPU node checked on a laptop. Recipe
errors are refused; what the described machine (that many GPUs of that type, running the smolalign image, whose
packages are the Dockerfile's extras) lacks is refused; what only this machine lacks is a note."""

import importlib.util
import re

import pytest

from smolalign.target import IMAGE_EXTRAS


def validate(cli, *args):
    return cli("recipes", "validate", *args)


def test_a_cluster_recipe_validates_for_its_machine(cli):
    code, out, err = validate(cli, "smollm3/sft", "--for", "8xH100")
    assert code == 0, err
    liger_here = importlib.util.find_spec("liger_kernel") is not None
    assert ("note: on this machine, train.use_liger_kernel" in out) is not liger_here
    if not liger_here:  # for this machine, the same recipe is refused
        code, out, err = validate(cli, "smollm3/sft")
        assert code == 2 and "train.use_liger_kernel" in err


@pytest.mark.parametrize("tracker", ["wandb", "trackio", "tensorboard", "[wandb,tensorboard]"])
def test_the_trackers_recipes_report_to_are_in_the_image(cli, tracker):
    code, out, err = validate(cli, "smollm3/sft", "--set", f"train.report_to={tracker}", "--for", "8xH100")
    assert code == 0 and "ok for 8×H100 (the smolalign image)" in out, err


@pytest.mark.parametrize(("override", "key"), [
    ("train.report_to=mlflow", "train.report_to mlflow"),  # a tracker the image does not carry
    ("model.attn_implementation=flash_attention_2", "model.attn_implementation flash_attention_2"),  # no flash-attn
    ("train.no_such_key=1", "train.no_such_key"),  # a recipe error
])
def test_what_the_machine_or_the_recipe_lacks_is_refused(cli, override, key):
    code, out, err = validate(cli, "smollm3/sft", "--set", override, "--for", "8xH100")
    assert code == 2 and key in err.strip().splitlines()[-1]


def test_the_machines_gpus_and_processes_are_the_ones_checked(cli):
    server = ("--set", "generation.backend=vllm_server", "--set", "generation.server.tensor_parallel=2")
    assert validate(cli, "smollm3/grpo_no_think", *server, "--for", "8xH100")[0] == 2  # 8 processes + 2 for vLLM
    code, out, err = validate(cli, "smollm3/grpo_no_think", *server, "--set", "launch.preset=zero3",
                              "--set", "launch.num_processes=6", "--for", "8xH100")
    assert code == 0, err
    # the global batch is divided over the described machine's processes, not this one's
    batch = ("--set", "launch.global_batch_size=12", "--set", "train.per_device_train_batch_size=1")
    assert validate(cli, "smollm3/sft", *batch, "--for", "4xH100")[0] == 0
    code, out, err = validate(cli, "smollm3/sft", *batch, "--for", "8xH100")
    assert code == 2 and "not a multiple" in err


@pytest.mark.parametrize("spec", ["8xH10", "eightxH100", "0xH100", "launch"])
def test_a_machine_that_is_not_described_is_refused(cli, spec):
    code, out, err = validate(cli, "smollm3/sft", "--for", spec)
    assert code == 2 and "--for" in err.strip().splitlines()[-1]


def test_the_recipes_launch_section_describes_the_machine(cli):
    code, out, err = validate(cli, "smollm3/sft", "--set", "launch.gpu=A100-80GB", "--set", "launch.num_processes=4",
                              "--for", "launch")
    assert code == 0 and "ok for 4×A100-80GB" in out, err


def test_the_image_packages_are_the_dockerfiles_extras():
    from paths import REPO

    extras = re.search(r'pip install "\.\[([^\]]+)\]"', (REPO / "Dockerfile").read_text())[1]
    assert tuple(extras.split(",")) == IMAGE_EXTRAS
