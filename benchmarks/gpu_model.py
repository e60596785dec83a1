"""What the GPU benchmarks share: a randomly initialised SmolLM3-3B built from its config (transformers' SmolLM3Config
defaults are the 3B's: 36 layers, hidden 2048, MLP 11008, 16 query / 4 key-value heads, vocabulary 128,256, tied
embeddings), saved once in bf16 with a small chatml tokenizer; synthetic conversations; peak bf16 FLOP/s by GPU; and
the clean skip when there is no GPU. No download: throughput does not depend on the weights' values."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0}
"""Dense bf16 tensor-core peaks (NVIDIA datasheets; H100/H200 SXM)."""
CHATML = ("{% for m in messages %}{% if m['role'] == 'assistant' %}{{ '<|im_start|>assistant\\n' }}{% generation %}"
          "{{ m['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\\n' }}{% else %}"
          "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endif %}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
"""ChatML, with generation markers around each answer so that TRL's `assistant_only_loss` can mask the rest."""


def require_gpu(what: str) -> None:
    """Exit 0 with a line saying the figure is unmeasured when there is no CUDA GPU."""
    import torch

    if not torch.cuda.is_available():
        print(f"{what}: needs a CUDA GPU; not measured on this machine")
        sys.exit(0)


def peak_flops(device_name: str, override_tflops: float | None) -> float | None:
    if override_tflops:
        return override_tflops * 1e12
    return next((tflops * 1e12 for key, tflops in PEAK_BF16_TFLOPS.items() if key in device_name), None)


def smollm3_3b(folder: Path, layers: int | None = None, device: str = "cuda", **sizes) -> Path:
    """A random SmolLM3-3B (bf16 safetensors) and a tokenizer in `folder`, built once; `sizes` override the 3B's
    config (a small one for a CPU check of a GPU script)."""
    if (folder / "config.json").is_file():
        return folder
    import torch
    from transformers import AutoModelForCausalLM, SmolLM3Config

    sys.path.insert(0, str(REPO / "tests"))
    from tiny_models import build_tokenizer

    tokenizer = build_tokenizer(folder, vocab_size=4096, extra_lines=("<|im_start|>", "<|im_end|>"))
    tokenizer.chat_template = CHATML
    tokenizer.save_pretrained(folder)
    # The layer count goes to the constructor: it sizes layer_types and the no-RoPE layers from it.
    config = SmolLM3Config(pad_token_id=tokenizer.pad_token_id or 0, bos_token_id=tokenizer.bos_token_id,
                           eos_token_id=tokenizer.eos_token_id, **({"num_hidden_layers": layers} if layers else {}),
                           **sizes)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(folder)
    print(f"built a random SmolLM3 ({sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters) in {folder}")
    return folder


def parameter_count(folder: Path) -> int:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder))
    return sum(p.numel() for p in model.parameters())


def conversations(count: int, words: int, seed: int = 0) -> list[dict]:
    """Chat rows of roughly `words` words each (uniform 0.5×-1.5×), from the tests' word corpus."""
    import random

    sys.path.insert(0, str(REPO / "tests"))
    from tiny_models import corpus

    vocabulary = " ".join(corpus(200, seed)).split()
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        length = rng.randint(words // 2, words * 3 // 2)
        answer = " ".join(rng.choice(vocabulary) for _ in range(length))
        rows.append({"messages": [{"role": "user", "content": " ".join(rng.choice(vocabulary) for _ in range(20))},
                                  {"role": "assistant", "content": answer}]})
    return rows
