"""Generators for pair generation and evaluation: transformers `generate` (CPU or GPU, batched), vLLM's offline engine
in-process (the `[vllm]` extra on a GPU, vLLM's CPU build on a CPU: smolalign/generation/vllm_engine.py), and any
OpenAI-compatible chat server (a vLLM or TGI server already running).

Every backend answers the same question for a batch of prompts: the answer's text, whether it ended with an
end-of-turn (False = cut off by max_new_tokens), and how many tokens it took; `sample` asks for K answers per prompt,
and the chat-template kwargs (the think mode) can change from one call to the next without reloading the model.
The transformers and vLLM backends render prompts with smolalign's template, as training will; a server its own."""

import contextlib
import copy
import json
import os
import random
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from smolalign.errors import SmolalignError
from smolalign.generation.transformers_sampler import fast_sampling
from smolalign.generation.vllm_engine import (
    PROMPT_TOKENS,
    check_model,
    engine_options,
    engine_serves,
    leave_vllm_groups,
    offline_engine,
    reload_weights,
    require_vllm,
)
from smolalign.hardware import detect_hardware, free_accelerator_memory, generation_dtype
from smolalign.launch import kept_process_variables
from smolalign.models.config import model_width
from smolalign.models.load import load_model, load_tokenizer, local_dir
from smolalign.models.sources import resolve_source
from smolalign.pairs.prompts import Prompt
from smolalign.recipe.generation_schema import GeneratorSection
from smolalign.recipe.schema import ModelSection
from smolalign.templates.render import render
from smolalign.trainers.shared_prefill import generate_sharing_prompts


@dataclass
class Answer:
    text: str
    finished: bool
    """Ended with the end-of-turn token (or the server's finish_reason "stop")."""
    tokens: int
    ids: list[int] | None = None
    """The generated token ids, end-of-turn included (transformers, vLLM); a server reports only their count."""


class Generator:
    where: str
    """The recipe key this generator was configured under (pairs.strong, eval), for messages."""
    section: GeneratorSection
    template_sha256: str | None = None

    kwargs: dict

    def generate(self, prompts: list[Prompt], seed: int, kwargs: dict | None = None) -> list[Answer]:
        """One answer per prompt; `kwargs` replaces the chat-template kwargs the generator was built with."""
        raise NotImplementedError

    def sample(self, prompts: list[Prompt], seed: int, k: int, kwargs: dict | None = None) -> list[list[Answer]]:
        """`k` answers per prompt: each prompt repeated k times in one call, so the samples differ by the random
        state (transformers) or by their request seed (servers)."""
        answers = self.generate([p for p in prompts for _ in range(k)], seed, kwargs)
        return [answers[i * k:(i + 1) * k] for i in range(len(prompts))]

    def serve(self, section: GeneratorSection) -> bool:
        """Switch to `section`'s model without building anything anew, where this generator can: True if it now
        serves that model (the template and its kwargs as `section` and the defaults say), False if it needs a
        generator of its own."""
        return False

    def close(self) -> None:
        """Free the model (GPU memory) before the other side loads."""

    def provenance(self) -> dict:
        sampling = {k: getattr(self.section, k) for k in ("temperature", "top_p", "max_new_tokens")}
        return {"model": self.section.source, "backend": self.section.backend, "sampling": sampling,
                "think": self.section.think, "template_sha256": self.template_sha256}


def template_kwargs(section: GeneratorSection, defaults: dict) -> dict:
    kwargs = dict(defaults)
    if section.think is not None:
        kwargs["enable_thinking"] = section.think
    return kwargs


