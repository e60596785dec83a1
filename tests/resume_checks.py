"""What a resumed run must show to prove it resumed, shared by the single-process and ZeRO-3 resume tests: a run cut
back to its first checkpoint (as if killed after saving it) is resumed; the checkpoint's files are not touched, the
resumed process logs only the steps after the checkpoint (with the uninterrupted run's values), and it ends on the
uninterrupted run's weights. A restart from scratch would log steps 1-2 again; a resume that loaded the weights but not
the optimizer state would not notice its perturbation (`perturb_optimizer_state`), which must change the end."""

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from tiny_models import chat_rows, pair_rows, write_jsonl

from smolalign.runs.metrics import METRICS_FILE, read_metrics

COMMON = {"max_steps": 4, "save_steps": 2, "logging_steps": 1, "gradient_checkpointing": False}
REWARDS_FILE = '''
def spread(completions, completion_ids, **kw):
    """Differs between the completions of a group, so that every step has advantages and a gradient."""
    return [(sum(ids) % 97) / 97 for ids in completion_ids]
'''


VERBS = {"sft": "sft", "dpo": "po", "grpo": "rl", "distill": "rl"}


def build_teacher(folder: Path, tokenizer) -> Path:
    """Another random model with the student's tokenizer, so that distillation has something to learn."""
    from tiny_models import build_model

    directory = folder / "teacher"
    directory.mkdir()
    tokenizer.save_pretrained(directory)
    build_model(directory, tokenizer, seed=7)
    return directory


def stage_recipe(stage: str, folder: Path, tiny_dir: Path, teacher: Path) -> dict:
    """A 4-step recipe of `stage` (sft, dpo, grpo, distill) on the tiny model, saving at steps 2 and 4."""
    model = {"model": {"source": str(tiny_dir)}}
    if stage == "sft":
        data = write_jsonl(folder / "chat.jsonl", chat_rows(32))
        return {**model, "template": {"name": "smollm3"}, "data": {"sources": [{"path": str(data)}]},
                "train": {"max_length": 256, "packing": "bfd", "per_device_train_batch_size": 2,
                          "learning_rate": 5e-3, **COMMON}}
    if stage == "dpo":
        data = write_jsonl(folder / "pairs.jsonl", pair_rows(32))
        return {**model, "template": {"name": "chatml"}, "method": "dpo", "data": {"sources": [{"path": str(data)}]},
                "train": {"max_length": 160, "per_device_train_batch_size": 2, "learning_rate": 5e-3, "beta": 0.1,
                          **COMMON}}
    prompts = write_jsonl(folder / "prompts.jsonl", [{"prompt": f"what is {i} plus {i + 1}", "completion": "yes"}
                                                     for i in range(32)])
    if stage == "grpo":
        rewards = folder / "rewards.py"
        rewards.write_text(REWARDS_FILE)
        return {**model, "template": {"name": "chatml"}, "method": "grpo",
                "data": {"sources": [{"path": str(prompts)}]}, "rewards": [{"name": f"{rewards}:spread"}],
                "train": {"num_generations": 4, "per_device_train_batch_size": 4, "max_completion_length": 8,
                          "learning_rate": 1e-2, **COMMON}}
    return {**model, "template": {"name": "chatml"}, "method": "distill", "teacher": {"source": str(teacher)},
            "data": {"sources": [{"path": str(prompts)}]},
            "train": {"per_device_train_batch_size": 4, "max_completion_length": 8, "learning_rate": 5e-3, **COMMON}}


def weights(directory: Path) -> dict:
    from safetensors.torch import load_file

    return {k: v for f in sorted(directory.glob("*.safetensors")) for k, v in load_file(f).items()}


def largest_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


def file_digests(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


@dataclass(frozen=True)
class Cut:
    """A run cut back to a checkpoint: its step, how many metrics entries were kept, and its files' digests."""

    step: int
    kept: int
    digests: dict


def cut_back(run_dir: Path, copy: Path, checkpoint: str = "checkpoint-2") -> Cut:
    """A copy of a finished run as it was when `checkpoint` was its last: later checkpoints, the model and the
    metrics logged after that step removed."""
    step = int(checkpoint.split("-")[1])
    shutil.copytree(run_dir, copy)
    for later in copy.glob("checkpoint-*"):
        if int(later.name.split("-")[1]) > step:
            shutil.rmtree(later)
    shutil.rmtree(copy / "model")
    kept = [m for m in read_metrics(copy) if m["step"] <= step and "train_runtime" not in m]
    (copy / METRICS_FILE).write_text("".join(json.dumps(m) + "\n" for m in kept))
    return Cut(step, len(kept), file_digests(copy / checkpoint))


def assert_resumed(full: Path, resumed: Path, cut: Cut, *, atol: float = 0.0) -> None:
    """`resumed` (cut back by `cut` and resumed) did resume: see the module docstring."""
    checkpoint = f"checkpoint-{cut.step}"
    assert file_digests(resumed / checkpoint) == cut.digests, "the checkpoint resumed from was changed"
    manifest = json.loads((resumed / "manifest.json").read_text())["result"]
    assert manifest["resumed_from"].endswith(checkpoint)
    assert manifest["global_step"] == json.loads((full / "manifest.json").read_text())["result"]["global_step"]
    logged = [m for m in read_metrics(resumed) if "train_runtime" not in m][cut.kept:]
    assert logged, "the resumed run logged nothing"
    assert all(m["step"] > cut.step for m in logged), f"the resumed run logged steps {[m['step'] for m in logged]}"
    reference = {m["step"]: m for m in read_metrics(full) if "loss" in m}
    for entry in logged:
        if "loss" in entry:
            assert entry["loss"] == reference[entry["step"]]["loss"], entry["step"]
    assert largest_difference(weights(resumed / "model"), weights(full / "model")) <= atol


def perturb_optimizer_state(checkpoint: Path) -> int:
    """Negate the first moments (exp_avg) of every optimizer state file in a checkpoint, whatever wrote it (the
    Trainer's optimizer.pt, DeepSpeed's per-rank optim_states); returns how many tensors changed. A resume that
    restores the optimizer then steps differently from the uninterrupted run."""
    changed = 0
    files = [*checkpoint.glob("optimizer.pt"), *checkpoint.glob("global_step*/*optim_states.pt")]
    assert files, f"no optimizer state in {checkpoint}"
    for path in files:
        state = torch.load(path, map_location="cpu", weights_only=False)
        changed += _negate_first_moments(state)
        torch.save(state, path)
    assert changed, f"no exp_avg tensor in {[str(f) for f in files]}"
    return changed


def _negate_first_moments(node) -> int:
    count = 0
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "exp_avg" and torch.is_tensor(value) and value.abs().sum() > 0:
                value.neg_()
                count += 1
            else:
                count += _negate_first_moments(value)
    elif isinstance(node, list | tuple):
        count += sum(_negate_first_moments(item) for item in node)
    return count
