"""Offline generation with the real vLLM engine (its CPU build, the same 0.31 release as the image's) from the CLI:
`eval --backend vllm` answers greedily what the transformers backend answers, token for token, on the same model in
the same precision, and agrees with it within sampling noise at temperature 1; `po pairs` with the vllm backend on
both sides (strong vs weak) and graded (one request per prompt for n samples, the chosen and rejected answers
exactly the scorer's best and worst of what the engine returned); and one engine evaluating two checkpoints of one
model draws, for each, the answers an engine of its own draws."""

import json
import random
import shutil

import pytest
from tiny_models import sft_tiny, write_jsonl

QUESTIONS = [{"prompt": f"what is {i} plus {i + 1}", "solution": str(2 * i + 1)} for i in range(6)]


@pytest.fixture(scope="module")
def talker(vllm_tiny_dir, tmp_path_factory):
    """The vLLM-sized tiny model after a few dozen SFT steps on short sums: it answers, then ends its turn."""
    rng = random.Random(0)
    rows = []
    for _ in range(64):
        a, b = rng.randint(1, 20), rng.randint(1, 20)
        rows.append({"messages": [{"role": "user", "content": f"what is {a} plus {b}"},
                                  {"role": "assistant", "content": f"{a} + {b} = {a + b}."}]})
    return sft_tiny(vllm_tiny_dir, tmp_path_factory.mktemp("vllm-talker"), rows, steps=40)


@pytest.fixture
def engine_calls(monkeypatch):
    """Every vllm.LLM.generate call: how many requests, the sampling parameters, and how many outputs each got."""
    from vllm import LLM

    calls, original = [], LLM.generate

    def recording(self, prompts, sampling_params=None, *args, **kwargs):
        outputs = original(self, prompts, sampling_params, *args, **kwargs)
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        assert len({p.n for p in params}) == 1 and len({p.temperature for p in params}) == 1
        calls.append({"requests": len(prompts), "n": params[0].n, "temperature": params[0].temperature,
                      "seeds": [p.seed for p in params], "outputs": [len(o.outputs) for o in outputs]})
        return outputs

    monkeypatch.setattr(LLM, "generate", recording)
    return calls


def samples(path) -> dict:
    return {(r["prompt"], r["mode"], r["sample"]): r for r in map(json.loads, path.read_text().splitlines())}


def test_greedy_vllm_answers_are_the_transformers_answers(cli_fd, talker, tmp_path, engine_calls):
    data = write_jsonl(tmp_path / "q.jsonl", QUESTIONS)
    common = ("eval", f"m={talker}", "--data", data, "--reward", "math_accuracy", "--template", "chatml",
              "--modes", "no_think", "--temperature", "0", "--max-new-tokens", "16")
    for backend in ("transformers", "vllm"):
        code, _, err = cli_fd(*common, "--backend", backend, "--json", tmp_path / f"{backend}.json")
        assert code == 0, err
    assert engine_calls and all(c["requests"] == len(QUESTIONS) for c in engine_calls)  # the engine generated
    hf, vllm = samples(tmp_path / "transformers.samples.jsonl"), samples(tmp_path / "vllm.samples.jsonl")
    assert hf.keys() == vllm.keys() and len(hf) == len(QUESTIONS)
    for key, row in hf.items():
        assert (vllm[key]["turn"], vllm[key]["tokens"], vllm[key]["finished"]) == \
            (row["turn"], row["tokens"], row["finished"]), key
    assert any(row["finished"] and row["turn"].strip() for row in hf.values())  # real answers, not all cut off


