"""train.ddp_timeout is the timeout of the process group a launched run creates: the group is created when the run
opens, before TRL's config exists, and the other ranks wait at a barrier while rank 0 prepares the data. Read back
from the gloo group of two real processes (torchrun); without the timeout handed to the group, torch's 30-minute
default comes back and this test fails."""

import subprocess
import sys

from tiny_models import chat_rows, write_jsonl

from smolalign.ports import free_port

OPEN_AND_READ = """
import sys
from pathlib import Path
import torch, torch.distributed as dist
from smolalign.resolve import load_run
from smolalign.stages.lifecycle import open_run
run = load_run(sys.argv[1], [], "sft")
open_run(run, Path(sys.argv[2]), resume=False, overwrite=False)
group = dist.distributed_c10d._get_default_group()
timeout = group._get_backend(torch.device("cpu")).options._timeout.total_seconds()
Path(sys.argv[3], f"rank-{dist.get_rank()}").write_text(f"{dist.get_world_size()} {timeout}")
dist.destroy_process_group()
"""


def test_the_recipes_ddp_timeout_is_the_process_groups(write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(4))
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 128, "max_steps": 1, "ddp_timeout": 4321}})
    script = tmp_path / "open_run.py"
    script.write_text(OPEN_AND_READ)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port()),
                           str(script), str(recipe), str(tmp_path / "run"), str(tmp_path)],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = {path.name: path.read_text() for path in tmp_path.glob("rank-*")}
    assert seen == {"rank-0": "2 4321.0", "rank-1": "2 4321.0"}
