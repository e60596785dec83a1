"""GRPO with tools, end to end through `smolalign rl` on a tiny model: TRL's own tool loop, smolalign's template,
response parser, python tool (the real sandbox) and team tools. Only the policy's sampling is scripted (a random tiny
model never writes a tool call): each scenario's turns are fixed token ids, so what the loop did with them can be
checked exactly: which tokens carry loss, what each tool returned, what the rewards and the logs saw."""

import json

import pytest
from tiny_models import write_jsonl

from smolalign.runs.metrics import read_metrics

TEAM_TOOLS = '''
import time


def lookup(key: str) -> str:
    """Look a value up by its key.

    Args:
        key: The key to look up.
    """
    return {"pi": "3.14159"}[key]


def wait(seconds: int) -> str:
    """Wait, then say so.

    Args:
        seconds: How long to wait.
    """
    time.sleep(seconds)
    return "done"
'''

RECORDING_REWARD = '''
import json
from rewards.trajectory import read_trajectory


def record(completions, prompts, **kwargs):
    """Writes what it was given, scores nothing."""
    with open({path!r}, "a") as out:
        for prompt, completion in zip(prompts, completions):
            mine = read_trajectory(completion)
            out.write(json.dumps({{"scenario": prompt[-1]["content"], "completion": completion,
                                   "calls": mine.calls, "malformed": mine.malformed_calls, "errors": mine.tool_errors,
                                   "answered": mine.answered, "answer": mine.answer}}) + "\\n")
    return [0.0] * len(completions)
'''


