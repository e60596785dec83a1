"""The GPU tier on a 1-GPU and an 8-GPU node: the test session's own conftest narrows the in-process view to one GPU
and hands a multi-GPU test the node's first GPUs, also in pytest-xdist workers. The node is described the way CUDA
reads it, through CUDA_VISIBLE_DEVICES (the stand-in for GPUs here); a probe test in a child pytest session reports
what it sees."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = "SMOLALIGN_NODE_PROBE"
PROBE_FILE = Path(__file__).parents[1] / "node_gpus_probe.py"
"""Not a test file of the suite (its name): collected only when a child session is given it."""


@pytest.mark.parametrize(("node", "processes"), [("0", 0), ("0,1,2,3,4,5,6,7", 2)])
def test_each_test_sees_the_gpus_it_needs(tmp_path, node, processes):
    env = {k: v for k, v in os.environ.items() if k != "SMOLALIGN_TEST_NODE_GPUS"}
    env.update({"CUDA_VISIBLE_DEVICES": node, PROBE: str(tmp_path)})
    workers = ["-p", "xdist", "-n", str(processes)] if processes else []
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", *workers, str(PROBE_FILE)], env=env,
                          capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [seen] = [json.loads(p.read_text()) for p in tmp_path.iterdir()]
    gpus = node.split(",")
    assert seen == {"visible": gpus[0], "node": gpus, "two": ",".join(gpus[:2])}
