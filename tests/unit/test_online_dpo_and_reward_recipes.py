"""Recipes for online DPO (`smolalign rl`, method online_dpo) and reward models (`smolalign po`, method reward):
bad input refused with exit 2 and one line naming the key, before anything loads or is written (harness:
tests/badinput.py); each row's think mode reaching the prompt online DPO renders with no template kwargs."""

import json

import pytest
from badinput import Case, run_refused

_PROMPTS = json.dumps({"prompt": "what is 1 plus 2", "solution": "3"}) + "\n"
_PAIR = json.dumps({"prompt": "what is 1 plus 2", "chosen": "3", "rejected": "4"}) + "\n"
_UNPAIRED = json.dumps({"prompt": "what is 1 plus 2", "completion": "3", "label": True}) + "\n"


def _online(rewards=None, data="{dir}/prompts.jsonl", **sections) -> str:
    train = {"max_new_tokens": 8, "max_length": 64, "max_steps": 1, "per_device_train_batch_size": 1,
             **sections.pop("train", {})}
    recipe = {"model": {"source": "{tiny}"}, "template": {"name": "chatml"}, "method": "online_dpo",
              "data": {"sources": [{"path": data}]},
              "rewards": [{"name": "math_accuracy"}] if rewards is None else rewards, "train": train, **sections}
    return json.dumps(recipe)


def _reward(data="{dir}/pairs.jsonl", **sections) -> str:
    train = {"max_length": 64, "max_steps": 1, "per_device_train_batch_size": 2, **sections.pop("train", {})}
    return json.dumps({"model": {"source": "{tiny}"}, "template": {"name": "chatml"}, "method": "reward",
                       "data": {"sources": [{"path": data}]}, "train": train, **sections})


def _rl(recipe: str, files: dict | None = None) -> dict:
    return {"r.yaml": recipe, "prompts.jsonl": _PROMPTS, **(files or {})}


def _po(recipe: str, files: dict | None = None) -> dict:
    return {"r.yaml": recipe, "pairs.jsonl": _PAIR, **(files or {})}


