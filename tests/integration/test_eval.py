"""`smolalign eval`: metrics checked against hand-computed values on completions served by a local OpenAI-compatible
server, bad input refused before any model loads, seeded reruns on a tiny model, and the `eval:` section of a
recipe."""

import json
import threading
from collections import defaultdict
from http.server import ThreadingHTTPServer

import pytest
from json_server import JsonHandler
from tiny_models import chat_rows, write_jsonl

from smolalign.runs.metrics import read_metrics

QUESTIONS = {"What is 2 + 3?": "5", "What is 4 + 4?": "8", "What is 10 - 1?": "9", "Say hi.": ""}
"""Prompt -> solution; "" does not parse as a math answer, so math_accuracy gives None for that prompt."""

# (text, finish_reason, completion_tokens) per model, prompt, mode and sample. The server answers a prompt's k-th
# request in a mode with its k-th sample; every metric is symmetric in the samples of a prompt, so the order in
# which concurrent requests arrive does not matter.
GOOD = {
    ("What is 2 + 3?", "think"): [("<think>\n2 + 3 = 5\n</think>\nThe answer is 5.", "stop", 10),
                                  ("<think>\nhmm\n</think>\nThe answer is 6.", "stop", 8)],
    ("What is 4 + 4?", "think"): [("<think>\n4 + 4 is 8 so", "length", 16), ("The answer is 8.", "stop", 6)],
    ("What is 10 - 1?", "think"): [("<think>\n10 - 1 = 9\n</think>\n9", "stop", 7)] * 2,
    ("Say hi.", "think"): [("<think>\ngreet\n</think>\nhi", "stop", 4)] * 2,
    ("What is 2 + 3?", "no_think"): [("5", "stop", 2)] * 2,
    ("What is 4 + 4?", "no_think"): [("<think>\n4 + 4\n</think>\n8", "stop", 9), ("8", "stop", 2)],
    ("What is 10 - 1?", "no_think"): [("", "stop", 1), ("9", "stop", 2)],
    ("Say hi.", "no_think"): [("hi", "stop", 1)] * 2,
}
# Hand-computed from the table above (no_think turns start with the empty think block the smollm3 template
# prefills; "Say hi." has no math score, so math metrics average over the other three prompts):
EXPECTED_GOOD = {
    "think": {"math_accuracy mean": 2 / 3, "math_accuracy avg@2": 2 / 3, "math_accuracy pass@2": 1.0,
              "think_format mean": 0.75, "compliance": 0.75, "truncation": 0.125, "length": 7.75},
    "no_think": {"math_accuracy mean": 2.5 / 3, "math_accuracy avg@2": 2.5 / 3, "math_accuracy pass@2": 1.0,
                 "think_format mean": 0.75, "compliance": 0.75, "truncation": 0.0, "length": 2.5},
}
# The baseline answers "I don't know." (3 tokens) to everything: wrong, no think block in think mode, and a
# compliant no_think answer (prefilled empty block + an answer).
EXPECTED_BASE = {
    "think": {"math_accuracy mean": 0.0, "math_accuracy pass@2": 0.0, "compliance": 0.0, "truncation": 0.0,
              "length": 3.0},
    "no_think": {"math_accuracy mean": 0.0, "compliance": 1.0, "think_format mean": 1.0, "length": 3.0},
}


