"""TRL's RepeatSampler given a `set_epoch` (`stages.epoch_order`): each epoch's order is the one TRL's own sampler
draws in an uninterrupted run, whether the epochs before it were read or not (a resume skips them unread)."""

from smolalign.stages.epoch_order import epochs_in_order


def _sampler():
    from trl.trainer.utils import RepeatSampler

    return RepeatSampler(list(range(10)), mini_repeat_count=2, batch_size=2, repeat_count=1, seed=42)


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


def test_the_sampler_is_as_it_comes_once_training_ends():
    from trl.trainer.utils import RepeatSampler

    with epochs_in_order():
        assert hasattr(RepeatSampler, "set_epoch")
    assert not hasattr(RepeatSampler, "set_epoch")
