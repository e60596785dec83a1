"""reasoning-gym through the commands people run: `smolalign eval` on a `reasoning_gym:TASK` source with the
`reasoning_gym` reward (answers served by a local OpenAI-compatible server, scored as the task's own scorer scores
them; and a tiny model's own answers), and `smolalign sweep` of a GRPO recipe that trains on a task and evaluates on
held-out rows of it."""

import json
import re
import threading
from http.server import ThreadingHTTPServer

import pytest
import reasoning_gym
from json_server import JsonHandler

SUMS = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 2}
DATA = "reasoning_gym:chain_sum {size: 6, seed: 77, config: {min_terms: 2, max_terms: 2, min_digits: 1, max_digits: 2}}"
QUESTION = re.compile(r"problem: (\d+) ([+-]) (\d+) =$")


def summed(question: str) -> int:
    a, sign, b = QUESTION.search(question).groups()
    return int(a) + int(b) if sign == "+" else int(a) - int(b)


ANSWERS = {"tagged": lambda s: f"<answer>{s}</answer>", "chatty": lambda s: f"The answer is {s}.",
           "off_by_one": lambda s: str(s + 1)}
"""What each served model answers to a sum (computed by the server from the question)."""


class Served(JsonHandler):
    def do_GET(self):
        self._reply({"data": [{"id": name} for name in ANSWERS]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = ANSWERS[body["model"]](summed(body["messages"][-1]["content"]))
        self._reply({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                     "usage": {"completion_tokens": 4}})


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Served)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def test_eval_scores_served_answers_as_the_task_does(cli, server, tmp_path):
    out = tmp_path / "eval.json"
    code, _, err = cli("eval", *ANSWERS, "--backend", "openai", "--base-url", server, "--data", DATA, "--reward",
                       "reasoning_gym", "--modes", "no_think", "--json", out)
    assert code == 0, err
    results = json.loads(out.read_text())["results"]
    dataset = reasoning_gym.create_dataset("chain_sum", seed=77, size=6, **SUMS)
    entries = [dataset[i] for i in range(6)]
    assert [summed(e["question"]) for e in entries] == [int(e["answer"]) for e in entries]  # the server is right
    extracted = {"tagged": lambda s: str(s), "chatty": ANSWERS["chatty"], "off_by_one": ANSWERS["off_by_one"]}
    for model, extract in extracted.items():
        want = sum(dataset.score_answer(extract(int(e["answer"])), e) for e in entries) / 6
        assert results[model]["no_think"]["reasoning_gym mean"]["value"] == pytest.approx(want), model
    assert results["tagged"]["no_think"]["reasoning_gym mean"]["value"] == 1.0
    assert 0 < results["chatty"]["no_think"]["reasoning_gym mean"]["value"] < 0.5
    assert results["off_by_one"]["no_think"]["reasoning_gym mean"]["value"] == 0.0


def test_eval_of_a_tiny_models_answers(cli, tiny_dir, tmp_path):
    out = tmp_path / "eval.json"
    code, _, err = cli("eval", tiny_dir, "--data", DATA, "--reward", "reasoning_gym", "--modes", "think,no_think",
                       "--samples", "2", "--max-new-tokens", "8", "--temperature", "1.0", "--json", out)
    assert code == 0, err
    dataset = reasoning_gym.create_dataset("chain_sum", seed=77, size=6, **SUMS)
    samples = [json.loads(line) for line in (tmp_path / "eval.samples.jsonl").read_text().splitlines()]
    assert len(samples) == 6 * 2 * 2
    for sample in samples:
        index = int(sample["prompt"].rpartition("#")[2])
        assert sample["prompt"] == f"reasoning_gym:chain_sum#{index}"
        turn = sample["turn"]
        answer = None if "<think>" in turn and "</think>" not in turn else turn.split("</think>")[-1].strip()
        assert sample["rewards"]["reasoning_gym"] == dataset.score_answer(answer, dataset[index]), turn


@pytest.fixture
def rl_sweep_recipe(write_recipe, tiny_dir):
    source = {"path": "reasoning_gym:chain_sum", "config": SUMS}
    return write_recipe({
        "model": {"source": str(tiny_dir)}, "template": {"name": "smollm3", "kwargs": {"enable_thinking": False}},
        "method": "grpo", "data": {"sources": [{**source, "size": 8, "seed": 0}]},
        "rewards": [{"name": "reasoning_gym"}],
        "train": {"num_generations": 4, "per_device_train_batch_size": 8, "max_completion_length": 8, "max_steps": 1,
                  "learning_rate": 1e-3, "logging_steps": 1, "save_strategy": "no", "gradient_checkpointing": False},
        "eval": {"data": [{**source, "size": 3, "seed": 500}], "rewards": [{"name": "reasoning_gym"}],
                 "modes": ["no_think"], "samples": 1, "max_new_tokens": 6, "temperature": 1.0}})


def test_sweep_trains_on_a_task_and_evaluates_on_held_out_rows(cli, rl_sweep_recipe, tmp_path):
    out_dir = tmp_path / "sweep"
    # One cell: each cell is a process of its own (tests/integration/test_sweep.py covers comparing several).
    code, _, err = cli("sweep", rl_sweep_recipe, "--grid", "train.learning_rate=0.001", "-o", out_dir)
    assert code == 0, err
    sweep = json.loads((out_dir / "sweep.json").read_text())
    assert [row["cell"] for row in sweep["rows"]] == ["train.learning_rate=0.001"]
    for row in sweep["rows"]:
        cell = out_dir / row["cell"]
        steps = [json.loads(line) for line in (cell / "metrics.jsonl").read_text().splitlines()]
        logged = [m["rewards/reasoning_gym/mean"] for m in steps if "rewards/reasoning_gym/mean" in m]
        assert len(logged) == 1 and logged[0] is not None and 0.0 <= logged[0] <= 1.0  # None: no answer was scored
        assert "reasoning_gym mean" in row["metrics"]["no_think"]
        prompts = {json.loads(line)["prompt"] for line in (cell / "eval.samples.jsonl").read_text().splitlines()}
        assert prompts == {f"reasoning_gym:chain_sum#{i}" for i in range(3)}
