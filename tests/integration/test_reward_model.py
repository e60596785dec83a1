"""`model:PATH` rewards: the score of each (prompt, completion), computed in padded batches, equals a direct forward
pass of the same sequence-classification model on the conversation its own chat template renders."""

from pathlib import Path

import pytest
import torch

from rewards.registry import resolve_reward

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def reward_model_dir(tmp_path_factory) -> Path:
    from tiny_models import build_tokenizer
    from transformers import LlamaConfig, LlamaForSequenceClassification

    directory = tmp_path_factory.mktemp("tiny-rm")
    tokenizer = build_tokenizer(directory)
    tokenizer.chat_template = CHATML
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, num_labels=1,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    model = LlamaForSequenceClassification(config)
    torch.nn.init.normal_(model.score.weight, std=1.0)  # scores that differ visibly between texts
    model.save_pretrained(directory)
    return directory


def test_scores_equal_a_direct_forward_pass(reward_model_dir):
    from transformers import AutoTokenizer, LlamaForSequenceClassification

    prompts = [[{"role": "user", "content": "what is 2 plus 3"}],
               [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}],
               "how many are ten and one"]
    completions = ["2 + 3 = 5.", [{"role": "assistant", "content": "hi there, what is the question"}], "eleven"]
    reward = resolve_reward(f"model:{reward_model_dir}", {"batch_size": 2})
    scores = reward(completions=completions, prompts=prompts)

    tokenizer = AutoTokenizer.from_pretrained(reward_model_dir)
    model = LlamaForSequenceClassification.from_pretrained(reward_model_dir, dtype=torch.float32).eval()
    answers = ["2 + 3 = 5.", "hi there, what is the question", "eleven"]
    conversations = [prompts[0], prompts[1], [{"role": "user", "content": prompts[2]}]]
    expected = []
    for messages, answer in zip(conversations, answers, strict=True):
        text = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": answer}], tokenize=False)
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")
        with torch.no_grad():
            expected.append(model(**ids).logits[0, 0].item())
    assert len({round(v, 4) for v in expected}) == 3
    assert scores == pytest.approx(expected, abs=1e-5)


def test_each_row_is_scored_in_its_own_mode(reward_model_dir, tmp_path):
    """A reward gets each row's chat_template_kwargs (rl's think modes, the graded scorer's): the conversation is
    rendered with them, as the reward model was trained (`tests/unit/test_reward_sequences.py`); without them every row
    was rendered in the template's default mode."""
    import shutil

    from transformers import AutoTokenizer, LlamaForSequenceClassification

    moded = tmp_path / "moded-rm"
    shutil.copytree(reward_model_dir, moded)
    tokenizer = AutoTokenizer.from_pretrained(moded)
    tokenizer.chat_template = ("{% if enable_thinking is defined and not enable_thinking %}<|im_start|>system\nno "
                               "thinking<|im_end|>\n{% endif %}" + CHATML)
    tokenizer.save_pretrained(moded)
    prompts = [[{"role": "user", "content": "what is 2 plus 3"}]] * 2
    kwargs = [{"enable_thinking": False}, {"enable_thinking": True}]
    scores = resolve_reward(f"model:{moded}", {})(completions=["5", "5"], prompts=prompts, chat_template_kwargs=kwargs)

    model = LlamaForSequenceClassification.from_pretrained(moded, dtype=torch.float32).eval()
    expected = []
    for mode in kwargs:
        text = tokenizer.apply_chat_template([*prompts[0], {"role": "assistant", "content": "5"}], tokenize=False,
                                             **mode)
        with torch.no_grad():
            expected.append(model(**tokenizer(text, add_special_tokens=False, return_tensors="pt")).logits[0, 0].item())
    assert expected[0] != pytest.approx(expected[1], abs=1e-4)  # the mode changes the conversation scored
    assert scores == pytest.approx(expected, abs=1e-5)


def test_a_relative_path_is_read_from_the_working_directory(reward_model_dir, tmp_path, monkeypatch):
    """`model:runs/…/model` as the shipped recipes write it: relative to where smolalign runs, like model.source."""
    import shutil

    shutil.copytree(reward_model_dir, tmp_path / "runs" / "rm" / "model")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    prompts, completions = ["what is 2 plus 3"], ["2 + 3 = 5."]
    expected = resolve_reward(f"model:{reward_model_dir}")(completions=completions, prompts=prompts)
    monkeypatch.chdir(tmp_path)
    assert resolve_reward("model:runs/rm/model")(completions=completions, prompts=prompts) == pytest.approx(expected)
    monkeypatch.chdir(elsewhere)
    from rewards.errors import RewardError

    with pytest.raises(RewardError, match="runs/rm/model"):
        resolve_reward("model:runs/rm/model")


def test_a_head_with_several_labels_is_refused(reward_model_dir, tmp_path):
    from transformers import AutoConfig

    from rewards.errors import RewardError

    config = AutoConfig.from_pretrained(reward_model_dir)
    config.num_labels = 3
    config.save_pretrained(tmp_path)
    with pytest.raises(RewardError, match="3 labels"):
        resolve_reward(f"model:{tmp_path}")


