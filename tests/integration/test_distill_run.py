"""On-policy distillation from the CLI on tiny models: GOLD across tokenizers moves the student towards the
teacher's answer, multi-byte text aligns, same-tokenizer distillation runs, and bad input exits 2."""

import pytest
import torch
from tiny_models import build_model, build_tokenizer, sft_tiny, write_jsonl

from smolalign.runs.metrics import read_metrics

ANSWER = "the answer is yes."
MULTIBYTE = ("café déjà vu", "日本語の文字", "emoji 🙂🚀 done", "naïve façade ü")


@pytest.fixture(scope="session")
def fixed_teacher(tiny_dir, tmp_path_factory):
    """The tiny model after SFT to answer every question the same way."""
    rows = [{"messages": [{"role": "user", "content": f"what is {i} plus {i + 1}"},
                          {"role": "assistant", "content": ANSWER}]} for i in range(32)]
    return sft_tiny(tiny_dir, tmp_path_factory.mktemp("teacher"), rows, steps=30)


@pytest.fixture(scope="session")
def other_student(tmp_path_factory):
    """A random tiny student whose tokenizer differs from the teacher's: a smaller vocabulary, trained with
    multi-byte words so it merges them where the teacher's falls back to bytes."""
    folder = tmp_path_factory.mktemp("student")
    tokenizer = build_tokenizer(folder, vocab_size=600, extra_lines=MULTIBYTE * 30)
    build_model(folder, tokenizer, seed=1)
    return folder