RL = ("rl", "{dir}/r.yaml", "--dry-run")
PO = ("po", "{dir}/r.yaml", "--dry-run")
CASES = [
    Case("online-dpo-num-generations", RL, ("train.num_generations", "2 answers"),
         _rl(_online(train={"num_generations": 4}))),
    Case("online-dpo-max-completion-length", RL, ("train.max_completion_length", "train.max_new_tokens"),
         _rl(_online(train={"max_completion_length": 16}))),
    Case("online-dpo-unknown-reward", RL, ("rewards.0", "math_acuracy"), _rl(_online([{"name": "math_acuracy"}]))),
    Case("online-dpo-missing-data", RL, ("{dir}/missing.jsonl",), {"r.yaml": _online(data="{dir}/missing.jsonl")}),
    Case("online-dpo-no-rewards", RL, ("rewards",), _rl(_online([]))),
    Case("online-dpo-loss-type", RL, ("train.loss_type", "apo_zero"), _rl(_online(train={"loss_type": "apo_zero"}))),
    Case("online-dpo-reward-model-path", RL, ("train.reward_model_path", "rewards:"),
         _rl(_online(train={"reward_model_path": "some/model"}))),
    Case("online-dpo-use-vllm", RL, ("train.use_vllm", "generation.backend"), _rl(_online(train={"use_vllm": True}))),
    Case("online-dpo-group-port", RL, ("train.vllm_group_port", "generation.server.group_port"),
         _rl(_online(train={"vllm_group_port": 51216}))),
    Case("online-dpo-teacher", RL, ("teacher",), _rl(_online(teacher={"source": "{tiny}"}))),
    Case("online-dpo-no-room-for-prompt", RL, ("train.max_new_tokens", "train.max_length"),
         _rl(_online(train={"max_new_tokens": 64, "max_length": 64}))),
    Case("online-dpo-reward-column", RL, ("solution",),
         {"r.yaml": _online(), "prompts.jsonl": json.dumps({"prompt": "what is 1 plus 2"}) + "\n"}),
    Case("online-dpo-trl-refuses", RL, ("train.load_best_model_at_end",),
         _rl(_online(train={"eval_strategy": "epoch", "load_best_model_at_end": True}))),
    Case("online-dpo-scheduler", RL, ("train", "bogus", "SchedulerType"),
         _rl(_online(train={"lr_scheduler_type": "bogus"}))),
    Case("online-dpo-team-reward-signature", RL, ("my_reward.py:score", "**kwargs"),
         _rl(_online([{"name": "{dir}/my_reward.py:score"}]),
             {"my_reward.py": "def score(completions, prompts):\n    return [0.0] * len(completions)\n"})),
    Case("online-dpo-team-reward-returns-strings", RL, ("my_reward.py:score", "numbers"),
         _rl(_online([{"name": "{dir}/my_reward.py:score"}]),
             {"my_reward.py": "def score(completions, **kwargs):\n    return ['good' for _ in completions]\n"})),
    Case("online-dpo-prompt-content-number", RL, ("prompts.jsonl", "content"),
         {"r.yaml": _online(), "prompts.jsonl": json.dumps({"prompt": [{"role": "user", "content": 5}],
                                                            "solution": "3"}) + "\n"}),
    Case("online-dpo-reward-model-without-head", RL, ("rewards.0", "no classification head"),
         _rl(_online([{"name": "model:{tiny}"}]))),
    Case("online-dpo-judge-not-answering", RL, ("rewards.0", "127.0.0.1:9", "does not answer"),
         _rl(_online([{"name": "judge", "params": {"base_url": "http://127.0.0.1:9/v1", "model": "j",
                                                   "rubric": "{prompt} {completion} Score?"}}]))),
    Case("reward-model-reference", PO, ("reference",), _po(_reward(reference="policy"))),
    Case("reward-model-pad-token", PO, ("train.pad_token",), _po(_reward(train={"pad_token": "<|endoftext|>"}))),
    Case("reward-model-unpaired-data", PO, ("reward",),
         {"r.yaml": _reward(data="{dir}/unpaired.jsonl"), "unpaired.jsonl": _UNPAIRED}),
    Case("reward-model-beta", PO, ("train.beta",), _po(_reward(train={"beta": 0.1}))),
    Case("reward-model-combined-with-dpo", PO, ("reward",), _po(_reward().replace('"reward"', '["sigmoid", "reward"]'))),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_refused(case, cli, tmp_path, tiny_dir, monkeypatch):
    run_refused(case, cli, tmp_path / "case", tiny_dir, monkeypatch)


def test_think_modes_reach_the_prompt_rendered_without_kwargs(write_recipe, tiny_dir, tmp_path):
    """Online DPO renders every prompt with no template kwargs: a recipe-wide no_think and a row asking for think
    must each render as the template renders the original messages with that row's enable_thinking."""
    from recipe_runs import loaded_run
    from transformers import AutoTokenizer

    from smolalign.data.prompts import recipe_prompts
    from smolalign.templates.registry import resolve_template

    rows = [{"prompt": "what is 1 plus 2", "solution": "3"},
            {"prompt": "what is 2 plus 2", "solution": "4", "chat_template_kwargs": {"enable_thinking": True}}]
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "smollm3",
                                                                           "kwargs": {"enable_thinking": False}},
                         "method": "online_dpo", "data": {"sources": [{"path": str(data)}]},
                         "rewards": [{"name": "math_accuracy"}], "train": {"max_new_tokens": 8, "max_length": 64}})
    recipe = loaded_run(str(path), [], "rl").recipe
    prompts = recipe_prompts(recipe, rendered_kwargs={}).train
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    tokenizer.chat_template = resolve_template("smollm3").text
    for row, carried, think in zip(rows, prompts, (False, True), strict=True):
        rendered = tokenizer.apply_chat_template(carried["prompt"], add_generation_prompt=True, tokenize=False)
        expected = tokenizer.apply_chat_template([{"role": "user", "content": row["prompt"]}],
                                                 add_generation_prompt=True, tokenize=False, enable_thinking=think)
        assert rendered == expected
        assert carried["chat_template_kwargs"] == {"enable_thinking": think}  # what the format rewards read


