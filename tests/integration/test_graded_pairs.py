"""`smolalign po pairs` with `pairs.graded:` on a tiny model, end to end from the CLI: the N samples of a prompt come
from one generate call (each prompt read once for them), the chosen and rejected answers are exactly the highest- and
lowest-scored candidates of a scorer whose scores the test records itself, ties are dropped, KTO rows are labelled
by the threshold, and `smolalign po` generates the graded rows and trains on them."""

import json
import math
from collections import defaultdict

import pytest
from test_pairs import read_jsonl, talker_dir  # noqa: F401 - the session's tiny talker model
from tiny_models import write_jsonl

from smolalign.runs.metrics import read_metrics

SCORER = '''
import json


def length_score(record):
    """Score = the answer's length in characters; every call is recorded for the test to check against."""
    def score(completions, prompts, **columns):
        values = [float(len(c)) for c in completions]
        with open(record, "a") as out:
            for prompt, completion, value in zip(prompts, completions, values):
                out.write(json.dumps({"prompt": prompt[-1]["content"], "completion": completion,
                                      "score": value}) + "\\n")
        return values
    return score
'''


@pytest.fixture
def graded_recipe(write_recipe, talker_dir, tmp_path):  # noqa: F811
    (tmp_path / "scorer.py").write_text(SCORER)

    def make(n_prompts=6, method="apo_zero", **graded):
        prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 2}"}
                                                           for i in range(n_prompts)])
        section = {"n": 4, "sampler": {"temperature": 1.5, "max_new_tokens": 24, "batch_size": 3},
                   "scorer": [{"name": f"{tmp_path / 'scorer.py'}:length_score",
                               "params": {"record": str(tmp_path / "scores.jsonl")}}], **graded}
        return str(write_recipe({
            "model": {"source": str(talker_dir)}, "template": {"name": "chatml"}, "method": method,
            "pairs": {"prompts": [{"path": str(prompts)}], "output": str(tmp_path / "out" / "pairs.jsonl"),
                      "graded": section},
            "train": {"max_length": 128, "per_device_train_batch_size": 2, "max_steps": 2, "logging_steps": 1,
                      "save_strategy": "no", "gradient_checkpointing": False}}))

    return make


def recorded(tmp_path) -> dict[str, dict[str, float]]:
    """{prompt: {completion: score}} as the scorer saw them (less the empty answer it is checked with before any
    sampling: an empty answer is never a candidate)."""
    scores = defaultdict(dict)
    for row in read_jsonl(tmp_path / "scores.jsonl"):
        if not row["completion"]:
            continue
        scores[row["prompt"]][row["completion"]] = row["score"]
    return scores


@pytest.fixture
def generate_calls(monkeypatch):
    """Every `generate` call's rows (prompts × samples)."""
    from transformers.generation.utils import GenerationMixin

    calls, original = [], GenerationMixin.generate

    def counting(self, *args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0] * (kwargs.get("num_return_sequences") or 1))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(GenerationMixin, "generate", counting)
    return calls


def test_chosen_and_rejected_are_the_best_and_worst_scored(cli, graded_recipe, tmp_path, talker_dir,  # noqa: F811
                                                           generate_calls):
    code, out, err = cli("po", "pairs", graded_recipe())
    assert code == 0, err
    assert generate_calls == [12, 12]  # 6 prompts, 3 per call, their 4 samples in that same call
    rows = read_jsonl(tmp_path / "out" / "pairs.jsonl")
    scores = recorded(tmp_path)
    assert rows
    for row in rows:
        candidates = scores[row["prompt"][-1]["content"]]
        assert len(candidates) >= 2
        assert candidates[row["chosen"][0]["content"]] == max(candidates.values())
        assert candidates[row["rejected"][0]["content"]] == min(candidates.values())
        provenance = row["provenance"]
        assert provenance["sampler"]["model"] == str(talker_dir)  # the policy, by default
        assert provenance["sampler"]["sampling"]["temperature"] == 1.5
        assert len(provenance["candidates"]) == 4
        assert sorted(c["score"] for c in provenance["candidates"] if c.get("score") is not None) == \
            sorted(len(c) for c in candidates)  # every candidate's score, as the scorer gave it
    paired = {row["prompt"][-1]["content"] for row in rows}
    for prompt, candidates in scores.items():  # a prompt left out had a tie or fewer than 2 scored answers
        if prompt not in paired:
            assert len(set(candidates.values())) < 2
    report = json.loads((tmp_path / "out" / "pairs.jsonl.report.json").read_text())
    assert report["rows"] == len(rows) and report["dropped"]["tie"] + report["dropped"]["unscored"] + len(rows) == 6
    assert report["candidates"]["sampled"] == 24
    assert not (tmp_path / "out" / "pairs.jsonl.partial.jsonl").exists()


def test_margin_drops_close_calls(cli, graded_recipe, tmp_path):
    code, out, err = cli("po", "pairs", graded_recipe(margin=8))
    assert code in (0, 2), err
    rows = read_jsonl(tmp_path / "out" / "pairs.jsonl") if code == 0 else []
    scores = recorded(tmp_path)
    for row in rows:
        candidates = scores[row["prompt"][-1]["content"]]
        assert candidates[row["chosen"][0]["content"]] - candidates[row["rejected"][0]["content"]] >= 8
    kept = {row["prompt"][-1]["content"] for row in rows}
    for prompt, candidates in scores.items():
        if prompt not in kept:
            assert max(candidates.values()) - min(candidates.values()) < 8


