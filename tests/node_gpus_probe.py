"""A probe for tests/integration/test_node_gpus.py, run in a child pytest session under the test session's own
conftest: it writes what its test process sees of the node's GPUs."""

import json
import os
from pathlib import Path


def test_probe():
    from node_gpus import gpus_for, node_gpus

    seen = {"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "node": node_gpus(), "two": gpus_for(2)}
    Path(os.environ["SMOLALIGN_NODE_PROBE"], os.environ.get("PYTEST_XDIST_WORKER", "main")).write_text(json.dumps(seen))