def test_sampled_vllm_answers_come_from_smolaligns_draw_and_repeat(cli_fd, talker, tmp_path, monkeypatch):
    """At the quickstart's evaluation settings (temperature 0.6, top-p 0.95, a seed per prompt) the engine samples
    through smolalign's CPU sampler: its nucleus search and its one-number draw ran for every sequence's tokens; the
    same seed draws the same answers again in a new engine, another seed other answers."""
    import smolalign.generation.vllm_cpu_sampler as sampler

    nuclei, nucleus = [], sampler.nucleus
    draws, inverse_cdf = [], sampler.inverse_cdf

    def counted_nucleus(logits, top_p):
        nuclei.append(len(logits))
        return nucleus(logits, top_p)

    def counted_draw(probs, uniforms):
        draws.append(len(probs))
        return inverse_cdf(probs, uniforms)

    monkeypatch.setattr(sampler, "nucleus", counted_nucleus)
    monkeypatch.setattr(sampler, "inverse_cdf", counted_draw)
    data = write_jsonl(tmp_path / "q.jsonl", QUESTIONS * 2)
    common = ("eval", f"m={talker}", "--data", data, "--reward", "math_accuracy", "--template", "chatml",
              "--modes", "no_think", "--temperature", "0.6", "--top-p", "0.95", "--samples", "2",
              "--max-new-tokens", "16", "--backend", "vllm")
    for name, seed in (("first", 0), ("again", 0), ("other", 1)):
        code, _, err = cli_fd(*common, "--seed", str(seed), "--json", tmp_path / f"{name}.json")
        assert code == 0, err
    sequences = 2 * len(QUESTIONS) * 2
    assert nuclei and sum(nuclei) >= 3 * sequences  # every sequence's first token, at least
    assert sum(draws) == sum(nuclei)  # each row of each step drawn once, by the draw from one number
    first, again, other = (samples(tmp_path / f"{name}.samples.jsonl") for name in ("first", "again", "other"))
    assert first.keys() == again.keys() == other.keys() and len(first) == sequences
    tokens = {name: {k: r["tokens"] for k, r in run.items()} for name, run in (("first", first), ("again", again),
                                                                                ("other", other))}
    assert tokens["first"] == tokens["again"]
    assert tokens["first"] != tokens["other"]
    assert len({r["turn"] for r in first.values()}) > 2  # sampled answers that differ


ODD_SHARE = """
def odd_share(completions, completion_ids, **kwargs):
    \"\"\"The share of an answer's tokens with an odd id: a statistic of the sampling distribution itself.\"\"\"
    return [sum(i % 2 for i in ids) / max(len(ids), 1) for ids in completion_ids]
"""


def test_sampled_vllm_metrics_agree_with_transformers_within_noise(cli_fd, vllm_tiny_dir, tmp_path):
    """At temperature 1 both engines sample the model's own distribution: a statistic of the sampled tokens agrees
    within its sampling noise (4 standard errors of the difference), while greedy decoding would put it at 0 or 1."""
    import statistics

    (tmp_path / "parity.py").write_text(ODD_SHARE)
    rows = [{"prompt": f"say something about {i}"} for i in range(24)]
    data = write_jsonl(tmp_path / "q.jsonl", rows)
    common = ("eval", f"m={vllm_tiny_dir}", "--data", data, "--reward", f"{tmp_path / 'parity.py'}:odd_share",
              "--modes", "no_think", "--temperature", "1.0", "--max-new-tokens", "16", "--samples", "4")
    shares = {}
    for backend in ("transformers", "vllm"):
        code, _, err = cli_fd(*common, "--backend", backend, "--json", tmp_path / f"{backend}.json")
        assert code == 0, err
        shares[backend] = [r["rewards"][f"{tmp_path / 'parity.py'}:odd_share"]
                           for r in samples(tmp_path / f"{backend}.samples.jsonl").values()]
    assert len(shares["vllm"]) == len(shares["transformers"]) == 96
    error = (statistics.pvariance(shares["vllm"]) / 96 + statistics.pvariance(shares["transformers"]) / 96) ** 0.5
    assert 0 < error and abs(statistics.mean(shares["vllm"]) - statistics.mean(shares["transformers"])) <= 4 * error
    assert len(set(shares["vllm"])) > 5  # sampled, not one greedy answer repeated


