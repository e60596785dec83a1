"""`smolalign rl` end to end on a tiny model: GRPO raises a learnable reward, bad input exits 2 before any model
loads, and a stalled run fails loudly within its timeout."""


import json

import pytest
from tiny_models import addition_prompts, sft_tiny, write_jsonl

from smolalign.runs.curves import figure
from smolalign.runs.metrics import read_metrics

REWARDS_FILE = '''
import time

TARGET = {target}


def target_share(completions, completion_ids, **kw):
    """The share of completion tokens that are one target token: easy for a tiny model to learn."""
    return [sum(i == TARGET for i in ids) / max(len(ids), 1) for ids in completion_ids]


def slow(completions, **kw):
    time.sleep(4)
    return [0.0] * len(completions)
'''


@pytest.fixture
def rl_recipe(write_recipe, tiny_dir, tiny_tokenizer, tmp_path):
    data = write_jsonl(tmp_path / "prompts.jsonl", addition_prompts(32))
    rewards_file = tmp_path / "my_rewards.py"
    rewards_file.write_text(REWARDS_FILE.format(target=tiny_tokenizer.convert_tokens_to_ids("Ġplus")))

    def make(rewards=None, **extra) -> str:
        train = {"num_generations": 4, "per_device_train_batch_size": 8, "max_completion_length": 16,
                 "max_steps": 20, "learning_rate": 1e-2, "logging_steps": 2, "save_strategy": "no",
                 "gradient_checkpointing": False, **extra.pop("train", {})}
        template = extra.pop("template", {"name": "chatml"})
        return str(write_recipe({
            "model": {"source": str(tiny_dir)}, "template": template, "method": "grpo",
            "data": extra.pop("data", {"sources": [{"path": str(data)}]}),
            "rewards": rewards or [{"name": f"{rewards_file}:target_share"}], "train": train, **extra}))

    make.rewards_file = rewards_file
    return make


def test_grpo_raises_a_learnable_reward(cli, rl_recipe, tmp_path):
    run_dir = tmp_path / "run"
    code, out, err = cli("rl", rl_recipe(), "-o", run_dir)
    assert code == 0, err
    rewards = [m["reward"] for m in read_metrics(run_dir) if "reward" in m]
    assert len(rewards) == 10
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3 + 0.1
    assert (run_dir / "model" / "config.json").is_file() and "reward " in out


