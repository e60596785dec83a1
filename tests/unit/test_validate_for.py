"""`smolalign recipes validate RECIPE --for 8xH100`: a recipe written for a GPU node checked on a laptop. Recipe
errors are refused; what the described machine (that many GPUs of that type, running the smolalign image, whose
packages are the Dockerfile's extras) lacks is refused; what only this machine lacks is a note."""

import importlib.util
import re

import pytest
from recipe_runs import command_run

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
    server = ("--set", "generation.backend=vllm_server", "--set", "generation.server.tensor_parallel=2", "--set",
              "train.vllm_gpu_memory_utilization=null")  # it sizes the colocated engine
    # 6 training processes beside the server's 2 GPUs, as the launch starts them
    code, out, err = validate(cli, "smollm3/grpo_no_think", *server, "--for", "8xH100")
    assert code == 0 and "ok for 8×H100 (the smolalign image): 6 training process(es), preset " in out, err
    code, out, err = validate(cli, "smollm3/grpo_no_think", *server, "--set", "launch.preset=zero3",
                              "--set", "launch.num_processes=7", "--for", "8xH100")  # 7 + 2 do not fit on 8
    assert code == 2 and "need 9 GPUs" in err
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


NO_ENGINE = ["train.vllm_gpu_memory_utilization=null"]
"""The shipped recipe sizes its colocated engine; generating with a server, that setting is dropped."""


@pytest.mark.parametrize("overrides", [
    [],
    ["launch.preset=zero3"],
    ["launch.preset=zero3", "launch.num_processes=4"],
    ["generation.backend=vllm_server", *NO_ENGINE],
    ["generation.backend=vllm_server", "generation.server.tensor_parallel=2", *NO_ENGINE],
    ["generation.backend=vllm_server", "generation.server.base_url=http://elsewhere:8000", *NO_ENGINE],
    ["generation.backend=vllm_colocate", "launch.preset=zero2"],
], ids=["ddp", "zero3", "zero3-4", "server", "server-tp2", "server-elsewhere", "colocate"])
def test_validate_plans_the_processes_the_launch_starts(overrides, monkeypatch):
    """The same recipe, planned by `validate --for 8xH100` and by the launch on a node of 8 GPUs
    (launch.planned_launch, the GPU count stubbed): the same training processes and preset."""
    import smolalign.hardware
    from smolalign.launch import planned_launch
    from smolalign.target import described_target

    for name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "SMOLALIGN_LAUNCHED", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(smolalign.hardware, "visible_gpu_count", lambda: 8)
    sets = [word for item in overrides for word in ("--set", item)]
    run = command_run(["rl", "smollm3/grpo_no_think", *sets])
    preset, launched = planned_launch(run, None, None)
    target, planned_preset = described_target("8xH100", run.recipe.launch, run.recipe.generation)
    assert (target.processes, planned_preset) == (launched, preset)