class Served(JsonHandler):
    requests: list[dict] = []
    counts: dict = defaultdict(int)
    lock = threading.Lock()

    def do_GET(self):
        self._reply({"data": [{"id": "good"}, {"id": "base"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        question = body["messages"][-1]["content"]
        mode = "think" if body["chat_template_kwargs"]["enable_thinking"] else "no_think"
        with Served.lock:
            Served.requests.append(body)
            index = Served.counts[body["model"], question, mode]
            Served.counts[body["model"], question, mode] += 1
        text, finish, tokens = GOOD[question, mode][index] if body["model"] == "good" else ("I don't know.", "stop", 3)
        self._reply({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                     "usage": {"completion_tokens": tokens}})


@pytest.fixture
def server():
    Served.requests, Served.counts = [], defaultdict(int)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Served)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


@pytest.fixture
def questions(tmp_path):
    # The first prompt's system flag must not decide its mode: the evaluation does.
    rows = [{"prompt": [{"role": "system", "content": "Be brief. /no_think"}, {"role": "user", "content": q}]
             if i == 0 else q, "solution": s} for i, (q, s) in enumerate(QUESTIONS.items())]
    return write_jsonl(tmp_path / "questions.jsonl", rows)


def served_eval(cli, server, questions, out, *extra):
    return cli("eval", "good", "--baseline", "base", "--backend", "openai", "--base-url", server, "--data", questions,
               "--reward", "math_accuracy,think_format", "--samples", "2", "--max-new-tokens", "16",
               "--json", out, *extra)


def test_metrics_match_hand_computed_values(cli, server, questions, tmp_path):
    code, out, err = served_eval(cli, server, questions, tmp_path / "eval.json", "--markdown", tmp_path / "t.md",
                                 "--chart", tmp_path / "chart.png")
    assert code == 0, err
    report = json.loads((tmp_path / "eval.json").read_text())
    assert [m["label"] for m in report["models"]] == ["base", "good"] and report["baseline"] == "base"
    assert report["prompts"] == 4 and report["samples"] == 2
    for label, expected in (("good", EXPECTED_GOOD), ("base", EXPECTED_BASE)):
        for mode, metrics in expected.items():
            for name, value in metrics.items():
                assert report["results"][label][mode][name]["value"] == pytest.approx(value), (label, mode, name)
    differences = report["differences"]["good"]
    assert differences["think"]["math_accuracy mean"]["value"] == pytest.approx(2 / 3)
    assert differences["think"]["compliance"]["value"] == pytest.approx(0.75)
    assert differences["no_think"]["compliance"]["value"] == pytest.approx(-0.25)
    assert differences["think"]["length"]["value"] == pytest.approx(4.75)
    assert "base" not in report["differences"]

    # Each mode's requests carry its enable_thinking, the sampling settings, and a distinct seed per sample.
    assert len(Served.requests) == 2 * 2 * 4 * 2  # models × modes × prompts × samples
    assert {r["max_tokens"] for r in Served.requests} == {16} and {r["temperature"] for r in Served.requests} == {0.6}
    good_think = [r for r in Served.requests if r["model"] == "good" and r["chat_template_kwargs"]["enable_thinking"]]
    assert len({r["seed"] for r in good_think}) == 8
    assert all(r["messages"][0]["content"] == "Be brief." for r in Served.requests if len(r["messages"]) == 2)

    samples = [json.loads(line) for line in (tmp_path / "eval.samples.jsonl").read_text().splitlines()]
    assert len(samples) == 32
    empty = [s for s in samples if s["model"] == "good" and s["mode"] == "no_think" and s["tokens"] == 1
             and s["prompt"].endswith("#2")]
    assert empty[0]["turn"] == "<think>\n\n</think>\n" and not empty[0]["compliant"]
    assert "| math_accuracy avg@2 |" in (tmp_path / "t.md").read_text()
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "difference to base, paired by prompt" in out and "good − base" in out


def test_each_model_can_be_compared_with_its_own_baseline(cli, server, questions, tmp_path):
    """--compare LABEL=BASE: differences to another model than --baseline (a stage to its own input)."""
    out = tmp_path / "eval.json"
    code, _, err = cli("eval", "base", "good", "again=base", "--backend", "openai", "--base-url", server, "--data",
                       questions, "--reward", "math_accuracy,think_format", "--samples", "2", "--max-new-tokens", "16",
                       "--compare", "base=good", "--compare", "again=base", "--json", out, "--markdown",
                       tmp_path / "t.md")
    assert code == 0, err
    report = json.loads(out.read_text())
    assert report["compared_to"] == {"base": "good", "again": "base"} and set(report["differences"]) == {"base", "again"}
    think = report["differences"]["base"]["think"]
    assert think["math_accuracy mean"]["value"] == pytest.approx(-2 / 3)
    assert think["compliance"]["value"] == pytest.approx(-0.75)
    assert think["length"]["value"] == pytest.approx(-4.75)
    same = report["differences"]["again"]["no_think"]
    assert same["math_accuracy mean"]["value"] == same["length"]["value"] == 0.0
    assert "| metric | base − good | again − base |" in (tmp_path / "t.md").read_text()
    # With --baseline, a model --compare does not name is compared with the baseline.
    Served.counts.clear()
    code, _, err = cli("eval", "base", "good", "again=base", "--backend", "openai", "--base-url", server, "--data",
                       questions, "--reward", "math_accuracy,think_format", "--samples", "2", "--max-new-tokens", "16",
                       "--baseline", "good", "--compare", "again=base", "--json", out)
    assert code == 0, err
    mixed = json.loads(out.read_text())
    assert mixed["compared_to"] == {"base": "good", "again": "base"}
    assert mixed["differences"]["base"]["think"]["compliance"]["value"] == pytest.approx(-0.75)


def test_intervals_contain_the_estimate_and_repeat_for_a_seed(cli, server, questions, tmp_path):
    reports = []
    for name, seed in (("a", "0"), ("b", "0"), ("c", "1")):
        Served.counts.clear()
        code, _, err = served_eval(cli, server, questions, tmp_path / f"{name}.json", "--seed", seed)
        assert code == 0, err
        reports.append(json.loads((tmp_path / f"{name}.json").read_text()))
    for table in (reports[0]["results"]["good"], reports[0]["differences"]["good"]):
        for metrics in table.values():
            for estimate in metrics.values():
                assert estimate["low"] - 1e-12 <= estimate["value"] <= estimate["high"] + 1e-12
    assert reports[0]["results"] == reports[1]["results"]
    assert reports[0]["differences"] == reports[1]["differences"]
    assert reports[2]["results"]["good"]["think"]["length"] != reports[0]["results"]["good"]["think"]["length"]
    # A metric with the same value on every prompt has no spread to resample.
    assert reports[0]["results"]["base"]["think"]["length"] == {"value": 3.0, "low": 3.0, "high": 3.0}


@pytest.fixture
def no_model_loads(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")

    # Both imported before either is patched: one first imported under the patch would bind the refusal for good
    # (`from ... import load_model`), and the patch would then "restore" it, failing later tests in this process.
    import smolalign.pairs.backends  # noqa: F401

    for module in ("smolalign.models.load", "smolalign.pairs.backends"):  # where they are defined and where eval's
        monkeypatch.setattr(f"{module}.load_model", refuse)            # generators call them
        monkeypatch.setattr(f"{module}.load_tokenizer", refuse)


@pytest.mark.parametrize(("args", "message"), [
    (["--reward", "math_accuracy", "--data", "{unsolved}"], "reads the column 'solution'"),
    (["--reward", "math_accuracy", "--modes", "think,thinking"], "unknown mode 'thinking'"),
    (["--reward", "math_accuracy", "--samples", "0"], "samples (K) must be at least 1"),
    (["--reward", "math_acuracy"], "unknown reward 'math_acuracy' (did you mean math_accuracy?)"),
    (["--reward", "math_accuracy", "--template", "smolm3"], "unknown template 'smolm3'"),
    (["--reward", "math_accuracy", "--params", 'math_accuracy={"gold": "x"}'], "unknown parameter 'gold'"),
    (["--reward", "math_accuracy", "--params", "math_accuracy=[1]"], "expected a JSON object"),
    (["--reward", "math_accuracy", "--params", "think_format={}"], "NAME one of the rewards (math_accuracy)"),
    (["--reward", "math_accuracy", "--threshold", "math_accuracy=high"], "'high' is not a number"),
    (["--reward", "math_accuracy", "--backend", "vllm2"], "unknown backend 'vllm2'"),
    (["--reward", "math_accuracy", "--backend", "openai"], "backend openai needs base_url"),
    (["--reward", "math_accuracy", "--compare", "po=sft"], "--compare po=sft: expected two different model labels"),
    (["--reward", "math_accuracy", "--compare", "po"], "--compare 'po': expected LABEL=BASE"),
])
def test_bad_input_exits_2_before_any_model_loads(cli, tiny_dir, questions, tmp_path, no_model_loads, args, message):
    unsolved = write_jsonl(tmp_path / "unsolved.jsonl", [{"prompt": "What is 1 + 1?"}])
    args = [str(unsolved) if a == "{unsolved}" else a for a in args]
    if "--data" not in args:
        args += ["--data", str(questions)]
    code, out, err = cli("eval", tiny_dir, *args)
    assert code == 2 and message in err and "Traceback" not in err, err


def test_a_missing_model_exits_2(cli, questions, tmp_path, no_model_loads):
    code, _, err = cli("eval", tmp_path / "nowhere", "--data", questions, "--reward", "think_format")
    assert code == 2 and "nowhere" in err


def test_seeded_reruns_on_cpu_give_identical_numbers(cli, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "q.jsonl", [{"prompt": f"what is {i} plus {i}", "solution": str(2 * i)}
                                              for i in range(3)])
    args = ["eval", tiny_dir, "--data", data, "--reward", "math_accuracy,think_format", "--samples", "2",
            "--max-new-tokens", "6", "--temperature", "1.0", "--batch-size", "4"]
    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        code, _, err = cli(*args, "--seed", seed, "--json", tmp_path / f"{name}.json")
        assert code == 0, err
    texts = {name: (tmp_path / f"{name}.samples.jsonl").read_text() for name in "abc"}
    reports = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in "abc"}
    assert texts["a"] == texts["b"] and reports["a"]["results"] == reports["b"]["results"]
    assert texts["c"] != texts["a"]
    rows = [json.loads(line) for line in texts["a"].splitlines()]
    assert len(rows) == 3 * 2 * 2 and all(1 <= r["tokens"] <= 6 for r in rows)
    assert all(r["turn"].startswith("<think>\n\n</think>\n") for r in rows if r["mode"] == "no_think")


def test_reward_parameters_thresholds_and_token_ids(cli, tiny_dir, tmp_path):
    from rewards.length import soft_overlong

    data = write_jsonl(tmp_path / "q.jsonl", [{"prompt": f"what is {i} plus {i}"} for i in range(4)])
    code, _, err = cli("eval", f"q={tiny_dir}", "--data", data, "--reward", "soft_overlong", "--params",
                       'soft_overlong={"max_length": 6, "cache": 3}', "--threshold", "soft_overlong=0",
                       "--modes", "no_think", "--samples", "2", "--max-new-tokens", "8", "--temperature", "1.0",
                       "--json", tmp_path / "e.json")
    assert code == 0, err
    rows = [json.loads(line) for line in (tmp_path / "e.samples.jsonl").read_text().splitlines()]
    # The length reward counted the generated token ids (end of turn included), the same count as `tokens`.
    expected = [soft_overlong(r["tokens"], 6, 3) for r in rows]
    assert [r["rewards"]["soft_overlong"] for r in rows] == pytest.approx(expected)
    report = json.loads((tmp_path / "e.json").read_text())
    solved = sum(r["tokens"] <= 3 for r in rows) / len(rows)   # reward >= 0 up to max_length - cache tokens
    assert report["results"]["q"]["no_think"]["soft_overlong avg@2"]["value"] == pytest.approx(solved)
    assert report["settings"]["rewards"] == [{"name": "soft_overlong", "params": {"max_length": 6, "cache": 3},
                                              "threshold": 0.0}]


def test_eval_section_writes_before_and_after(cli, write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    held_out = write_jsonl(tmp_path / "held_out.jsonl", [{"prompt": f"what is {i} plus 1", "solution": str(i + 1)}
                                                         for i in range(3)])
    recipe = write_recipe({
        "model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"}, "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": 256, "per_device_train_batch_size": 2, "max_steps": 2, "learning_rate": 1e-3,
                  "logging_steps": 1, "save_strategy": "no", "gradient_checkpointing": False},
        "eval": {"data": [{"path": str(held_out)}], "rewards": [{"name": "math_accuracy"}],
                 "modes": ["no_think"], "samples": 1, "max_new_tokens": 4, "temperature": 0.0}})
    code, out, err = cli("sft", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    report = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert [m["label"] for m in report["models"]] == ["before", "after"] and report["baseline"] == "before"
    assert report["models"][1]["source"] == str(tmp_path / "run" / "model")
    assert set(report["results"]) == {"before", "after"} and report["modes"] == ["no_think"]
    assert "compliance" in report["differences"]["after"]["no_think"]
    assert (tmp_path / "run" / "eval.samples.jsonl").is_file()
    assert "after − before" in out and "eval: when the stage ends, 3 prompts × 1 in no_think" in out

    # Cut off in its evaluation (the model saved, no eval.json): --resume evaluates it and trains nothing.
    run_dir = tmp_path / "run"
    (run_dir / "eval.json").unlink()
    weights = {p.name: p.stat().st_mtime_ns for p in (run_dir / "model").iterdir() if p.name != "README.md"}
    code, out, err = cli("sft", recipe, "-o", run_dir, "--resume", "--dry-run")
    assert code == 0 and "cut off in its eval: section: the run would evaluate it, with no step trained" in err, err
    code, out, err = cli("sft", recipe, "-o", run_dir, "--resume")
    assert code == 0 and "cut off in its eval: section: evaluating it, with no step trained" in err, err
    assert json.loads((run_dir / "eval.json").read_text())["results"].keys() == {"before", "after"}
    assert {p.name: p.stat().st_mtime_ns for p in (run_dir / "model").iterdir() if p.name != "README.md"} == weights
    assert "## Evaluation" in (run_dir / "model" / "README.md").read_text()


def test_eval_section_is_checked_before_training(cli, write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(4))
    recipe = {"model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": str(data)}]},
              "train": {"max_steps": 1},
              "eval": {"data": [{"path": str(data)}], "rewards": [{"name": "math_accuracy"}]}}
    code, _, err = cli("sft", write_recipe(recipe), "--dry-run")
    assert code == 2 and "reads the column 'solution'" in err
    recipe["eval"]["modes"] = ["thinking"]
    code, _, err = cli("sft", write_recipe(recipe), "--dry-run")
    assert code == 2 and "eval: unknown mode 'thinking'" in err
    recipe["eval"] = {"data": [{"path": str(data)}], "rewards": [{"name": "think_format"}], "sample": 2}
    code, _, err = cli("sft", write_recipe(recipe), "--dry-run")
    assert code == 2 and "unknown key eval.sample (did you mean samples?)" in err