class TransformersGenerator(Generator):
    """Batched `model.generate` with left padding; stops at the template's end-of-turn token."""

    def __init__(self, where: str, section: GeneratorSection, template_name: str, defaults: dict):
        import torch

        self.where, self.section = where, section
        model_section = ModelSection(source=section.source)
        source = resolve_source(section.source)  # classified once, for the tokenizer and the weights
        self.tokenizer, self.template = load_tokenizer(model_section, section.template or template_name, source)
        self.tokenizer.padding_side = "left"
        self.template_sha256 = self.template.sha256
        hardware = detect_hardware()
        self.model = load_model(model_section, generation_dtype("auto", hardware, model_width(source)), hardware,
                                self.tokenizer, source)
        self.device = torch.device("cuda") if hardware.on_gpu else torch.device("cpu")
        self.model.to(self.device).eval()
        self.kwargs = template_kwargs(section, defaults)
        self.specials = {k: v for k, v in self.tokenizer.special_tokens_map.items() if isinstance(v, str)}

    def render(self, prompt: Prompt, kwargs: dict | None = None) -> str:
        return render(self.template, prompt.messages, add_generation_prompt=True, special_tokens=self.specials,
                      **(self.kwargs if kwargs is None else kwargs))[0]

    def generate(self, prompts: list[Prompt], seed: int, kwargs: dict | None = None) -> list[Answer]:
        return self._generate(prompts, seed, 1, kwargs)

    def sample(self, prompts: list[Prompt], seed: int, k: int, kwargs: dict | None = None) -> list[list[Answer]]:
        """k answers per prompt from one `generate` call, each prompt read once for its k consecutive rows (greedy
        decoding gives k copies of one answer, so it repeats the prompts)."""
        if self.section.temperature <= 0 or k == 1:
            return super().sample(prompts, seed, k, kwargs)
        answers = self._generate(prompts, seed, k, kwargs)
        return [answers[i * k:(i + 1) * k] for i in range(len(prompts))]

    def _generate(self, prompts: list[Prompt], seed: int, k: int, kwargs: dict | None) -> list[Answer]:
        """Answers for every prompt, k consecutive ones per prompt."""
        import torch

        batch = self.tokenizer([self.render(p, kwargs) for p in prompts], add_special_tokens=False, padding=True,
                               return_tensors="pt").to(self.device)
        torch.manual_seed(seed)
        sampling, config = self.section.temperature > 0, copy.deepcopy(self.model.generation_config)
        answers, eos = [], self.tokenizer.eos_token_id
        config.update(max_new_tokens=self.section.max_new_tokens, do_sample=sampling, top_k=None, eos_token_id=eos,
                      temperature=self.section.temperature if sampling else None, top_p=self.section.top_p if
                      sampling else None, pad_token_id=self.tokenizer.pad_token_id)
        ids, mask = batch["input_ids"].repeat_interleave(k, 0), batch["attention_mask"].repeat_interleave(k, 0)
        with torch.no_grad(), fast_sampling(self.device.type):
            output = generate_sharing_prompts(self.model, input_ids=ids, attention_mask=mask, generation_config=config)
        for row in output[:, batch["input_ids"].shape[1]:].tolist():
            finished = eos in row
            kept = row[:row.index(eos)] if finished else row
            text = self.tokenizer.decode(kept, skip_special_tokens=True)
            ids = kept + [eos] if finished else kept
            answers.append(Answer(text.strip(), finished, len(ids), ids))
        return answers

    def close(self) -> None:
        del self.model
        free_accelerator_memory()


class VllmGenerator(Generator):
    """vLLM's offline engine in this process, fed the same templated prompt tokens as the transformers backend."""

    def __init__(self, where: str, section: GeneratorSection, template_name: str, defaults: dict):
        self.hardware = hardware = detect_hardware()
        require_vllm(f"{where}: backend vllm", hardware)
        self._restore = contextlib.ExitStack()  # the launcher's variables, put back when the engine closes
        self._restore.enter_context(kept_process_variables())
        self.where, self.template_name, self.defaults = where, template_name, defaults
        source = resolve_source(section.source)  # classified once, for the tokenizer and the engine
        self.model_dir = local_dir(source)
        self._take(section, source)
        check_model(f"{where}: backend vllm", self.model_dir, hardware)
        self.engine_section = section
        self.llm = offline_engine(f"{where}: backend vllm", engine_options(
            self.model_dir, hardware,
            dtype=generation_dtype(ModelSection(source=section.source).dtype, hardware, model_width(source)),
            sequence_tokens=section.max_new_tokens + PROMPT_TOKENS, sequences=section.batch_size,
            tensor_parallel=section.tensor_parallel,
            gpu_memory_utilization=float(os.environ.get("SMOLALIGN_VLLM_GPU_MEMORY", "0.85"))), hardware)

    def _take(self, section: GeneratorSection, source) -> None:
        """Read `section`'s model's tokenizer and template (`source`, resolved): prompts are rendered with them."""
        self.section = section
        self.tokenizer, self.template = load_tokenizer(ModelSection(source=section.source),
                                                       section.template or self.template_name, source)
        self.template_sha256 = self.template.sha256
        self.kwargs = template_kwargs(section, self.defaults)
        self.specials = {k: v for k, v in self.tokenizer.special_tokens_map.items() if isinstance(v, str)}

    def serve(self, section: GeneratorSection) -> bool:
        """The engine keeps running with the next model's weights where it is built for one like it (same
        architecture, shapes, vocabulary and stop tokens: `vllm_engine.engine_serves`) and the engine's settings
        would be the same."""
        source = resolve_source(section.source)
        model_dir = local_dir(source)
        same_settings = all(getattr(section, key) == getattr(self.engine_section, key)
                            for key in ("max_new_tokens", "batch_size", "tensor_parallel"))
        if not same_settings or not engine_serves(self.model_dir, model_dir):
            return False
        try:
            reload_weights(self.llm, model_dir, self.hardware)
        except Exception:  # noqa: BLE001 - the engine is then closed and the model gets an engine of its own
            return False
        self.model_dir = model_dir
        self._take(section, source)
        return True

    def generate(self, prompts: list[Prompt], seed: int, kwargs: dict | None = None) -> list[Answer]:
        return [answers[0] for answers in self.sample(prompts, seed, 1, kwargs)]

    def sample(self, prompts: list[Prompt], seed: int, k: int, kwargs: dict | None = None) -> list[list[Answer]]:
        """k answers per prompt with SamplingParams.n: one request per prompt yields k different samples (k copies
        of a prompt under one seed would yield k identical ones). Each prompt's request has a seed of its own, drawn
        from `seed`: under one shared seed every prompt would draw the same random numbers, and a model whose
        distribution barely depends on the prompt would give every prompt the same answers."""
        from vllm import SamplingParams

        texts = [render(self.template, p.messages, add_generation_prompt=True, special_tokens=self.specials,
                        **(self.kwargs if kwargs is None else kwargs))[0] for p in prompts]
        ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        seeds = random.Random(seed).sample(range(2**31), len(prompts))
        params = [SamplingParams(n=k, temperature=self.section.temperature, top_p=self.section.top_p,
                                 max_tokens=self.section.max_new_tokens, seed=request_seed,
                                 stop_token_ids=[self.tokenizer.eos_token_id], skip_special_tokens=True)
                  for request_seed in seeds]
        outputs = self.llm.generate([{"prompt_token_ids": i} for i in ids], params, use_tqdm=False)
        return [[Answer(o.text.strip(), o.finish_reason == "stop", len(o.token_ids), list(o.token_ids))
                 for o in output.outputs] for output in outputs]

    def close(self) -> None:
        del self.llm
        leave_vllm_groups()  # the engine set up a process group of one: training in this process comes next
        self._restore.close()
        free_accelerator_memory()


