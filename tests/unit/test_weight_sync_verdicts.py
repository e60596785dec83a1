"""The weight-sync check's verdicts (smolalign/stages/weight_sync.py), on log-probs made up by hand: the first sync sets
the tolerance from the gap between engine and policy on the same weights (twice it, plus 0.01 nats); later syncs are
verified when the engine is within it of the current policy and outside it of the last verified one, undecided when
within it of both (the reference then stays, so movement adds up), and stop the run when the engine scores like the
old policy (stale) or like neither."""

import pytest
import torch

from smolalign.errors import RunFailure
from smolalign.stages.weight_sync import SyncCheck

START = torch.tensor([-1.0, -2.0, -0.5, -3.0])


def shifted(by: float) -> torch.Tensor:
    """Log-probs that differ from START by `by` nats per token on average (alternating signs)."""
    return START + torch.tensor([by, -by, by, -by])


def first_checked(gap: float = 0.02) -> SyncCheck:
    check = SyncCheck("colocate")
    assert check.judge(0, shifted(gap), START)["sync/verified"] == 1
    return check


def test_the_first_sync_sets_the_tolerance_from_the_precision_gap():
    check = first_checked(0.02)
    assert check.tolerance == pytest.approx(2 * 0.02 + 0.01)
    assert check.reference_step == 0


def test_a_first_sync_far_from_the_policy_is_another_model():
    with pytest.raises(RunFailure, match=r"does not hold the weights being trained at step 0.*0\.3000 nats.*revision"):
        SyncCheck("server").judge(0, shifted(0.3), START)


def test_an_engine_that_follows_the_policy_is_verified_and_becomes_the_reference():
    check = first_checked()
    moved = START + 0.5
    values = check.judge(1, moved + torch.tensor([0.02, -0.02, 0.0, 0.0]), moved)
    assert values["sync/verified"] == 1
    assert values["sync/engine_gap"] == pytest.approx(0.01)
    assert values["sync/policy_moved"] == pytest.approx(0.5)
    assert values["sync/reference_gap"] == pytest.approx(0.5, abs=0.011)
    assert check.reference_step == 1 and torch.equal(check.reference, moved)


def test_an_engine_left_on_the_old_policy_is_stale():
    check = first_checked()
    with pytest.raises(RunFailure, match=r"engine is stale at step 1: .*like the policy of step 0 \(0\.0200 nats.*"
                                         r"differ from the current policy's by 0\.5\d* nats.*merge_adapter"):
        check.judge(1, shifted(0.02), START + 0.5)


def test_movement_within_the_tolerance_is_undecided_and_adds_up_until_it_decides():
    check = first_checked()  # tolerance 0.05
    values = check.judge(1, shifted(0.02), START + 0.03)  # a stale engine, a policy that moved 0.03: cannot tell
    assert values["sync/verified"] == 0 and check.reference_step == 0
    with pytest.raises(RunFailure, match=r"stale at step 2: .*like the policy of step 0"):
        check.judge(2, shifted(0.02), START + 0.08)  # 0.08 from the step-0 policy, the reference that stayed


def test_an_engine_like_neither_policy_stops_the_run():
    check = first_checked()
    with pytest.raises(RunFailure, match=r"vLLM server is stale at step 1: .*like neither the policy being trained nor "
                                         r"that of step 0.*VLLM_HOST_IP"):
        check.mode = "server"
        check.judge(1, START - 2.0, START + 0.5)