def test_a_run_cut_off_in_its_eval_trains_on_when_its_max_steps_is_raised(cli, write_recipe, tiny_dir, tmp_path):
    """The evaluation-only resume is for a run with nothing left to train: a raised train.max_steps trains on from
    the last checkpoint, then evaluates."""
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    held_out = write_jsonl(tmp_path / "held_out.jsonl", [{"prompt": "what is 1 plus 1", "solution": "2"}])
    recipe = write_recipe({
        "model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"}, "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": 256, "per_device_train_batch_size": 2, "max_steps": 2, "save_steps": 2,
                  "logging_steps": 1, "gradient_checkpointing": False},
        "eval": {"data": [{"path": str(held_out)}], "rewards": [{"name": "math_accuracy"}], "before": False,
                 "modes": ["no_think"], "samples": 1, "max_new_tokens": 4, "temperature": 0.0}})
    run_dir = tmp_path / "run"
    code, _, err = cli("sft", recipe, "-o", run_dir)
    assert code == 0, err
    (run_dir / "eval.json").unlink()
    code, _, err = cli("sft", recipe, "-o", run_dir, "--resume", "--set", "train.max_steps=3", "--set",
                       "train.save_steps=3")
    assert code == 0, err
    assert "cut off in its eval: section" not in err
    assert max(m["step"] for m in read_metrics(run_dir) if "loss" in m) == 3 and (run_dir / "eval.json").is_file()
