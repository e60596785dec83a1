"""TRL's RepeatSampler given a `set_epoch` (`stages.epoch_order`): each epoch's order is the one TRL's own sampler
draws in an uninterrupted run, whether the epochs before it were read or not (a resume skips them unread)."""

import pytest

from smolalign.stages.epoch_order import epochs_in_order


def _sampler():
    from trl.trainer.utils import RepeatSampler

    return RepeatSampler(list(range(16)), mini_repeat_count=1, batch_size=2, repeat_count=1, seed=42)


def test_each_epoch_reads_trls_own_order_read_or_skipped():
    plain = _sampler()
    trls = [list(plain) for _ in range(4)]  # TRL as it comes: epoch after epoch from one generator
    assert len({tuple(order) for order in trls}) == 4
    with epochs_in_order():
        read = _sampler()
        in_order = []
        for epoch in range(4):
            read.set_epoch(epoch)  # transformers calls it before each epoch, through accelerate's data loader
            in_order.append(list(read))
        resumed = _sampler()
        resumed.set_epoch(2)  # a resume in the third epoch: the two before it are never iterated
        assert list(resumed) == trls[2]
    assert in_order == trls


@pytest.mark.parametrize("processes", [1, 2])
def test_a_resume_inside_an_epoch_reads_its_order_through_accelerates_wrappers(processes):
    """As transformers resumes inside epoch 1: accelerate's data loader (its batches sharded over two processes),
    then `skip_first_batches`, then `set_epoch`. The batches left are the uninterrupted epoch's, on each process."""
    import torch
    from accelerate.data_loader import prepare_data_loader, skip_first_batches
    from torch.utils.data import DataLoader

    def loader(rank):
        return prepare_data_loader(DataLoader(list(range(16)), sampler=_sampler(), batch_size=2),
                                   device=torch.device("cpu"), num_processes=processes, process_index=rank,
                                   put_on_device=False)

    with epochs_in_order():
        for rank in range(processes):
            whole = loader(rank)
            epochs = []
            for epoch in range(2):
                whole.set_epoch(epoch)
                epochs.append([batch.tolist() for batch in whole])
            assert epochs[0] != epochs[1]
            resumed = skip_first_batches(loader(rank), 1)
            resumed.set_epoch(1)
            assert [batch.tolist() for batch in resumed] == epochs[1][1:]


def test_the_sampler_is_as_it_comes_once_training_ends():
    from accelerate.data_loader import BatchSamplerShard, SkipBatchSampler
    from trl.trainer.utils import RepeatSampler

    with epochs_in_order():
        assert all(hasattr(c, "set_epoch") for c in (RepeatSampler, BatchSamplerShard, SkipBatchSampler))
    assert not any(hasattr(c, "set_epoch") for c in (RepeatSampler, BatchSamplerShard, SkipBatchSampler))
