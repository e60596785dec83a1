"""GRPO with tools on vLLM's engine (its CPU build here): a tiny model taught one tool-use conversation writes the
call, TRL's tool loop runs it in the sandbox, and the engine writes the answer after the tool's result. Nothing is
scripted: the calls and the answers are the engine's tokens."""

import json

import pytest
from tiny_models import sft_tiny, write_jsonl

pytest.importorskip("vllm", reason="needs vLLM (make test installs its CPU build)")

SYSTEM = {"role": "system", "content": "/system_override"}  # a short prompt: no metadata, no tools section
CALL = {"type": "function", "function": {"name": "python", "arguments": {"code": "print(123 * 456)"}}}
TEMPLATE = {"name": "smollm3", "kwargs": {"enable_thinking": False}}

RECORDING_REWARD = '''
import json


def record(completions, **kwargs):
    """Writes what it was given, scores nothing."""
    with open({path!r}, "a") as out:
        for completion in completions:
            out.write(json.dumps(completion) + "\\n")
    return [0.0] * len(completions)
'''


@pytest.fixture(scope="module")
def tool_user(vllm_tiny_dir, tmp_path_factory):
    """The vLLM-sized tiny model after SFT on one conversation: the python call, its result, the answer."""
    rows = [{"messages": [SYSTEM, {"role": "user", "content": "what is 123 times 456"},
                          {"role": "assistant", "content": "", "tool_calls": [CALL]},
                          {"role": "tool", "name": "python", "content": "56088\n"},
                          {"role": "assistant", "content": "the answer is 56088."}]}] * 8
    return sft_tiny(vllm_tiny_dir, tmp_path_factory.mktemp("tool-user"), rows, steps=80, template=TEMPLATE,
                    max_length=256)


def test_vllm_writes_the_calls_and_the_answers_of_the_tool_loop(cli_fd, write_recipe, tool_user, tmp_path):
    seen = tmp_path / "seen.jsonl"
    (tmp_path / "recording.py").write_text(RECORDING_REWARD.format(path=str(seen)))
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": [SYSTEM, {"role": "user",
                                                                           "content": "what is 123 times 456"}],
                                                        "solution": "56088"}] * 4)
    recipe = write_recipe({
        "stage": "rl", "method": "grpo", "model": {"source": str(tool_user)}, "template": TEMPLATE,
        "data": {"sources": [{"path": str(prompts)}]},
        "rewards": [{"name": "math_accuracy"}, {"name": f"{tmp_path}/recording.py:record"}],
        "tools": {"use": ["python"], "max_turns": 2}, "generation": {"backend": "vllm_colocate"},
        "train": {"num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 400,  # the call and the result: ~100 tiny-BPE tokens
                  "temperature": 0.1, "max_steps": 1, "logging_steps": 1, "save_strategy": "no",
                  "gradient_checkpointing": False}})
    code, out, err = cli_fd("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err[-3000:]
    trajectories = [json.loads(line) for line in seen.read_text().splitlines()][1:]  # the first: the check's call
    assert len(trajectories) == 4
    for trajectory in trajectories:
        assert [m["role"] for m in trajectory] == ["assistant", "tool", "assistant"], trajectory
        assert trajectory[0]["tool_calls"][0]["function"]["name"] == "python"
        assert trajectory[1]["content"] == "56088\n"  # the sandbox ran the engine's code
        assert "56088" in trajectory[2]["content"]