def test_sampled_prompts_longer_than_one_steps_token_budget(cli_fd, vllm_tiny_dir, tmp_path, engine_calls):
    """A batch whose prompts together exceed the tokens vLLM computes in one step (here 32 prompts of ~300 tokens):
    with chunked prefill, a prompt split across steps has its sampled token discarded, and rewinding a seeded CPU
    generator for it crashed the engine ("CPU Generator does not use offset"), as `make quickstart`'s evaluation did
    with `--backend vllm`. Every prompt gets its own seed, as in the quickstart."""
    filler = " ".join(f"word{i}" for i in range(60))
    rows = [{"prompt": f"say something about {i}: {filler}", "solution": str(i)} for i in range(32)]
    data = write_jsonl(tmp_path / "q.jsonl", rows)
    code, _, err = cli_fd("eval", f"m={vllm_tiny_dir}", "--data", data, "--reward", "math_accuracy", "--modes",
                          "no_think", "--temperature", "1.0", "--max-new-tokens", "8", "--batch-size", "32",
                          "--backend", "vllm", "--json", tmp_path / "vllm.json")
    assert code == 0, err
    assert engine_calls and sum(c["requests"] for c in engine_calls) == 32
    assert all(seed is not None for c in engine_calls for seed in c["seeds"])
    answers = samples(tmp_path / "vllm.samples.jsonl")
    assert len(answers) == 32 and len({row["turn"] for row in answers.values()}) > 5  # sampled, one per prompt


@pytest.fixture
def pairs_recipe(write_recipe, talker, tmp_path):
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": q["prompt"]} for q in QUESTIONS])
    (tmp_path / "scorer.py").write_text(SCORER.format(record=str(tmp_path / "scores.jsonl")))

    def make(**pairs) -> str:
        return str(write_recipe({
            "model": {"source": str(talker)}, "template": {"name": "chatml"}, "method": "dpo",
            "pairs": {"prompts": [{"path": str(prompts)}], "output": str(tmp_path / "out" / "pairs.jsonl"), **pairs},
            "train": {"max_length": 128, "per_device_train_batch_size": 2, "max_steps": 1,
                      "gradient_checkpointing": False}}))

    return make


SCORER = '''
import json


def length_score(completions, prompts, **columns):
    values = [float(len(c)) for c in completions]
    with open({record!r}, "a") as out:
        for prompt, completion, value in zip(prompts, completions, values):
            out.write(json.dumps({{"prompt": prompt[-1]["content"], "completion": completion, "score": value}}) + "\\n")
    return values
'''


def test_strong_and_weak_answers_come_from_the_engine(cli_fd, pairs_recipe, talker, tmp_path, engine_calls):
    side = {"source": str(talker), "backend": "vllm", "max_new_tokens": 16, "batch_size": 6}
    recipe = pairs_recipe(strong={**side, "temperature": 0.0}, weak={**side, "temperature": 1.5})
    code, out, err = cli_fd("po", "pairs", recipe)
    assert code == 0, err
    # one batched call per side, greedy for the strong model and sampled for the weak one
    assert [(c["requests"], c["temperature"], c["outputs"]) for c in engine_calls] == \
        [(6, 0.0, [1] * 6), (6, 1.5, [1] * 6)]
    output = tmp_path / "out" / "pairs.jsonl"
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    report = json.loads(output.with_name("pairs.jsonl.report.json").read_text())
    assert report["prompts"]["used"] == len(QUESTIONS) and report["pairs"] == len(rows)
    assert len(rows) + sum(report["filtered"].values()) == len(QUESTIONS)
    assert rows and len(set(engine_calls[1]["seeds"])) == 6  # each sampled request its own seed