class OpenAIGenerator(Generator):
    """Chat completions from a server that speaks the OpenAI API; `batch_size` requests in flight at once."""

    def __init__(self, where: str, section: GeneratorSection, template_name: str, defaults: dict):
        self.where, self.section = where, section
        self.base_url = section.base_url.rstrip("/")
        self.kwargs = template_kwargs(section, defaults)
        key = os.environ.get(section.api_key_env) if section.api_key_env else None
        if section.api_key_env and not key:
            raise SmolalignError(f"{where}.api_key_env: the environment variable {section.api_key_env} is not set")
        self.headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
        self.check_reachable()

    def check_reachable(self) -> None:
        """Fail before any work if the server does not answer; a missing /models route is fine."""
        request = urllib.request.Request(f"{self.base_url}/models", headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=min(self.section.timeout, 10)):
                pass
        except urllib.error.HTTPError:
            pass  # it answered
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SmolalignError(f"{self.where}: the server at {self.base_url} is unreachable ({reason}); start "
                                 f"it or fix {self.where}.base_url") from None

    def request(self, prompt: Prompt, seed: int, kwargs: dict | None = None) -> Answer:
        body = {"model": self.section.source, "messages": prompt.messages, "temperature": self.section.temperature,
                "top_p": self.section.top_p, "max_tokens": self.section.max_new_tokens, "seed": seed}
        kwargs = self.kwargs if kwargs is None else kwargs
        if kwargs:
            body["chat_template_kwargs"] = kwargs
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=json.dumps(body).encode(),
                                         headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.section.timeout) as response:
                reply = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode(errors="replace")
            raise SmolalignError(f"{self.where}: the server at {self.base_url} answered {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise SmolalignError(f"{self.where}: no answer from {self.base_url} "
                                 f"({getattr(exc, 'reason', exc)})") from None
        try:
            choice = reply["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise SmolalignError(f"{self.where}: the server's reply is not a chat completion: "
                                 f"{str(reply)[:200]}") from None
        text = message.get("content") or ""
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning:  # servers with a reasoning parser return the think block separately
            text = f"<think>\n{reasoning.strip()}\n</think>\n{text}"
        tokens = (reply.get("usage") or {}).get("completion_tokens") or 0
        return Answer(text.strip(), choice.get("finish_reason") == "stop", int(tokens))

    def generate(self, prompts: list[Prompt], seed: int, kwargs: dict | None = None) -> list[Answer]:
        with ThreadPoolExecutor(max_workers=self.section.batch_size) as pool:
            return list(pool.map(lambda item: self.request(item[1], seed + item[0], kwargs), enumerate(prompts)))


BACKENDS = {"transformers": TransformersGenerator, "vllm": VllmGenerator, "openai": OpenAIGenerator}


def make_generator(where: str, section: GeneratorSection, template_name: str, defaults: dict) -> Generator:
    return BACKENDS[section.backend](where, section, template_name, defaults)