def test_unpaired_kto_rows_train(cli, graded_recipe, tmp_path):
    recipe = graded_recipe(unpaired=True, threshold=12, method="kto")
    code, out, err = cli("po", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    rows = read_jsonl(tmp_path / "out" / "pairs.jsonl")
    scores = recorded(tmp_path)
    assert rows and {"prompt", "completion", "label"} <= set(rows[0])
    for row in rows:
        score = scores[row["prompt"][-1]["content"]][row["completion"][0]["content"]]
        assert row["label"] is (score >= 12) and row["provenance"]["score"] == score
    assert (tmp_path / "run" / "model" / "config.json").is_file()
    losses = [m["loss"] for m in read_metrics(tmp_path / "run") if "loss" in m]
    assert losses and all(math.isfinite(v) for v in losses)


def test_each_prompt_is_sampled_in_its_own_think_mode(cli, write_recipe, talker_dir, tmp_path, monkeypatch):  # noqa: F811
    """A /no_think system flag and a row's enable_thinking false both sample in no_think mode (the smollm3 template's
    empty think block prefilled), the others in the recipe's default think mode; one call per mode in a batch."""
    from transformers import AutoTokenizer
    from transformers.generation.utils import GenerationMixin

    tokenizer = AutoTokenizer.from_pretrained(talker_dir)
    inputs, original = [], GenerationMixin.generate

    def recording(self, *args, **kwargs):
        inputs.append([tokenizer.decode(ids, skip_special_tokens=False) for ids in kwargs["input_ids"]])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(GenerationMixin, "generate", recording)
    rows = [{"prompt": [{"role": "system", "content": "Be brief. /no_think"},
                        {"role": "user", "content": "what is 1 plus 2"}]},
            {"prompt": "what is 2 plus 2"},
            {"prompt": "what is 3 plus 2", "chat_template_kwargs": {"enable_thinking": False}},
            {"prompt": "what is 4 plus 2"}]
    prompts = write_jsonl(tmp_path / "prompts.jsonl", rows)
    (tmp_path / "scorer.py").write_text("def length(completions, **kw):\n"
                                        "    return [float(len(c)) for c in completions]\n")
    recipe = write_recipe({
        "model": {"source": str(talker_dir)}, "template": {"name": "smollm3"}, "method": "apo_zero",
        "pairs": {"prompts": [{"path": str(prompts)}], "output": str(tmp_path / "out" / "pairs.jsonl"),
                  "graded": {"n": 2, "sampler": {"temperature": 1.0, "max_new_tokens": 4, "batch_size": 4},
                             "scorer": [{"name": f"{tmp_path / 'scorer.py'}:length"}]}}})
    cli("po", "pairs", recipe)
    assert len(inputs) == 2  # one batch of 4 prompts, one call per mode
    no_think, modes_per_call = {}, []
    for call in inputs:  # prompts are padded on the left: each ends where generation starts
        prefilled = {text.endswith("<think>\n\n</think>\n") for text in call}
        modes_per_call.append(len(prefilled))
        for text in call:
            no_think[next(q for q in ("1 plus 2", "2 plus 2", "3 plus 2", "4 plus 2") if q in text)] = \
                text.endswith("<think>\n\n</think>\n")
    assert no_think == {"1 plus 2": True, "2 plus 2": False, "3 plus 2": True, "4 plus 2": False}
    assert modes_per_call == [1, 1]


def test_k_samples_read_their_prompt_once_and_sample_what_repeated_prompts_sample(tiny_dir):
    """One call reads each prompt once for its k rows, placed as num_return_sequences would place them, and samples
    what repeating the prompts sampled: the same seed gives the same token ids, so evaluations sampled before and
    after the change agree."""
    from smolalign.pairs.backends import Generator, TransformersGenerator
    from smolalign.pairs.prompts import Prompt, prompt_key
    from smolalign.recipe.generation_schema import GeneratorSection

    generator = TransformersGenerator("pairs.graded.sampler", GeneratorSection(source=str(tiny_dir), temperature=1.0,
                                                                               max_new_tokens=12), "chatml", {})
    prompts = [Prompt(prompt_key(m), m, f"t#{i}") for i, m in enumerate(
        [[{"role": "user", "content": "what is 1 plus 2"}], [{"role": "user", "content": "hi there, the sum of ten"}]])]
    read = []
    hook = generator.model.register_forward_pre_hook(
        lambda module, args, kwargs: read.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    grouped = generator.sample(prompts, 7, 3)
    hook.remove()
    prompt_reads = [shape for shape in read if shape[1] > 1]
    assert len(prompt_reads) == 1 and prompt_reads[0][0] == 2  # 2 prompts read once, not 6 rows
    repeated = Generator.sample(generator, prompts, 7, 3)
    assert [[a.ids for a in group] for group in grouped] == [[a.ids for a in group] for group in repeated]
    assert len({tuple(a.ids) for group in grouped for a in group}) > 1  # samples, not copies