@pytest.mark.parametrize(("backend", "mode"), [("vllm_colocate", "colocate"), ("vllm_server", "server")])
def test_vllm_backends_map_onto_online_dpo_config_as_for_grpo(write_recipe, tiny_dir, tmp_path, monkeypatch,
                                                               backend, mode):
    """generation.backend reaches OnlineDPOConfig's own fields (use_vllm, vllm_mode, the server's address), the
    recipe validated for a GPU machine with vLLM installed."""
    from recipe_runs import loaded_run
    from trl.experimental.online_dpo import OnlineDPOConfig

    from smolalign.generation.backend_settings import ServerAddress
    from smolalign.hardware import detect_hardware
    from smolalign.stages.online_dpo import online_dpo_config
    from smolalign.target import Target

    data = tmp_path / "prompts.jsonl"
    data.write_text(_PROMPTS)
    server = {"server": {"base_url": "http://127.0.0.1:8123"}} if backend == "vllm_server" else {}
    path = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "online_dpo",
                         "data": {"sources": [{"path": str(data)}]}, "rewards": [{"name": "math_accuracy"}],
                         "generation": {"backend": backend, **server},
                         "train": {"max_new_tokens": 8, "max_length": 64, "beta": 0.2}})
    monkeypatch.setattr("smolalign.target.installed", lambda module: module != "flash_attn")
    recipe = loaded_run(str(path), [], "rl", target=Target(1, "a GPU machine with vLLM", bf16=True, processes=1))
    base_url = server["server"]["base_url"] if server else None
    address = ServerAddress(base_url, 41234) if server else None
    config = online_dpo_config(recipe, detect_hardware(), tmp_path / "run", address)
    assert isinstance(config, OnlineDPOConfig)
    assert config.use_vllm and config.vllm_mode == mode and config.vllm_server_base_url == base_url
    assert config.vllm_group_port == (41234 if server else 51216)  # TRL's default where no server is used
    assert config.reward_weights == [1.0] and config.beta == 0.2  # one beta, every epoch


def test_online_dpo_rewards_get_each_answers_own_tokens(monkeypatch):
    """TRL's online DPO passes completion_ids cut from the padded batch (truncate_right pads after the end of turn);
    the rewards must get each answer's tokens through its end of turn, as GRPO's do, or a length reward sees every
    answer as long as the longest."""
    import torch
    from trl.experimental.online_dpo import OnlineDPOTrainer
    from trl.experimental.utils import truncate_right

    from rewards.registry import resolve_reward
    from smolalign.recipe.method_table import online_dpo_trainer

    eos, pad = 2, 0
    padded, _ = truncate_right(torch.tensor([[5, 6, 2, 7, 8, 9], [5, 6, 7, 8, 9, 4]]), [eos], pad)
    seen = {}
    monkeypatch.setattr(OnlineDPOTrainer, "_calculate_rewards_from_functions",
                        lambda self, prompts, completions, completion_ids_list, **kw: seen.setdefault(
                            "ids", completion_ids_list))
    trainer = object.__new__(online_dpo_trainer())
    trainer.eos_token_ids = [eos]
    trainer._calculate_rewards_from_functions(["p", "p"], ["a", "b"], [row.tolist() for row in padded])
    assert seen["ids"] == [[5, 6, 2], [5, 6, 7, 8, 9, 4]]
    soft_overlong = resolve_reward("soft_overlong", {"max_length": 6, "cache": 3})
    assert soft_overlong(["a", "b"], completion_ids=seen["ids"]) == [0.0, -1.0]
