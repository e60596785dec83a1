"""Every change a training run makes to the libraries it trains with, in one context that the lifecycle opens around
loading and training (`stages.lifecycle.run_lifecycle`) and that undoes each change when training ends, so that the
final save, the evaluation and whatever runs next in the process see the libraries as they come. Each change holds its
library's original itself (`library_patch.replaced`).

On every device, TRL's `RepeatSampler` (GRPO, RLOO, distillation, GOLD) reads each epoch in the order an uninterrupted
run reads it, also after a resume in a later epoch (`stages.epoch_order`).

On a GPU nothing else applies. On a CPU:
- TRL projects only the positions it scores through the vocabulary (`stages.scored_positions`);
- TRL's trainers that sample with transformers generate from a bfloat16 copy of a float32 policy
  (`stages.generation_copy`);
- transformers finds a top-p nucleus among the most likely tokens and draws each token from one uniform number
  (`generation.transformers_sampler`);
- a run that compiles (`train.torch_compile`) keeps TorchInductor's precompiled C++ header with its other compiled
  kernels (`stages.compile_cache`);
- for a stage whose policy generates with vLLM, TRL builds its colocated engine with this machine's settings and
  writable weights, or its server client syncing weights through a file (`generation.trl_on_cpu`). TRL builds them
  with the trainer; for the rest of the run the changed builders are not called again.
"""

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from smolalign.generation.transformers_sampler import fast_sampling
from smolalign.generation.trl_on_cpu import trl_generation_on_cpu
from smolalign.generation.vllm_engine import generated_tokens
from smolalign.resolve import Run
from smolalign.stages.compile_cache import precompiled_header_kept
from smolalign.stages.epoch_order import epochs_in_order
from smolalign.stages.generating import policy_generation_dtype
from smolalign.stages.generation_copy import bf16_generation_copy
from smolalign.stages.scored_positions import scored_positions_only


@contextmanager
def library_patches(run: Run, *, generates: bool) -> Iterator[None]:
    """While it is open, the libraries work as the module docstring says for `run` on its hardware; `generates`: the
    stage's policy generates while it trains."""
    accelerator = run.hardware.accelerator
    with ExitStack() as patches:
        patches.enter_context(epochs_in_order())
        patches.enter_context(scored_positions_only(accelerator))
        patches.enter_context(bf16_generation_copy(accelerator))
        patches.enter_context(fast_sampling(accelerator))
        patches.enter_context(precompiled_header_kept(accelerator, bool(run.settings.train.get("torch_compile"))))
        if generates:
            patches.enter_context(trl_generation_on_cpu(run.recipe.generation, run.hardware,
                                                        dtype=policy_generation_dtype(run),
                                                        sequence_tokens=generated_tokens(run)))
        yield