def test_the_plan_counts_a_reward_model_in_memory(reward_model_dir):
    from transformers import LlamaForSequenceClassification

    from smolalign.estimate.inference import reward_model_parts
    from smolalign.hardware import Hardware
    from smolalign.recipe.generation_schema import RewardSection

    count = sum(p.numel() for p in LlamaForSequenceClassification.from_pretrained(reward_model_dir).parameters())
    cpu = Hardware("cpu", 0, "", False, 1, 2)
    name = f"model:{reward_model_dir}"
    assert reward_model_parts([RewardSection(name), RewardSection("math_accuracy")], cpu) == {
        f"reward model {name}": count * 4}
    # a CPU with bf16 too: the reward model loads float32 on every CPU (rewards/reward_model.py), as counted
    bf16_cpu = Hardware("cpu", 0, "", True, 1, 2)
    assert reward_model_parts([RewardSection(name)], bf16_cpu) == {f"reward model {name}": count * 4}
    assert reward_model_parts([RewardSection(name, params={"dtype": "bfloat16"})],
                              Hardware("cuda", 1, "H100", True, 1, 2)) == {f"reward model {name}": count * 2}


def test_grpo_trains_on_a_reward_model(cli, write_recipe, tiny_dir, reward_model_dir, tmp_path):
    from tiny_models import write_jsonl

    from smolalign.runs.metrics import read_metrics

    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}"} for i in range(8)])
    recipe = write_recipe({
        "model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "grpo",
        "data": {"sources": [{"path": str(data)}]}, "rewards": [{"name": f"model:{reward_model_dir}"}],
        "train": {"num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 8, "max_steps": 2,
                  "logging_steps": 1, "save_strategy": "no", "gradient_checkpointing": False}})
    code, out, err = cli("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    rewards = [m["reward"] for m in read_metrics(tmp_path / "run") if "reward" in m]
    assert len(rewards) == 2 and all(isinstance(r, float) and r == r for r in rewards)


@pytest.fixture
def judge_server(tmp_path):
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    record = tmp_path / "judge.jsonl"
    standin = Path(__file__).resolve().parents[1] / "standins" / "openai_chat"
    process = subprocess.Popen([sys.executable, str(standin), str(port)], stdout=subprocess.PIPE, text=True,
                               env={"STANDIN_RECORD": str(record), "PATH": "/usr/bin:/bin"})
    assert process.stdout.readline().strip() == "ready"
    yield f"http://127.0.0.1:{port}/v1", record
    process.kill()
    process.wait()


def test_eval_scores_with_a_judge_and_a_reward_model_and_reruns_from_the_judge_cache(
        cli, tiny_dir, reward_model_dir, judge_server, tmp_path):
    import json

    from tiny_models import write_jsonl

    url, record = judge_server
    # The stand-in scores how often "good" appears in the filled rubric: i times in prompt i, so that the expected
    # scores differ (0, 1, 2 and whatever the answers add) and a judge whose answer is not read cannot match them.
    data = write_jsonl(tmp_path / "q.jsonl", [{"prompt": "good " * i + f"what is {i} plus {i}"} for i in range(3)])
    judge = {"base_url": url, "model": "judge", "rubric": "Q: {prompt}\nA: {completion}\nRate it: Score: N.",
             "cache_dir": str(tmp_path / "judge-cache")}
    reward_model = f"model:{reward_model_dir}"
    args = ("eval", f"q={tiny_dir}", "--data", data, "--reward", f"judge,{reward_model}", "--params",
            f"judge={json.dumps(judge)}", "--modes", "no_think", "--samples", "2", "--max-new-tokens", "6",
            "--temperature", "1.0", "--seed", "3")
    code, _, err = cli(*args, "--json", tmp_path / "a.json")
    assert code == 0, err
    rows = [json.loads(line) for line in (tmp_path / "a.samples.jsonl").read_text().splitlines()]
    asked = record.read_text().splitlines()
    assert len(rows) == 6 and len(asked) == 6
    # the stand-in's score: how often "good" appears in the rubric as filled in (the prompt and the answer)
    for row in rows:
        index = int(row["prompt"].rsplit("#", 1)[1])  # q.jsonl#i: prompt i holds "good" i times
        expected = index + row["turn"].lower().split().count("good")
        assert row["rewards"]["judge"] == float(expected)
        assert isinstance(row["rewards"][reward_model], float)
    assert len({row["rewards"]["judge"] for row in rows}) >= 3
    code, _, err = cli(*args, "--json", tmp_path / "b.json")
    assert code == 0, err
    assert len(record.read_text().splitlines()) == 6  # every answer came from the cache
    again = [json.loads(line) for line in (tmp_path / "b.samples.jsonl").read_text().splitlines()]
    assert [r["rewards"] for r in again] == [r["rewards"] for r in rows]
