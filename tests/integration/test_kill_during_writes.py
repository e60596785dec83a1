"""kill -9 at the worst moments, then the same command again: a checkpoint save cut off after the weights and
before the trainer state, a pair generation killed between its pairs file and its report, a conversion killed
halfway through its weights. Nothing already done is lost and nothing half-written is used (harness:
tests/killpoint.py)."""

import json
import threading
from http.server import ThreadingHTTPServer

import pytest
import torch
from json_server import JsonHandler
from killpoint import run_until_killed
from tiny_models import chat_rows, write_jsonl

from smolalign.runs.checkpoint_files import damage


@pytest.mark.slow  # about 40 s on 2 shared CPU cores: two tiny training runs
def test_kill_during_a_checkpoint_save_then_resume(cli, write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(16))
    recipe = str(write_recipe({
        "model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": 64, "max_steps": 4, "per_device_train_batch_size": 2, "save_strategy": "steps",
                  "save_steps": 2, "logging_steps": 1, "gradient_checkpointing": False}}))
    run = tmp_path / "run"
    # checkpoint-4: weights, optimizer and scheduler written, then killed before the RNG and trainer state
    run_until_killed(["sft", recipe, "-o", str(run)], "transformers.trainer:Trainer._save_rng_state",
                     tmp_path / "stopped", on_call=2)
    assert (run / "checkpoint-2" / "trainer_state.json").is_file() and not (run / "model").exists()
    assert (run / "checkpoint-4" / "model.safetensors").is_file()
    assert not (run / "checkpoint-4" / "trainer_state.json").exists()
    assert json.loads((run / "manifest.json").read_text())["stage"] == "sft"  # whole, not torn
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]

    code, out, err = cli("sft", recipe, "-o", str(run), "--resume")
    assert code == 0, err
    assert "skipping damaged checkpoint-4" in err and "resuming from checkpoint-2" in err
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["result"]["global_step"] == 4 and manifest["result"]["resumed_from"] == str(run / "checkpoint-2")
    assert json.loads((run / "checkpoint-4" / "trainer_state.json").read_text())["global_step"] == 4
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps[:2] == [1, 2] and 3 in steps[2:] and 4 in steps[2:]  # steps 1-2 from before the kill, 3-4 after
    assert (run / "model" / "model.safetensors").is_file()

    # the newest checkpoint's weights cut short (a copy or a disk that filled up): named, and the previous one used
    weights = run / "checkpoint-4" / "model.safetensors"
    whole = weights.stat().st_size
    weights.write_bytes(weights.read_bytes()[:-1000])
    code, out, err = cli("sft", recipe, "-o", str(run), "--resume")
    assert code == 0, err
    assert "skipping damaged checkpoint-4" in err and "model.safetensors" in err and "truncated" in err
    assert json.loads((run / "manifest.json").read_text())["result"]["resumed_from"] == str(run / "checkpoint-2")
    assert weights.stat().st_size == whole and damage(run / "checkpoint-4") is None  # saved again, whole


class Answers(JsonHandler):
    """An OpenAI-compatible chat server on 127.0.0.1: "strong" answers, "weak" does not know; it counts requests."""

    requests = 0

    def do_GET(self):
        self._reply({"data": [{"id": "strong"}, {"id": "weak"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Answers.requests += 1
        content = f"{body['messages'][-1]['content']}: 7" if body["model"] == "strong" else "no idea"
        self._reply({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                     "usage": {"completion_tokens": 3}})


@pytest.fixture
def pairs_recipe(write_recipe, tiny_dir, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}"} for i in range(6)])
    generator = {"backend": "openai", "base_url": f"http://127.0.0.1:{server.server_address[1]}/v1", "think": False,
                 "max_new_tokens": 16, "batch_size": 2}
    yield str(write_recipe({
        "model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "dpo",
        "pairs": {"prompts": [{"path": str(prompts)}], "output": str(tmp_path / "out" / "pairs.jsonl"),
                  "strong": {"source": "strong", **generator}, "weak": {"source": "weak", **generator}}}))
    server.shutdown()


def test_kill_between_the_pairs_file_and_its_report(cli, pairs_recipe, tmp_path):
    out = tmp_path / "out"
    run_until_killed(["po", "pairs", pairs_recipe], "smolalign.pairs.build:write_json_atomically",
                     tmp_path / "stopped")
    pairs = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
    assert pairs and not (out / "pairs.jsonl.report.json").exists()
    assert (out / "pairs.jsonl.partial.jsonl").is_file()  # the work log outlives the final write until the report

    requests = Answers.requests
    code, _, err = cli("po", "pairs", pairs_recipe)
    assert code == 0, err
    assert Answers.requests == requests  # every answer came from the work log
    report = json.loads((out / "pairs.jsonl.report.json").read_text())
    assert {side: counts["generated"] for side, counts in report["generated"].items()} == {"strong": 0, "weak": 0}
    assert [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()] == pairs
    assert not (out / "pairs.jsonl.partial.jsonl").exists()
    assert sorted(p.name for p in out.iterdir()) == ["pairs.jsonl", "pairs.jsonl.report.json"]


def test_kill_halfway_through_a_conversion(cli, tiny_dir, tmp_path):
    from nanotron_writer import write_nanotron
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    write_nanotron(model, tmp_path / "pretrain", tp=2, step=100)
    destination = tmp_path / "hf"
    run_until_killed(["convert", str(tmp_path / "pretrain"), str(destination), "--tokenizer", str(tiny_dir)],
                     "smolalign.checkpoints.nanotron_shards:load", tmp_path / "stopped", on_call=4)
    assert not destination.exists()  # the half-written weights stay in the staging folder
    staging = [p for p in tmp_path.iterdir() if p.name.startswith(".hf.staging-")]
    assert len(staging) == 1 and (staging[0] / "model.safetensors").is_file()

    code, _, err = cli("convert", str(tmp_path / "pretrain"), str(destination), "--tokenizer", str(tiny_dir))
    assert code == 0, err
    converted = load_file(destination / "model.safetensors")
    original = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight" or not model.config.tie_word_embeddings}
    assert converted.keys() == original.keys()
    assert all(torch.equal(converted[name], original[name]) for name in original)
