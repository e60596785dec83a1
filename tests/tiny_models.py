"""Tiny offline models for tests: a ByteLevel BPE tokenizer trained here on synthetic chat text, and random
Llama / SmolLM3 models on it. Nothing touches a hub."""

import json
import random
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
WORDS = ("the a an is are what how many plus minus times answer question think step sum product number first then "
         "so we get add take result one two three four five six seven eight nine ten hello hi there sure system user "
         "assistant metadata knowledge cutoff date reasoning mode custom instructions you helpful ai named smollm "
         "trained by hugging face tools call function json arguments name").split()


def corpus(lines: int = 600, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    text = []
    for _ in range(lines):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
        numbers = f"{rng.randint(0, 99)} + {rng.randint(0, 99)} = {rng.randint(0, 199)}."
        text.append(" ".join(words) + " " + numbers + "\n<think>\n\n</think>\n## Metadata\n/think /no_think")
    return text


def build_tokenizer(directory: Path, vocab_size: int = 512, extra_lines: tuple[str, ...] = ()):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(corpus() + list(extra_lines), trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                      bos_token=None)
    wrapped.save_pretrained(directory)
    return wrapped


def build_model(directory: Path, tokenizer, arch: str = "llama", hidden: int = 64, layers: int = 2, seed: int = 0,
                heads: int = 4, kv_heads: int = 2, positions: int = 1024):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, SmolLM3Config, SmolLM3ForCausalLM

    torch.manual_seed(seed)
    common = dict(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
                  num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=positions,
                  pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
                  tie_word_embeddings=True)
    if arch == "smollm3":
        config = SmolLM3Config(**common, no_rope_layers=[1] * (layers - 1) + [0])
        model = SmolLM3ForCausalLM(config)
    else:
        model = LlamaForCausalLM(LlamaConfig(**common))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return model


def build_tiny_dir(directory: Path) -> Path:
    """A random 2-layer Llama and its BPE tokenizer, saved as a normal transformers directory."""
    build_model(directory, build_tokenizer(directory))
    return directory


def build_vllm_tiny_dir(directory: Path) -> Path:
    """The same, with heads vLLM's CPU attention takes (2 heads of 32 dimensions, 1 KV head: it has none of 16)."""
    build_model(directory, build_tokenizer(directory), heads=2, kv_heads=1)
    return directory


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def addition_prompts(n: int) -> list[dict]:
    """GRPO rows: "what is i plus i+1" with its solution."""
    return [{"prompt": f"what is {i} plus {i + 1}", "solution": str(2 * i + 1)} for i in range(n)]


def grpo_recipe(source: Path, data: Path, template: str, **train) -> dict:
    """A two-step GRPO recipe on `data` (addition_prompts) with math_accuracy: 2 prompts x 4 answers per step."""
    return {"model": {"source": str(source)}, "template": {"name": template}, "method": "grpo",
            "data": {"sources": [{"path": str(data)}]}, "rewards": [{"name": "math_accuracy"}],
            "train": {"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 2, "learning_rate": 1e-3,
                      "logging_steps": 1, "gradient_checkpointing": False, **train}}


def chat_rows(n: int = 24, seed: int = 0) -> list[dict]:
    """Conversations of varying length: system + 1 or 2 user/assistant exchanges, think and no_think."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        think = i % 2 == 0
        messages = [{"role": "system", "content": "Be brief. " + ("/think" if think else "/no_think")}]
        for _ in range(1 + i % 2):
            a, b = rng.randint(1, 50), rng.randint(1, 50)
            answer = f"{a} + {b} = {a + b}."
            content = f"<think>\nadd {a} and {b}\n</think>\n{answer}" if think else answer
            messages += [{"role": "user", "content": f"what is {a} plus {b}"}, {"role": "assistant", "content": content}]
        rows.append({"messages": messages})
    return rows


def pair_rows(n: int = 24, seed: int = 0, conversational: bool = True) -> list[dict]:
    """Preference pairs: a correct sum is chosen, a wrong one rejected; no_think rows, half of them by kwargs."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(1, 50), rng.randint(1, 50)
        question, good, bad = f"what is {a} plus {b}", f"{a} + {b} = {a + b}.", f"the answer is {a + b + 7} so we get it"
        if conversational:
            rows.append({"prompt": [{"role": "user", "content": question}],
                         "chosen": [{"role": "assistant", "content": good}],
                         "rejected": [{"role": "assistant", "content": bad}],
                         "chat_template_kwargs": {"enable_thinking": False}})
        else:
            rows.append({"prompt": question + " ", "chosen": good, "rejected": bad})
    return rows


def sft_tiny(source: Path, folder: Path, conversations: list[dict], steps: int, template: dict | None = None,
             max_length: int = 128) -> Path:
    """`smolalign sft` of a tiny model on `conversations` (rows with messages), at a rate that makes it learn them
    in a few dozen steps, with the chatml template unless `template` says otherwise; returns the saved model's
    directory.

    It trains in float32 on every CPU: this is a test's setup, not the training under test, and on these 64-wide
    models bf16 autocast is the slower precision (oneDNN builds its bf16 kernels for each new packed length, and
    the casts cost more than the tiny matrix products save): 100 steps took 8.3 s under autocast and 4.5 s in
    float32 on the 2-core AMX Xeon (docs/tests.md)."""
    import yaml

    from smolalign.cli import main

    data = write_jsonl(folder / "sft.jsonl", conversations)
    recipe = folder / "sft.yaml"
    recipe.write_text(yaml.safe_dump({
        "model": {"source": str(source), "dtype": "float32"}, "template": template or {"name": "chatml"},
        "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": max_length, "packing": "bfd", "per_device_train_batch_size": 8, "max_steps": steps,
                  "learning_rate": 1e-2, "logging_steps": 10, "save_strategy": "no", "gradient_checkpointing": False}}))
    try:
        main(["sft", str(recipe), "-o", str(folder / "run")])
    except SystemExit as exc:
        assert not exc.code, f"sft of the tiny model exited {exc.code}"
    return folder / "run" / "model"


def deepspeed_skip_reason() -> str | None:
    """Why DeepSpeed cannot run on this CPU machine, or None. Its CPU accelerator JIT-builds a shared-memory
    communication op on first use (~45 s, cached in ~/.cache/torch_extensions), which needs g++."""
    import importlib.util
    import os
    import shutil

    if importlib.util.find_spec("deepspeed") is None:
        return "needs deepspeed (pip install 'smolalign[deepspeed]')"
    extensions = Path(os.environ.get("TORCH_EXTENSIONS_DIR", Path.home() / ".cache" / "torch_extensions"))
    if shutil.which("g++") is None and not any(extensions.glob("*/deepspeed_shm_comm")):
        return "DeepSpeed needs g++ to build its CPU communication op"
    return None


def cached_model_info(folder, architecture: str = "LlamaForCausalLM") -> dict:
    """What vLLM's registry cached in `folder` for `architecture` (its module's hash and the class's model info)."""
    (path,) = Path(folder).glob(f"*{architecture}.json")
    return json.loads(path.read_text())
