"""A stand-in for vLLM's offline engine (`from vllm import LLM, SamplingParams`) on machines without a GPU: the
constructor and `generate` signatures of vLLM 0.31 that smolalign calls, answers sampled by transformers from the
same model directory (n samples of a request from one seeded `generate` call, as vLLM's `n` gives), and the output
objects vLLM returns (`RequestOutput.outputs`: `CompletionOutput` with text, token_ids, finish_reason "stop" or
"length").

STANDIN_RECORD: a file that receives one JSON line per engine start and per `generate` call (the requests' token ids
and the sampling parameters), for a test to assert on what the engine was asked.
"""

import dataclasses
import json
import os

__version__ = "0.31.0+standin"


def _note(**values) -> None:
    if os.environ.get("STANDIN_RECORD"):
        with open(os.environ["STANDIN_RECORD"], "a") as out:
            out.write(json.dumps(values) + "\n")


@dataclasses.dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    max_tokens: int | None = 16
    stop_token_ids: list[int] | None = None
    skip_special_tokens: bool = True


@dataclasses.dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: None
    finish_reason: str | None
    stop_reason: int | str | None = None


@dataclasses.dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool = True


class LLM:
    def __init__(self, model: str, tokenizer: str | None = None, dtype: str = "auto", tensor_parallel_size: int = 1,
                 gpu_memory_utilization: float = 0.9, seed: int = 0, **kwargs):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer or model)
        self.model = AutoModelForCausalLM.from_pretrained(model).eval()
        _note(event="engine", model=model, dtype=dtype, tensor_parallel_size=tensor_parallel_size,
              gpu_memory_utilization=gpu_memory_utilization)

    def generate(self, prompts, sampling_params: SamplingParams | None = None, use_tqdm: bool = True,
                 lora_request=None, **kwargs) -> list[RequestOutput]:
        import torch

        params = sampling_params or SamplingParams()
        prompts = prompts if isinstance(prompts, list) else [prompts]
        _note(event="generate", requests=[p["prompt_token_ids"] for p in prompts],
              sampling=dataclasses.asdict(params))
        eos = (params.stop_token_ids or [self.tokenizer.eos_token_id])[0]
        results = []
        for number, prompt in enumerate(prompts):
            ids = torch.tensor([prompt["prompt_token_ids"]])
            if params.seed is not None:
                torch.manual_seed(params.seed)
            with torch.no_grad():
                out = self.model.generate(
                    input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=params.temperature > 0,
                    temperature=params.temperature or None, top_p=params.top_p, max_new_tokens=params.max_tokens,
                    num_return_sequences=params.n, eos_token_id=eos, pad_token_id=eos)
            outputs = []
            for index, row in enumerate(out[:, ids.shape[1]:].tolist()):
                stopped = eos in row
                tokens = row[:row.index(eos) + 1] if stopped else row
                text = self.tokenizer.decode([t for t in tokens if t != eos],
                                             skip_special_tokens=params.skip_special_tokens)
                outputs.append(CompletionOutput(index, text, tokens, None, None, "stop" if stopped else "length",
                                                eos if stopped else None))
            results.append(RequestOutput(str(number), None, prompt["prompt_token_ids"], outputs))
        return results