def call(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call><|im_end|>"


SCRIPTS = {  # scenario -> the policy's turns (the n-th turn follows the n-th tool result)
    "multiply": [call("python", {"code": "print(123 * 456)"}), "The answer is 56088.<|im_end|>"],
    "raises": [call("lookup", {"key": "tau"}), "I could not find it.<|im_end|>"],
    "hangs": [call("wait", {"seconds": 30}), "It took too long.<|im_end|>"],
    "crashes": [call("python", {"code": "print(1 / 0)"}), "It failed.<|im_end|>"],
    "malformed": ['<tool_call>\n{"name": "python", "arguments": {code: 1}\n</tool_call><|im_end|>'],
    "loops": [call("python", {"code": "print(1)"})] * 3,
}


@pytest.fixture
def scripted_policy(monkeypatch, tiny_tokenizer):
    """GRPOTrainer's sampling replaced by the scripts; every scored batch TRL built is kept."""
    from trl import GRPOTrainer

    batches = []

    def generate(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        out = []
        for ids in prompt_ids:
            text = tiny_tokenizer.decode(ids)
            scenario = next(name for name in SCRIPTS if f"scenario {name}" in text)
            turn = text.count("<tool_response>")
            out.append(tiny_tokenizer.encode(SCRIPTS[scenario][turn], add_special_tokens=False))
        return out, None

    original = GRPOTrainer._generate_and_score_completions

    def keep(self, inputs):
        output = original(self, inputs)
        batches.append({key: output[key].tolist() for key in ("completion_ids", "completion_mask", "tool_mask")})
        return output

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", generate)
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", keep)
    return batches


def test_tool_loop_trains_only_the_models_tokens_and_reports_every_failure(cli, write_recipe, long_tiny_dir, tmp_path,
                                                                         tiny_tokenizer, scripted_policy):
    (tmp_path / "team_tools.py").write_text(TEAM_TOOLS)
    seen = tmp_path / "seen.jsonl"
    (tmp_path / "recording.py").write_text(RECORDING_REWARD.format(path=str(seen)))
    rows = [{"prompt": f"scenario {name}", "solution": "56088"} for name in SCRIPTS]
    data = write_jsonl(tmp_path / "prompts.jsonl", rows)
    recipe = write_recipe({
        "stage": "rl", "method": "grpo", "model": {"source": str(long_tiny_dir)},
        "template": {"name": "smollm3", "kwargs": {"enable_thinking": False}},
        "data": {"sources": [{"path": str(data)}]},
        "rewards": [{"name": "math_accuracy"}, {"name": "tool_format"}, {"name": f"{tmp_path}/recording.py:record"}],
        "tools": {"use": ["python", f"{tmp_path}/team_tools.py:lookup", f"{tmp_path}/team_tools.py:wait"],
                  "max_turns": 2, "timeout": 1.0, "max_output_chars": 200},
        "generation": {"backend": "transformers"},
        "train": {"num_generations": 2, "per_device_train_batch_size": 12, "max_completion_length": 400,
                  "max_steps": 1, "logging_steps": 1, "save_strategy": "no", "gradient_checkpointing": False,
                  "shuffle_dataset": False}})
    run_dir = tmp_path / "run"
    code, out, err = cli("rl", recipe, "-o", run_dir)
    assert code == 0, err
    assert "tools " in out and "python, lookup, wait" in out

    # What the rewards saw: the whole trajectory of each answer, with the tools' real results.
    records = {}
    for line in seen.read_text().splitlines():
        record = json.loads(line)
        records[record["scenario"].removeprefix("scenario ")] = record
    assert set(records) == set(SCRIPTS)
    multiply = records["multiply"]
    assert [m["role"] for m in multiply["completion"]] == ["assistant", "tool", "assistant"]
    assert multiply["completion"][1]["content"] == "56088\n"  # the sandbox ran the model's code
    assert multiply["calls"] == 1 and multiply["errors"] == 0 and multiply["answer"] == "The answer is 56088."
    assert records["raises"]["errors"] == 1 and "KeyError" in records["raises"]["completion"][1]["content"]
    assert records["hangs"]["errors"] == 1 and "1-second limit" in records["hangs"]["completion"][1]["content"]
    assert records["crashes"]["errors"] == 1 and "ZeroDivisionError" in records["crashes"]["completion"][1]["content"]
    assert records["malformed"]["malformed"] == 1 and records["malformed"]["calls"] == 0
    loops = records["loops"]
    assert [m["role"] for m in loops["completion"]] == ["assistant", "tool"] * 2 + ["assistant"]
    assert not loops["answered"] and loops["answer"] == ""

    # Loss: the tokens the policy wrote carry it, every token of a tool's result does not.
    batch = scripted_policy[0]
    order = [row["prompt"].removeprefix("scenario ") for row in rows for _ in range(2)]
    for scenario, ids, completion_mask, tool_mask in zip(order, batch["completion_ids"], batch["completion_mask"],
                                                          batch["tool_mask"], strict=True):
        length = sum(completion_mask)
        ids, loss_mask = ids[:length], [c * t for c, t in zip(completion_mask[:length], tool_mask[:length], strict=True)]
        trained = [i for i, m in zip(ids, loss_mask, strict=True) if m]
        untrained = tiny_tokenizer.decode([i for i, m in zip(ids, loss_mask, strict=True) if not m])
        turns = SCRIPTS[scenario][:1 + untrained.count("<tool_response>")]
        assert trained == sum((tiny_tokenizer.encode(t, add_special_tokens=False) for t in turns), []), scenario
        assert untrained.count("<tool_response>") == {"malformed": 0, "loops": 2}.get(scenario, 1), scenario
        if scenario == "multiply":
            assert untrained == ("\n<|im_start|>user\n<tool_response>\n56088\n\n</tool_response><|im_end|>\n"
                                 "<|im_start|>assistant\n<think>\n\n</think>\n")

    # The logs count each kind of failure, per answer.
    logged = next(m for m in read_metrics(run_dir) if "tools/timeouts" in m)
    assert logged["tools/timeouts"] == 2  # both answers of "hangs"
    assert logged["tools/max_turns_reached"] == pytest.approx(2 / 12)  # "loops"
    assert logged["tools/malformed_calls"] == pytest.approx(2 / 12)
    assert logged["tools/unanswered"] == pytest.approx(4 / 12)  # "loops" and "malformed" (its call never ran)
    assert logged["tools/errors_per_answer"] == pytest.approx(6 / 12)  # raises, hangs, crashes
    assert logged["rewards/math_accuracy/mean"] == pytest.approx(2 / 12)  # only "multiply" answers 56088
    assert logged["rewards/tool_format/mean"] == pytest.approx((2 * 1.0 + 6 * 0.5) / 12)


ENVIRONMENT = '''
class Counter:
    """A stateful environment: one instance per answer, reset first; its methods are the tools."""

    def __init__(self):
        self.total = None

    def reset(self, **kwargs):
        self.total = 100

    def add(self, amount: int) -> str:
        """Add to the running total and return it.

        Args:
            amount: How much to add.
        """
        self.total += amount
        return str(self.total)

    def get_reward(self) -> float:
        return 1.0 if self.total == 112 else 0.0
'''

COUNTER_SCRIPT = [call("add", {"amount": 5}), call("add", {"amount": 7}), "The total is 112.<|im_end|>"]


def test_an_environments_methods_are_the_tools_and_its_state_lasts_one_answer(cli, write_recipe, long_tiny_dir,
                                                                            tmp_path, tiny_tokenizer, monkeypatch):
    from trl import GRPOTrainer

    def generate(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        turns = [tiny_tokenizer.decode(ids).count("<tool_response>") for ids in prompt_ids]
        return [tiny_tokenizer.encode(COUNTER_SCRIPT[turn], add_special_tokens=False) for turn in turns], None

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", generate)
    (tmp_path / "envs.py").write_text(ENVIRONMENT)
    seen = tmp_path / "seen.jsonl"
    (tmp_path / "recording.py").write_text(RECORDING_REWARD.format(path=str(seen)))
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "scenario count", "solution": "112"}] * 2)
    recipe = write_recipe({
        "stage": "rl", "method": "grpo", "model": {"source": str(long_tiny_dir)},
        "template": {"name": "smollm3", "kwargs": {"enable_thinking": False}},
        "data": {"sources": [{"path": str(data)}]},
        "rewards": [{"name": "math_accuracy"}, {"name": f"{tmp_path}/recording.py:record"}],
        "tools": {"environment": f"{tmp_path}/envs.py:Counter", "max_turns": 3},
        "train": {"num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 400,
                  "max_steps": 1, "logging_steps": 1, "save_strategy": "no", "gradient_checkpointing": False}})
    code, out, err = cli("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    records = [json.loads(line) for line in seen.read_text().splitlines()]
    records = [r for r in records if r["completion"] != [{"role": "assistant", "content": ""}]]  # not the check's call
    assert len(records) == 4
    for record in records:  # every answer's environment started at 100: 105, then 112
        assert [m["content"] for m in record["completion"] if m["role"] == "tool"] == ["105", "112"]
        assert record["answer"] == "The total is 112."
    logged = next(m for m in read_metrics(tmp_path / "run") if "rewards/math_accuracy/mean" in m)
    assert logged["rewards/math_accuracy/mean"] == 1.0
    assert logged["rewards/Counter/mean"] == 1.0  # its get_reward, a reward TRL adds (weight 1) beside the recipe's


@pytest.mark.parametrize("row, refused", [
    ({"prompt": "1+1?", "chat_template_kwargs": {"enable_thinking": True}}, True),
    ({"prompt": [{"role": "system", "content": "/think"}, {"role": "user", "content": "1+1?"}]}, True),
    ({"prompt": [{"role": "system", "content": "Be brief /no_think"}, {"role": "user", "content": "1+1?"}]}, False),
    ({"prompt": "1+1?"}, False),
])
def test_a_row_in_another_mode_than_the_recipes_is_refused_with_tools(cli, write_recipe, tiny_dir, tmp_path, row,
                                                                        refused):
    """TRL renders the turn after a tool result with the recipe's kwargs only: a row in the other mode would answer
    its first turn in one mode and the rest in the other."""
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "2+2?", "solution": "4"}, {**row, "solution": "2"}])
    recipe = write_recipe({
        "stage": "rl", "method": "grpo", "model": {"source": str(tiny_dir)},
        "template": {"name": "smollm3", "kwargs": {"enable_thinking": False}},
        "data": {"sources": [{"path": str(data)}]}, "rewards": [{"name": "math_accuracy"}],
        "tools": {"use": ["python"]}, "generation": {"backend": "transformers"},
        "train": {"num_generations": 2, "per_device_train_batch_size": 2, "max_steps": 1}})
    code, _, err = cli("rl", recipe, "--dry-run")
    if refused:
        assert code == 2 and "prompt row 1: asks for think mode" in err and "recipe's is no_think" in err, err
    else:
        assert code == 0, err