def test_graded_pairs_ask_the_engine_for_n_samples_per_prompt(cli_fd, pairs_recipe, tmp_path, engine_calls):
    recipe = pairs_recipe(graded={"n": 4, "sampler": {"backend": "vllm", "temperature": 1.5, "max_new_tokens": 16,
                                                      "batch_size": 3},
                                  "scorer": [{"name": f"{tmp_path / 'scorer.py'}:length_score"}]})
    code, out, err = cli_fd("po", "pairs", recipe)
    assert code == 0, err
    assert sum(c["requests"] for c in engine_calls) == len(QUESTIONS)  # each prompt asked once ...
    assert all(c["n"] == 4 and c["temperature"] == 1.5 and c["outputs"] == [4] * c["requests"]
               for c in engine_calls)  # ... for 4 samples, and the engine returned 4
    scores: dict = {}
    for line in (tmp_path / "scores.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["completion"]:  # the empty answer the scorer is checked with before sampling
            scores.setdefault(row["prompt"], {})[row["completion"]] = row["score"]
    rows = [json.loads(line) for line in (tmp_path / "out" / "pairs.jsonl").read_text().splitlines()]
    assert rows
    for row in rows:
        candidates = scores[row["prompt"][-1]["content"]]
        assert candidates[row["chosen"][0]["content"]] == max(candidates.values())
        assert candidates[row["rejected"][0]["content"]] == min(candidates.values())
        assert len(row["provenance"]["candidates"]) == 4


@pytest.fixture(scope="module")
def talker_variant(talker, tmp_path_factory):
    """Another checkpoint of the talker: every weight nudged by a fifth of its tensor's spread, the other files
    the same."""
    import torch
    from safetensors.torch import load_file, save_file

    directory = tmp_path_factory.mktemp("vllm-talker-variant")
    shutil.copytree(talker, directory, dirs_exist_ok=True)
    weights = load_file(directory / "model.safetensors")
    noise = torch.Generator().manual_seed(0)
    save_file({name: w + 0.2 * w.float().std() * torch.randn(w.shape, generator=noise).to(w.dtype)
               for name, w in weights.items()}, directory / "model.safetensors", metadata={"format": "pt"})
    return directory


@pytest.fixture
def engines_built(monkeypatch):
    from vllm import LLM

    built, original = [], LLM.__init__

    def counting(self, *args, **kwargs):
        built.append(kwargs.get("model"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(LLM, "__init__", counting)
    return built


def test_one_engine_evaluates_checkpoints_of_one_model(cli_fd, talker, talker_variant, tmp_path, engines_built):
    data = write_jsonl(tmp_path / "q.jsonl", QUESTIONS)
    common = ("--data", data, "--reward", "math_accuracy", "--template", "chatml", "--modes", "no_think",
              "--temperature", "1", "--samples", "2", "--max-new-tokens", "16", "--backend", "vllm")
    code, _, err = cli_fd("eval", f"a={talker}", f"b={talker_variant}", *common, "--json", tmp_path / "both.json")
    assert code == 0, err
    assert engines_built == [str(talker)]  # the variant's weights went into the talker's engine
    for label, model in (("a", talker), ("b", talker_variant)):
        code, _, err = cli_fd("eval", f"{label}={model}", *common, "--json", tmp_path / f"{label}.json")
        assert code == 0, err
    assert engines_built == [str(talker), str(talker), str(talker_variant)]

    both = [json.loads(line) for line in (tmp_path / "both.samples.jsonl").read_text().splitlines()]
    for label in ("a", "b"):
        alone = samples(tmp_path / f"{label}.samples.jsonl")
        shared = {(r["prompt"], r["mode"], r["sample"]): r for r in both if r["model"] == label}
        assert shared.keys() == alone.keys() and len(alone) == 2 * len(QUESTIONS)
        assert all((shared[k]["turn"], shared[k]["tokens"]) == (alone[k]["turn"], alone[k]["tokens"]) for k in alone)
    a, b = samples(tmp_path / "a.samples.jsonl"), samples(tmp_path / "b.samples.jsonl")
    assert sum(a[k]["turn"] != b[k]["turn"] for k in a) >= len(a) // 2  # the two checkpoints answer differently


def test_a_model_the_engine_cannot_serve_gets_an_engine_of_its_own(cli_fd, talker, talker_variant, tmp_path,
                                                                   engines_built):
    config = json.loads((talker_variant / "generation_config.json").read_text())
    other = tmp_path / "other-stop"
    shutil.copytree(talker_variant, other)
    (other / "generation_config.json").write_text(json.dumps({**config, "eos_token_id": 0}))
    data = write_jsonl(tmp_path / "q.jsonl", QUESTIONS[:2])
    code, _, err = cli_fd("eval", f"a={talker}", f"b={other}", "--data", data, "--reward", "math_accuracy",
                          "--template", "chatml", "--modes", "no_think", "--max-new-tokens", "4", "--backend", "vllm")
    assert code == 0, err
    assert engines_built == [str(talker), str(other)]
