"""The order TRL's `RepeatSampler` (GRPO, RLOO, distillation, GOLD) reads its prompts in, each epoch, after a resume.

The sampler shuffles with a generator of its own, seeded once when it is built: each epoch draws the next
permutation. It has no `set_epoch`, and its generator is not in the checkpoint's RNG state, so a run resumed in a later
epoch (transformers skips the finished epochs without iterating them) read the first epoch's order again, then the
second's: the steps after the checkpoint trained on other prompts than the uninterrupted run's, without a word.

`epochs_in_order` gives the sampler a `set_epoch`, which transformers calls (through accelerate's data loader) before
each epoch: the generator is seeded again and moved past the permutations of the epochs before, so epoch e reads the
permutation an uninterrupted run draws for it, resumed or not. With several processes accelerate shards the batches
(`BatchSamplerShard`), and a resume inside an epoch skips the batches already trained (`SkipBatchSampler`); neither
passes `set_epoch` on, and neither transformers nor accelerate reaches through both, so they get a `set_epoch` that
hands it down to the sampler.
"""

import contextlib
from collections.abc import Iterator

from smolalign.library_patch import added


def set_epoch(sampler, epoch: int) -> None:
    """The sampler's generator as an uninterrupted run has it when epoch `epoch` starts."""
    import torch

    if not sampler.shuffle or sampler.seed is None:  # unseeded: no order to keep
        return
    sampler.generator.manual_seed(sampler.seed)
    for _ in range(epoch):
        torch.randperm(sampler.num_samples, generator=sampler.generator)


def hand_down(wrapper, epoch: int) -> None:
    """`set_epoch` of the first sampler down a wrapper's `batch_sampler`/`sampler` chain that has one."""
    for name in ("batch_sampler", "sampler"):
        inner = getattr(wrapper, name, None)
        if inner is None or inner is wrapper:
            continue
        if hasattr(inner, "set_epoch"):
            inner.set_epoch(epoch)
        else:
            hand_down(inner, epoch)
        return


@contextlib.contextmanager
def epochs_in_order() -> Iterator[None]:
    """While it is open, TRL's RepeatSampler reads each epoch in the uninterrupted run's order."""
    from accelerate.data_loader import BatchSamplerShard, SkipBatchSampler
    from trl.trainer.utils import RepeatSampler

    with contextlib.ExitStack() as patches:
        patches.enter_context(added(RepeatSampler, "set_epoch", set_epoch))
        for wrapper in (BatchSamplerShard, SkipBatchSampler):
            patches.enter_context(added(wrapper, "set_epoch", hand_down))
        yield
