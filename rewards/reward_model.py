"""`model:PATH`: a sequence-classification reward model as a reward. It scores the rendered conversation (the prompt,
then the completion as the assistant's turn, in the row's think mode) with its own tokenizer and chat template, in
batches, on the GPU when there is one; the score is the head's single logit, read at the conversation's last token,
where `smolalign po` with `method: reward` (and TRL's RewardTrainer) trained it.

Refused before any weights load: a path or hub id whose config does not load, and a model without a classification
head (its config names no `*ForSequenceClassification` architecture: transformers would put a random head on it and
score noise), or a head with more than one label. Try one: `smolalign rewards test model:runs/rm/model --completions F`.
"""

from pathlib import Path
from typing import Any

from rewards.errors import RewardError
from rewards.text import completion_text

PREFIX = "model:"


def is_reward_model(name: str) -> bool:
    return name.startswith(PREFIX)


class RewardModel:
    """`model:PATH`: the single logit of a sequence-classification reward model's head on the prompt and completion,
    rendered with the model's own tokenizer and chat template.

    Args:
        location: the model (PATH in `model:PATH`): a directory or a hub id.
        batch_size: sequences per forward pass.
        max_length: tokens kept per sequence, cut from the left (the head reads the last token).
        dtype: auto (bfloat16 on a GPU, float32 on a CPU), float32, bfloat16 or float16.
    """

    def __init__(self, location: str, batch_size: int = 8, max_length: int = 2048, dtype: str = "auto"):
        if batch_size < 1 or max_length < 1:
            raise ValueError("batch_size and max_length must be at least 1")
        if dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ValueError(f"dtype must be auto, float32, bfloat16 or float16, got {dtype!r}")
        self.location, self.batch_size, self.max_length, self.dtype = location, batch_size, max_length, dtype
        self.__name__ = f"{PREFIX}{location}"
        self.config = _classifier_config(location)
        self._model = self._tokenizer = None

    def _load(self) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        on_gpu = torch.cuda.is_available()
        dtype = {"auto": torch.bfloat16 if on_gpu else torch.float32, "float32": torch.float32,
                 "bfloat16": torch.bfloat16, "float16": torch.float16}[self.dtype]
        tokenizer = AutoTokenizer.from_pretrained(self.location)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.truncation_side = "left"  # keep the end of the answer, which the head reads
        model = AutoModelForSequenceClassification.from_pretrained(self.location, dtype=dtype)
        if model.config.pad_token_id is None:  # the head reads the last token that is not padding
            model.config.pad_token_id = tokenizer.pad_token_id
        self._device = torch.device("cuda") if on_gpu else torch.device("cpu")
        self._model, self._tokenizer = model.to(self._device).eval(), tokenizer

    def render(self, prompt: Any, completion: Any, template_kwargs: dict | None = None) -> str:
        """The conversation as the reward model's own chat template writes it, whole (what follows the answer's
        end-of-turn token included, as a reward model trained by smolalign or by TRL reads it), in the row's mode
        (`template_kwargs`: its chat_template_kwargs); plain concatenation without a template."""
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt or [])
        answer = completion_text(completion)
        if self._tokenizer.chat_template is None:
            return "".join(str(m.get("content", "")) for m in messages) + answer
        return self._tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": answer}],
                                                   tokenize=False, **(template_kwargs or {}))

    def __call__(self, completions: list, prompts: list | None = None, chat_template_kwargs: list | None = None,
                 **columns) -> list[float | None]:
        import torch

        if self._model is None:
            self._load()
        prompts = list(prompts) if prompts is not None else [[]] * len(completions)
        modes = list(chat_template_kwargs) if chat_template_kwargs is not None else [None] * len(completions)
        texts = [self.render(p, c, k if isinstance(k, dict) else None)
                 for p, c, k in zip(prompts, completions, modes, strict=True)]
        scores: list[float | None] = []
        for start in range(0, len(texts), self.batch_size):
            batch = self._tokenizer(texts[start:start + self.batch_size], add_special_tokens=False, padding=True,
                                    truncation=True, max_length=self.max_length, return_tensors="pt")
            with torch.no_grad():
                logits = self._model(**batch.to(self._device)).logits
            scores += [float(v) for v in logits[:, 0].float().cpu()]
        return scores

    def close(self) -> None:
        self._model = self._tokenizer = None


def _classifier_config(location: str):
    from huggingface_hub.utils import HFValidationError, validate_repo_id
    from transformers import AutoConfig

    if not Path(location).expanduser().exists():
        try:
            validate_repo_id(location)
        except HFValidationError:  # its own words ("Repo id must be in the form ...") hide the missing folder
            raise RewardError(f"reward {PREFIX}{location}: no such directory (nor a hub id, namespace/name)") from None
    try:
        config = AutoConfig.from_pretrained(location)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RewardError(f"reward {PREFIX}{location}: the model does not load ({first[:200]})") from None
    architectures = list(getattr(config, "architectures", None) or [])
    if not any(a.endswith("ForSequenceClassification") for a in architectures):
        raise RewardError(f"reward {PREFIX}{location}: the model has no classification head (its architectures: "
                          f"{', '.join(architectures) or 'none'}); name a sequence-classification reward model, e.g. "
                          "one trained with smolalign po method: reward")
    if config.num_labels != 1:
        raise RewardError(f"reward {PREFIX}{location}: its classification head has {config.num_labels} labels; a "
                          "reward model has one (a single score)")
    return config


def parameter_locations(names: list[str]) -> list[str]:
    """The model locations of the `model:` rewards among `names`, for the plan's memory rows."""
    return [name[len(PREFIX):] for name in names if is_reward_model(name)]