def answer_loglik(model_dir) -> float:
    """log p(ANSWER + end of turn | a question), with the model's own tokenizer and ChatML."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModelForCausalLM.from_pretrained(model_dir)
    head = "<|im_start|>user\nwhat is 3 plus 4<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer(head + ANSWER + "<|im_end|>", add_special_tokens=False, return_tensors="pt")["input_ids"]
    start = len(tokenizer(head, add_special_tokens=False)["input_ids"])
    with torch.no_grad():
        logits = model(ids).logits[0, :-1]
    return torch.log_softmax(logits, -1).gather(1, ids[0, 1:, None])[start - 1:].sum().item()


@pytest.fixture
def distill_recipe(write_recipe, tmp_path, fixed_teacher, other_student):
    def make(completions=None, method="auto", **extra) -> str:
        rows = [{"prompt": f"what is {i} plus {i + 1}", "completion": (completions or [ANSWER])[i % len(completions or [ANSWER])]}
                for i in range(16)]
        data = write_jsonl(tmp_path / "distill.jsonl", rows)
        train = {"per_device_train_batch_size": 4, "max_completion_length": 16, "max_length": 128, "max_steps": 20,
                 "learning_rate": 5e-3, "lmbda": 0.5, "uld_use_hybrid_loss": True, "logging_steps": 1,
                 "save_strategy": "no", "gradient_checkpointing": False, **extra.pop("train", {})}
        train = {k: v for k, v in train.items() if v is not None}
        return str(write_recipe({"model": {"source": str(extra.pop("student", other_student))},
                                 "template": {"name": "chatml"}, "method": method,
                                 "teacher": {"source": str(fixed_teacher), **extra.pop("teacher", {})},
                                 "data": {"sources": [{"path": str(data)}]}, "train": train, **extra}))

    return make


def gold_trainer_seen(monkeypatch, what) -> list:
    """What `what(trainer)` reads from each GOLDTrainer as its training starts (TRL's own state, as it trains)."""
    from trl.experimental.gold.gold_trainer import GOLDTrainer

    seen = []
    train = GOLDTrainer.train

    def recording(self, *args, **kwargs):
        seen.append(what(self))
        return train(self, *args, **kwargs)

    monkeypatch.setattr(GOLDTrainer, "train", recording)
    return seen


def test_gold_across_tokenizers_moves_the_student_to_the_teachers_answer(cli, distill_recipe, tmp_path, other_student):
    before = answer_loglik(other_student)
    code, out, err = cli("rl", distill_recipe(), "-o", tmp_path / "run")
    assert code == 0, err
    logged = {k for m in read_metrics(tmp_path / "run") for k in m}
    assert {"matched_loss", "unmatched_loss"} <= logged  # logged only by GOLD's hybrid ULD loss
    after = answer_loglik(tmp_path / "run" / "model")
    assert after > before + 5  # nats, over the answer's ~6 tokens
    losses = [m["loss"] for m in read_metrics(tmp_path / "run") if "loss" in m]
    assert len(losses) == 20 and sum(losses[-3:]) < sum(losses[:3])


def test_gold_renders_prompts_with_the_recipes_template_kwargs(cli, distill_recipe, tmp_path, monkeypatch):
    """GOLD takes no chat_template_kwargs in its config: it renders each row with the row's own column. A no_think
    recipe's prompts (template.kwargs.enable_thinking: false) rendered in think mode before, a flag away from what
    the dry run's check showed. The texts are TRL's own (its dataset's original_prompt_text)."""
    seen = gold_trainer_seen(monkeypatch, lambda trainer: trainer.train_dataset["original_prompt_text"])
    recipe = distill_recipe(method="gold", template={"name": "smollm3", "kwargs": {"enable_thinking": False}},
                            train={"max_steps": 1})
    code, _, err = cli("rl", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    rendered = seen[0]
    assert len(seen) == 1 and len(rendered) == 16
    assert all("Reasoning Mode: /no_think" in text for text in rendered), rendered[0]


def test_gold_compares_predictions_of_the_same_text_across_tokenizers(cli, distill_recipe, tmp_path, monkeypatch):
    """Where one tokenizer splits a span the other keeps whole (a number: " 85" against " ", "8", "5"), TRL's default
    ULD merge ("observed") compared the student's prediction after the whole span with the teacher's after its first
    piece; smolalign sets "bayesian", which compares predictions of the same text, unless the recipe chooses."""
    seen = gold_trainer_seen(monkeypatch, lambda trainer: trainer.args.uld_token_merge_strategy)
    code, out, err = cli("rl", distill_recipe(train={"max_steps": 1}), "-o", tmp_path / "run")
    assert code == 0, err
    assert "split tokens merged bayesian" in out
    code, _, err = cli("rl", distill_recipe(train={"max_steps": 1, "uld_token_merge_strategy": "observed"}),
                       "-o", tmp_path / "observed")
    assert code == 0, err
    assert seen == ["bayesian", "observed"]


def test_gold_aligns_with_the_teacher_tokenizer_smolalign_checked(cli, distill_recipe, tmp_path, monkeypatch,
                                                                  fixed_teacher):
    """GOLD loads its teacher tokenizer from a path: it gets the one smolalign loaded, checked and planned with (its
    end of turn the template's), not the teacher folder's own (or, for a hub teacher, the newest revision's)."""
    import shutil

    from transformers import AutoTokenizer

    teacher = tmp_path / "teacher"
    shutil.copytree(fixed_teacher, teacher)
    words = AutoTokenizer.from_pretrained(teacher)
    words.eos_token = "<|endoftext|>"  # a base model's: the template's end of turn is <|im_end|>
    words.save_pretrained(teacher)
    seen = gold_trainer_seen(monkeypatch, lambda trainer: trainer.teacher_tokenizer.eos_token)
    code, _, err = cli("rl", distill_recipe(teacher={"source": str(teacher)}, train={"max_steps": 1}),
                       "-o", tmp_path / "run")
    assert code == 0, err
    assert seen == ["<|im_end|>"]


def test_gold_states_the_hybrid_losses_weights(cli, distill_recipe, fixed_teacher, other_student):
    """TRL weighs the exact part of the hybrid loss by the share of the teacher's vocabulary that maps onto the
    student's (a few percent across unrelated tokenizers): the plan says so, with the weights."""
    from transformers import AutoTokenizer

    student, teacher = (AutoTokenizer.from_pretrained(d).get_vocab() for d in (other_student, fixed_teacher))
    matched = sum(token in student for token in teacher) / len(teacher)
    code, out, err = cli("rl", distill_recipe(), "--dry-run")
    assert code == 0, err
    assert (f"exact divergence on the tokens both vocabularies share × {matched:.3g}, ULD on the rest × "
            f"{1 - matched:.3g} (TRL's, by the shared share of the teacher's vocabulary)") in out


def test_gold_warns_when_the_datas_completions_cut_the_prompts(cli, distill_recipe):
    """GOLD trains the data's completions whole and cuts the prompt's start (its system turn first) to fit
    train.max_length: a completion longer than max_completion_length is counted in the check's warning."""
    long = " ".join(["yes"] * 60) + "."
    code, _, err = cli("rl", distill_recipe(completions=[long], train={"max_length": 64}), "--dry-run")
    assert code == 0, err
    assert "the longest checked completion of the data" in err and "GOLD cuts a prompt that long from its start" in err
    code, _, err = cli("rl", distill_recipe(train={"max_length": 64}), "--dry-run")
    assert code == 0 and "GOLD cuts" not in err, err


@pytest.mark.parametrize("lmbda", [0.5, 1.0])
def test_gold_without_completions_is_exit_2(cli, write_recipe, tmp_path, fixed_teacher, other_student, lmbda):
    """TRL's GOLDTrainer tokenizes every row's prompt with its completion, even when every batch is sampled: prompt
    rows alone passed the dry run at lmbda 1.0 and the run died on a KeyError."""
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}"} for i in range(8)])
    recipe = write_recipe({"model": {"source": str(other_student)}, "template": {"name": "chatml"}, "method": "auto",
                           "teacher": {"source": str(fixed_teacher)}, "data": {"sources": [{"path": str(data)}]},
                           "train": {"lmbda": lmbda, "max_completion_length": 8, "max_steps": 1}})
    code, _, err = cli("rl", recipe, "--dry-run")
    assert code == 2 and "GOLD reads a completion for every prompt row" in err, err


def test_gold_with_a_source_without_completions_is_exit_2(cli, write_recipe, tmp_path, fixed_teacher, other_student):
    """A source with completions mixed with one without: the mixture fills the second's with null, which TRL's
    GOLDTrainer would add to a prompt (a TypeError once the models loaded). Refused naming a row and the count."""
    answered = write_jsonl(tmp_path / "answered.jsonl", [{"prompt": f"what is {i} plus 1", "completion": "yes."}
                                                         for i in range(4)])
    bare = write_jsonl(tmp_path / "bare.jsonl", [{"prompt": f"what is {i} plus 2"} for i in range(3)])
    recipe = write_recipe({"model": {"source": str(other_student)}, "template": {"name": "chatml"}, "method": "auto",
                           "teacher": {"source": str(fixed_teacher)},
                           "data": {"sources": [{"path": str(answered)}, {"path": str(bare)}]},
                           "train": {"lmbda": 1.0, "max_completion_length": 8, "max_steps": 1}})
    code, _, err = cli("rl", recipe, "--dry-run")
    assert code == 2 and "bare.jsonl#" in err and "no completion (3 row(s))" in err, err


def test_multibyte_text_aligns_across_tokenizers(cli, distill_recipe, tmp_path, fixed_teacher, other_student):
    from transformers import AutoTokenizer

    student, teacher = AutoTokenizer.from_pretrained(other_student), AutoTokenizer.from_pretrained(fixed_teacher)
    assert all(student.tokenize(text) != teacher.tokenize(text) for text in MULTIBYTE)  # split differently
    code, out, err = cli("rl", distill_recipe(list(MULTIBYTE), train={"max_steps": 6}), "-o", tmp_path / "run")
    assert code == 0, err
    losses = [m["loss"] for m in read_metrics(tmp_path / "run") if "loss" in m]
    assert len(losses) == 6 and all(loss == loss and abs(loss) < 1e4 for loss in losses)  # finite


def test_same_tokenizer_distillation(cli, distill_recipe, tmp_path, tiny_dir):
    train = {"max_steps": 3, "lmbda": None, "uld_use_hybrid_loss": None, "max_length": None}
    code, out, err = cli("rl", distill_recipe(method="distill", student=tiny_dir, train=train), "-o", tmp_path / "run")
    assert code == 0, err
    logged = {k for m in read_metrics(tmp_path / "run") for k in m}
    # TRL's DistillationTrainer (on-policy completions logged), not GOLD's cross-tokenizer loss.
    assert "completions/mean_length" in logged and "matched_loss" not in logged


@pytest.mark.parametrize(("extra", "message"), [
    ({"train": {"use_uld_loss": False}}, "GOLD would resize the teacher's embeddings"),
    ({"teacher": {"max_memory_gb": 0.0001}}, "exceed teacher.max_memory_gb"),
    ({"method": "distill", "train": {"lmbda": None, "uld_use_hybrid_loss": None, "max_length": None}},
     "method distill needs the teacher's tokenizer"),
    ({"method": "gold", "rewards": [{"name": "math_accuracy"}]}, "learns from a teacher, not from rewards"),
])
def test_bad_distillation_input_is_exit_2(cli, distill_recipe, extra, message):
    method = extra.pop("method", "auto")
    train = {k: v for k, v in extra.pop("train", {}).items()}
    code, out, err = cli("rl", distill_recipe(method=method, train=train, **extra), "--dry-run")
    assert code == 2 and message in err, err


def test_a_teacher_whose_tokenizer_cannot_load_is_exit_2(cli, distill_recipe, tmp_path, fixed_teacher):
    import shutil

    broken = tmp_path / "broken-teacher"
    shutil.copytree(fixed_teacher, broken)
    (broken / "tokenizer.json").write_text("{not json")
    code, out, err = cli("rl", distill_recipe(teacher={"source": str(broken)}), "--dry-run")
    assert code == 2 and "its tokenizer cannot be loaded" in err and "Traceback" not in err


@pytest.mark.parametrize("trainer", ["gold", "distill"])
@pytest.mark.parametrize("backend, mode", [("vllm_colocate", "colocate"), ("vllm_server", "server"),
                                           ("transformers", None)])
def test_the_student_samples_with_the_generation_backend(trainer, backend, mode, monkeypatch, tmp_path):
    """`generation:` reaches TRL's distillation configs (use_vllm, vllm_mode, the server's URL)."""
    from recipe_runs import run_of

    from smolalign.generation.backend_settings import ServerAddress
    from smolalign.hardware import Hardware
    from smolalign.stages.distill import Pairing, distill_config
    from smolalign.target import Target

    monkeypatch.setattr("smolalign.target.installed", lambda module: True)
    raw = {"method": trainer, "model": {"source": "org/student"}, "teacher": {"source": "org/teacher"},
           "data": {"sources": [{"path": "prompts.jsonl"}]},
           "generation": {"backend": backend, **({"server": {"base_url": "http://gpu-node:8000"}}
                                                 if backend == "vllm_server" else {})}}
    recipe = run_of(raw, "rl", "test", target=Target(8, "an 8-GPU node"))
    cpu = Hardware("cpu", 0, "cpu", False, 1, 2)
    server = ServerAddress("http://gpu-node:8000", 41234) if backend == "vllm_server" else None
    config = distill_config(recipe, Pairing(trainer, False, 1, 1, 1, True), cpu, tmp_path, "org/teacher",
                            server)
    assert config.use_vllm == (mode is not None)
    if mode:
        assert config.vllm_mode == mode
    if backend == "vllm_server":
        assert config.vllm_server_base_url == "http://gpu-node:8000" and config.vllm_group_port == 41234
