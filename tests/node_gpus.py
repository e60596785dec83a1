"""The GPUs of the node the tests run on, handed out per test.

In-process tests see one GPU: CUDA_VISIBLE_DEVICES is narrowed to the node's first before anything starts CUDA in
the test process (conftest does it first thing). A process seeing several would run torch's DataParallel, which
TRL's trainers refuse, and the train verbs now start one process per visible GPU. A test that needs more GPUs is
marked `needs_gpus(n)` (skipped where the node has fewer) and runs its command in a child process given
`gpus_for(n)`. The node's list is kept in an environment variable, so that pytest-xdist's workers, started from the
narrowed controller, still know it."""

import os

import pytest

NODE_GPUS_VARIABLE = "SMOLALIGN_TEST_NODE_GPUS"


def node_gpus() -> list[str]:
    """The node's GPUs as CUDA_VISIBLE_DEVICES entries (counted through NVML: CUDA does not start)."""
    if NODE_GPUS_VARIABLE not in os.environ:
        from smolalign.gpu_partition import visible_devices

        os.environ[NODE_GPUS_VARIABLE] = ",".join(visible_devices())
    return [g for g in os.environ[NODE_GPUS_VARIABLE].split(",") if g]


def pin_one_gpu() -> None:
    """Before CUDA starts: this process sees the node's first GPU only."""
    gpus = node_gpus()
    if len(gpus) > 1:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[0]


def gpus_for(count: int) -> str:
    """CUDA_VISIBLE_DEVICES for a child process that needs `count` GPUs."""
    return ",".join(node_gpus()[:count])


def needs_gpus(count: int):
    return pytest.mark.skipif(len(node_gpus()) < count, reason=f"needs {count} GPUs on one node")