def test_builtin_rewards_and_weights_reach_trl(cli, rl_recipe, tmp_path):
    rewards = [{"name": "math_accuracy", "weight": 1.0}, {"name": "think_format", "weight": 0.5},
               {"name": "soft_overlong", "weight": 0.25, "params": {"max_length": 16, "cache": 4}}]
    run_dir = tmp_path / "run"
    code, out, err = cli("rl", rl_recipe(rewards, train={"max_steps": 2, "logging_steps": 1}), "-o", run_dir)
    assert code == 0, err
    steps = [m for m in read_metrics(run_dir) if "reward" in m]
    assert len(steps) == 2
    for m in steps:  # TRL's reward is the weighted sum of the rewards: the recipe's weights are the ones it used
        parts = m["rewards/math_accuracy/mean"], m["rewards/think_format/mean"], m["rewards/soft_overlong/mean"]
        assert m["reward"] == pytest.approx(1.0 * parts[0] + 0.5 * parts[1] + 0.25 * parts[2], abs=1e-6)
    assert any(m["rewards/soft_overlong/mean"] != 0 for m in steps)  # a weight on a zero reward would prove nothing
    # curves.png draws each reward function's mean at the logged values, and the completion lengths.
    assert (run_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    axes = {a.get_title(): {line.get_label(): list(line.get_ydata()) for line in a.get_lines()}
            for a in figure([("run", read_metrics(run_dir))]).axes}
    for name in ("math_accuracy", "think_format", "soft_overlong"):
        key = f"rewards/{name}/mean"
        assert axes["reward per function (mean)"][key] == [m[key] for m in steps]
    assert axes["completion length (tokens)"]["completions/mean_length"] == [m["completions/mean_length"] for m in steps]


def test_each_rows_think_mode_reaches_its_prompt(rl_recipe, tmp_path):
    from recipe_runs import loaded_run

    from smolalign.data.prompts import recipe_prompts

    rows = [{"prompt": f"what is {i} plus {i + 1}", "solution": str(2 * i + 1),
             "chat_template_kwargs": {"enable_thinking": i % 2 == 0}} for i in range(4)]
    data = write_jsonl(tmp_path / "modes.jsonl", rows)
    sources = {"sources": [{"path": str(data)}]}
    prompts = recipe_prompts(loaded_run(rl_recipe(template={"name": "smollm3"}, data=sources), [], "rl").recipe).train
    assert prompts[0]["prompt"] == [{"role": "user", "content": "what is 0 plus 1"}]  # think: the default
    assert prompts[1]["prompt"] == [{"role": "system", "content": "/no_think"},
                                    {"role": "user", "content": "what is 1 plus 2"}]
    assert [prompts[i]["chat_template_kwargs"] for i in (0, 1)] == [{"enable_thinking": True},
                                                                    {"enable_thinking": False}]
    assert prompts[0]["solution"] == "1"
    no_think = recipe_prompts(loaded_run(rl_recipe(template={"name": "smollm3", "kwargs": {"enable_thinking": False}},
                                                    data=sources), [], "rl").recipe).train
    assert no_think[0]["prompt"][0] == {"role": "system", "content": "/think"}
    assert no_think[1]["prompt"] == [{"role": "user", "content": "what is 1 plus 2"}]
    assert no_think[1]["chat_template_kwargs"] == {"enable_thinking": False}


def test_per_row_modes_exit_2_with_a_template_that_has_none(cli, rl_recipe, tmp_path):
    """chatml has no think modes: a row asking for one is refused, naming the row, instead of a flag being pasted
    into its prompt."""
    rows = [{"prompt": "what is 1 plus 2", "solution": "3", "chat_template_kwargs": {"enable_thinking": False}}]
    data = write_jsonl(tmp_path / "modes.jsonl", rows)
    code, out, err = cli("rl", rl_recipe(data={"sources": [{"path": str(data)}]}), "--dry-run")
    assert code == 2 and "modes.jsonl#0: chat_template_kwargs.enable_thinking" in err and "chatml" in err, err


@pytest.mark.parametrize(("rewards", "message"), [
    ([{"name": "math_acuracy"}], "unknown reward 'math_acuracy' (did you mean math_accuracy?)"),
    ([{"name": "math_accuracy", "params": {"gold_column": "answer"}}], "reads the column 'answer'"),
    ([{"name": "soft_overlong", "params": {"max_length": 10}}], "parameter 'cache' is required"),
])
def test_bad_rewards_exit_2_before_any_model_loads(cli, rl_recipe, tmp_path, rewards, message):
    code, out, err = cli("rl", rl_recipe(rewards), "-o", tmp_path / "run")
    assert code == 2 and message in err, err
    assert "Loading weights" not in err and not (tmp_path / "run").exists()


def test_a_reward_file_that_does_not_import_is_exit_2(cli, rl_recipe, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import numpy_but_misspelled\n")
    code, out, err = cli("rl", rl_recipe([{"name": f"{broken}:reward"}]), "-o", tmp_path / "run")
    assert code == 2 and "does not import" in err and "ModuleNotFoundError" in err and "Traceback" not in err


def test_generations_must_divide_the_batch(cli, rl_recipe):
    code, out, err = cli("rl", rl_recipe(train={"num_generations": 3}), "--dry-run")
    assert code == 2 and "num_generations 3 must divide" in err


def test_an_unreachable_vllm_server_is_exit_2(cli, rl_recipe, tmp_path):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    recipe = rl_recipe(generation={"backend": "vllm_server", "server": {"base_url": f"http://127.0.0.1:{port}"}})
    code, out, err = cli("rl", recipe, "-o", tmp_path / "run")
    # Without vLLM or a GPU the preflight refuses first; past it, the server is probed before anything loads.
    assert code == 2 and ("no vLLM server answers" in err or "generation.backend vllm_server:" in err)
    assert not (tmp_path / "run").exists()


def test_a_stalled_step_fails_loudly(cli, rl_recipe, tmp_path):
    recipe = rl_recipe([{"name": f"{rl_recipe.rewards_file}:slow"}], generation={"stall_timeout": 1.5},
                       train={"max_steps": 3})
    code, out, err = cli("rl", recipe, "-o", tmp_path / "run")
    assert code == 1 and "no training step finished for 1.5 s" in err and "Traceback" not in err


def test_rl_dry_run_plan(cli, rl_recipe):
    code, out, err = cli("rl", rl_recipe(), "--dry-run")
    assert code == 0, err
    assert "grpo (loss dapo" in out and "4 generations per prompt" in out and "transformers generate" in out
    assert "resolved recipe:" in out


def test_grpo_with_lora_and_a_kl_term(cli, rl_recipe, tmp_path):
    run_dir = tmp_path / "run"
    recipe = rl_recipe(peft={"r": 4, "lora_alpha": 8, "target_modules": "all-linear"},
                       train={"max_steps": 2, "beta": 0.04, "loss_type": "grpo"})
    code, out, err = cli("rl", recipe, "-o", run_dir)
    assert code == 0, err
    assert any("kl" in m for m in read_metrics(run_dir)) and (run_dir / "model" / "config.json").is_file()


@pytest.fixture(scope="module")
def coder_dir(tiny_dir, tmp_path_factory):
    """The tiny model after SFT on one task whose answer is a program: `print(6 * 7)` in a fenced block."""
    rows = [{"messages": [{"role": "user", "content": CODE_TASK},
                          {"role": "assistant", "content": "```python\nprint(6 * 7)\n```"}]}] * 16
    return sft_tiny(tiny_dir, tmp_path_factory.mktemp("coder"), rows, steps=100)


CODE_TASK = "Print six times seven in Python."


@pytest.fixture
def code_recipe(write_recipe, coder_dir, tmp_path):
    from rewards.sandbox import available_levels

    if not [level for level in available_levels() if level != "rlimits"]:
        pytest.skip("no sandbox level works on this machine (bubblewrap or unshare)")
    rows = [{"prompt": CODE_TASK, "test_cases": [{"input": "", "output": "42\n"}]}] * 4
    data = write_jsonl(tmp_path / "tasks.jsonl", rows)
    return write_recipe({"model": {"source": str(coder_dir)}, "template": {"name": "chatml"}, "method": "grpo",
                         "data": {"sources": [{"path": str(data)}]},
                         "rewards": [{"name": "code", "params": {"test_column": "test_cases", "workers": 3}}],
                         "train": {"num_generations": 4, "per_device_train_batch_size": 4, "max_steps": 2,
                                   "max_completion_length": 24, "logging_steps": 1, "save_strategy": "no",
                                   "learning_rate": 1e-6, "gradient_checkpointing": False}})


def test_the_plan_names_the_sandbox_level_in_use(cli, code_recipe):
    from rewards.sandbox import choose_level

    code, out, err = cli("rl", code_recipe, "--dry-run")
    assert code == 0, err
    row = next(line.split(None, 1)[1] for line in out.splitlines() if line.strip().startswith("sandbox "))
    assert row.startswith(f"{choose_level()}, 3 workers")


def test_grpo_with_the_sandboxed_code_reward(cli, code_recipe, tmp_path):
    """The test expects 42 on stdout and the answer the model learned, `print(6 * 7)`, has no 42 in its text: a
    score above 0 means the program ran in the sandbox."""
    code, out, err = cli("rl", code_recipe, "-o", tmp_path / "run")
    assert code == 0, err
    scores = [m["rewards/code/mean"] for m in read_metrics(tmp_path / "run") if "reward" in m]
    assert len(scores) == 2  # logged at every step
    assert max(scores) > 0  # some completion's program ran in the sandbox and printed 42


RECORDING = '''
import json


def record(completions, **kw):
    with open({path!r}, "a") as out:
        out.write(json.dumps(completions) + "\\n")
    return [0.0] * len(completions)
'''


def test_rewards_get_the_think_opener_a_template_prefills(cli, rl_recipe, tmp_path):
    """A template whose generation prompt ends with `<think>\\n` (as reasoning models' do): TRL hands the rewards the
    generated text alone; the run's rewards read it with the opener in front."""
    from paths import REPO

    opened = tmp_path / "opened.jinja"
    opened.write_text((REPO / "chat_templates" / "chatml.jinja").read_text().replace(
        '{{- "<|im_start|>assistant\\n" -}}{%- endif -%}', '{{- "<|im_start|>assistant\\n<think>\\n" -}}{%- endif -%}'))
    seen = tmp_path / "seen.jsonl"
    (tmp_path / "recording.py").write_text(RECORDING.format(path=str(seen)))
    recipe = rl_recipe([{"name": f"{tmp_path}/recording.py:record"}], template={"name": str(opened)},
                       train={"max_steps": 1})
    code, _, err = cli("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert "opens the think block in its generation prompt" in err
    calls = [json.loads(line) for line in seen.read_text().splitlines()]
    trained = calls[-1]   # the first call is the check of the reward before loading
    texts = [c if isinstance(c, str) else c[0]["content"] for c in trained]   # conversational prompts: messages
    assert texts and all(text.startswith("<think>\n") for text in texts)
