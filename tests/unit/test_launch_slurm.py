"""`smolalign launch slurm`: the sbatch script is valid bash; run against fake `scontrol`, `srun`, `accelerate`,
`trl`, `curl` and `apptainer`, it gives the nodes their roles, wires the c10d rendezvous, starts vLLM on the last
node only and waits for it, runs every step in a container image when asked (the fake srun enters a fake image only
through pyxis's or apptainer's arguments, and checks that what the step uses is mounted), and on USR1 passes the
signal on to training and requeues once it has stopped; bad input exits 2 before any script is written."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_models import chat_rows, write_jsonl

REPO = Path(__file__).resolve().parents[2]
MODEL = "some-org/some-model"  # a hub id: resolved without a download, and what vLLM is told to serve

SHIM = """#!{python}
import json, os, shlex, sys, time
from pathlib import Path
name, args = Path(sys.argv[0]).name, sys.argv[1:]
fake = Path(os.environ["FAKE_DIR"])
keep = ("SLURM_PROCID", "SLURMD_NODENAME", "SMOLALIGN_LAUNCHED", "OMP_NUM_THREADS", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "NCCL_ASYNC_ERROR_HANDLING", "MAIN_PROCESS_IP", "MAIN_PROCESS_PORT", "VLLM_URL", "RUN_MODE", "FAKE_IN_IMAGE",
        "HF_HOME", "SMOLALIGN_CACHE", "HOME", "VLLM_HOST_IP")


def option(args, name):
    return args[args.index(name) + 1]


def descendants(pid):
    children = {{}}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def enter_image(image, mounts, workdir, command, host_wins=(), stated=None):
    # What a container runtime does, checked: the image exists on the cluster, each mount is a host path at the same
    # place, the HF cache and smolalign's cache (as the step sees them) and the working directory are mounted, every
    # host path the command names is visible through a mount, and nothing activates a host environment. The step's
    # environment is built as the runtimes document it: the host's, then the image's ENV (the Dockerfile's) over it,
    # then what the step's options state: pyxis's --container-env names (the host's value wins again),
    # apptainer's --env values. The step sees the image's PATH, not the host's.
    def fail(why):
        sys.exit(f"fake container runtime: {{why}}")
    if image != os.environ.get("FAKE_IMAGE"):
        fail(f"no image {{image!r}} on this cluster")
    env = {{**os.environ, **json.loads((fake / "image" / "env.json").read_text())}}
    env.update({{name: os.environ[name] for name in host_wins if name in os.environ}})
    env.update(stated or {{}})
    pairs = [m.split(":") for m in mounts.split(",") if m]
    if any(len(p) != 2 or p[0] != p[1] or not Path(p[0]).exists() for p in pairs):
        fail(f"mounts {{mounts!r}}: each must be an existing host path at the same path")
    mounted = [Path(p[0]) for p in pairs]
    seen = lambda path: any(Path(path).is_relative_to(m) for m in mounted)
    for cache in ("HF_HOME", "SMOLALIGN_CACHE"):
        if cache not in env or not seen(env[cache]):
            fail(f"{{cache}} {{env.get(cache)}} is not mounted: the step would download and prepare on its own")
    if not workdir or not seen(workdir):
        fail(f"the working directory {{workdir}} is not mounted")
    text = " ".join(command)
    if "activate" in text or "source " in text:
        fail(f"the step activates a host environment: {{text}}")
    if "-m smolalign " not in text and "trl vllm-serve" not in text:
        fail(f"the step does not run smolalign (or the vLLM server) in the image: {{text}}")
    for word in shlex.split(text.replace(";", " ")):
        for part in word.split("="):
            if part.startswith("/") and Path(part).exists() and not seen(part):
                fail(f"{{part}} is not visible in the container (not mounted)")
    record = dict(image=image, mounts=[str(m) for m in mounted], workdir=workdir, command=command)
    with open(fake / "containers.jsonl", "a") as log:
        log.write(json.dumps(record) + "\\n")
    return {{**env, "PATH": f"{{fake / 'image' / 'bin'}}:/usr/bin:/bin", "FAKE_IN_IMAGE": image}}


with open(fake / "calls.jsonl", "a") as log:
    log.write(json.dumps({{"tool": name, "args": args, "env": {{k: os.environ.get(k) for k in keep}}}}) + "\\n")
if name == "scontrol" and args[:2] == ["show", "hostnames"]:
    print("\\n".join(os.environ["FAKE_NODES"].split()))
elif name == "scontrol" and args[0] == "requeue":
    (fake / "requeued").touch()
elif name == "srun":
    import signal, subprocess
    options = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
    command = args[next(i for i, a in enumerate(args) if not a.startswith("--")):]
    nodes = options["nodelist"].split(",")
    assert len(nodes) == int(options["ntasks"]), options
    env = dict(os.environ)
    if "container-image" in options:  # pyxis
        env = enter_image(options["container-image"], options.get("container-mounts", ""),
                          options.get("container-workdir"), command,
                          host_wins=[n for n in options.get("container-env", "").split(",") if n])
        if os.environ.get("FAKE_PYXIS_ENTRYPOINT"):  # a site whose pyxis executes the image's ENTRYPOINT first
            command = json.loads((fake / "image" / "entrypoint.json").read_text()) + command
    envs = [{{**env, "SLURM_PROCID": str(rank), "SLURMD_NODENAME": node}} for rank, node in enumerate(nodes)]
    if "container-image" in options or command[:1] == ["apptainer"]:  # the node pulls the image first
        time.sleep(float(os.environ.get("FAKE_PULL_SECONDS", "0")))
    output = open(options["output"], "a") if "output" in options else None  # slurmstepd writes the step's log
    # slurmstepd makes each task the leader of a process group of its own
    tasks = [subprocess.Popen(command, env=env, stdout=output, stderr=output, process_group=0) for env in envs]

    def forward(signum, frame):  # as slurmstepd signals a step, by its process tracking (slurm.conf ProctrackType):
        for task in tasks:  # proctrack/pgid: each task's process group; proctrack/cgroup: every process of the step
            if os.environ.get("FAKE_PROCTRACK") == "pgid":
                try:
                    os.killpg(task.pid, signum)
                except ProcessLookupError:
                    pass
                continue
            for pid in [task.pid, *descendants(task.pid)]:
                try:
                    os.kill(pid, signum)
                except ProcessLookupError:
                    pass

    for forwarded in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT):
        signal.signal(forwarded, forward)
    sys.exit(max(task.wait() for task in tasks))
elif name == "apptainer":
    assert args[:2] == ["exec", "--nv"], args
    rest, flags = args[2:], {{}}
    while rest[0] in ("--bind", "--pwd", "--env"):
        flags[rest[0]], rest = rest[1], rest[2:]
    image, command = rest[0], rest[1:]
    # apptainer reads a name without a scheme as a local image file; a registry image needs docker:// (its docs)
    if "://" not in image and not image.endswith(".sif"):
        sys.exit(f"fake container runtime: apptainer reads {{image!r}} as a local file, and there is none")
    stated = dict(pair.split("=", 1) for pair in flags.get("--env", "").split(",") if pair)
    os.execvpe(command[0], command, enter_image(image.removeprefix("docker://"), flags["--bind"], flags["--pwd"],
                                                command, stated=stated))
elif name == "trl":
    if os.environ.get("FAKE_VLLM_FAILS"):
        sys.exit(1)
    (fake / "vllm-up").touch()
    time.sleep(60)
elif name == "getent" and args[0] == "ahostsv4":  # the cluster's names: node N at 10.0.0.N (streams, as glibc lists)
    number = "".join(c for c in args[1] if c.isdigit()) or "9"
    for kind in ("STREAM", "DGRAM", "RAW"):
        print(f"10.0.0.{{number}}    {{kind}} {{args[1] if kind == 'STREAM' else ''}}".rstrip())
elif name == "curl":  # as `curl -s -o /dev/null -w HTTP_CODE` answers: the status, 000 when unreachable
    print("200" if (fake / "vllm-up").exists() else "000", end="")
    sys.exit(0 if (fake / "vllm-up").exists() else 7)
elif name == "accelerate" and os.environ.get("FAKE_TRAIN_UNTIL_REQUEUED"):
    import signal, subprocess
    # As torchrun does: the launcher (which inherits the script's ignored USR1) starts the training rank in a session of
    # its own and exits 1 when the rank fails. The rank sets its own handler, saves (a file) only on USR1, and exits 75
    # then; without the signal it runs into its deadline.
    rank = (
        "import os, signal, sys, time; from pathlib import Path; fake = Path(os.environ['FAKE_DIR']); "
        "saved = fake / ('saved-' + os.environ['SLURM_PROCID']); "
        "signal.signal(signal.SIGUSR1, lambda signum, frame: saved.touch()); "
        "(fake / ('training-' + os.environ['SLURM_PROCID'])).touch(); deadline = time.monotonic() + 20\\n"
        "while not saved.exists() and time.monotonic() < deadline: time.sleep(0.05)\\n"
        "sys.exit(75 if saved.exists() else 1)")
    worker = subprocess.Popen([sys.executable, "-c", rank], start_new_session=True)
    sys.exit(1 if worker.wait() else 0)
elif name == "sbatch":
    print("Submitted batch job 4242")
"""


def dockerfile_env() -> dict[str, str]:
    """The variables the image's Dockerfile sets with ENV (PATH aside: the fake image has its own)."""
    import shlex as shell_words

    env = {}
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line.startswith("ENV "):
            env.update(word.split("=", 1) for word in shell_words.split(line[4:]) if "=" in word)
    env.pop("PATH", None)
    assert {"HOME", "HF_HOME"} <= set(env), env
    return env


def dockerfile_entrypoint() -> list[str]:
    """The image's ENTRYPOINT, as the Dockerfile sets it (exec form)."""
    [line] = [line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("ENTRYPOINT ")]
    return json.loads(line.removeprefix("ENTRYPOINT "))


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """A fake environment whose `activate` puts the Slurm, accelerate, trl and curl shims first on PATH; the
    preflight sees it as the GPU image (vLLM installed), which is what the job's nodes run."""
    monkeypatch.setattr("smolalign.target.installed", lambda module: module != "flash_attn")
    fake = tmp_path / "fake"
    bin_dir = fake / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    # venv/bin: this environment, all tools and python with smolalign; host/bin: a cluster's login and compute nodes (Slurm, curl, apptainer,
    # no smolalign); image/bin: the container image (accelerate, trl, python with smolalign).
    tools = {bin_dir: ("scontrol", "srun", "accelerate", "trl", "curl", "sbatch", "getent"),
             fake / "host" / "bin": ("scontrol", "srun", "curl", "sbatch", "apptainer", "getent"),
             fake / "image" / "bin": ("accelerate", "trl")}
    for directory, names in tools.items():
        directory.mkdir(parents=True, exist_ok=True)
        for tool in names:
            (directory / tool).write_text(SHIM.format(python=sys.executable))
            (directory / tool).chmod(0o755)
        # The script's waits (5 s between /health probes) pass in a tenth of their time: the order of events is what
        # is tested.
        (directory / "sleep").write_text(f"#!{sys.executable}\nimport sys, time\ntime.sleep(float(sys.argv[1]) / 10)\n")
        (directory / "sleep").chmod(0o755)
    for directory in (fake / "image" / "bin", bin_dir):  # the image's python and this environment's hold smolalign
        (directory / "python").write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} "$@"\n')
        (directory / "python").chmod(0o755)
    # The image's ENV, as the Dockerfile sets it (HOME, HF_HOME, ...), which the fake runtimes apply over the host's,
    # and its ENTRYPOINT, the file the Dockerfile copies, which pyxis runs first where a site asks it to.
    (fake / "image" / "env.json").write_text(json.dumps(dockerfile_env()))
    (fake / "image" / "entrypoint.json").write_text(json.dumps(dockerfile_entrypoint()))
    shutil.copy(REPO / "docker" / "entrypoint", fake / "image" / "bin" / "smolalign-entrypoint")
    (fake / "image" / "bin" / "smolalign").write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m smolalign "$@"\n')
    (fake / "image" / "bin" / "smolalign").chmod(0o755)
    (bin_dir / "activate").write_text(f'export PATH="{bin_dir}:$PATH"\n')
    monkeypatch.setattr("smolalign.slurm.job.environment_activation",
                        lambda: f"set +u; source {bin_dir / 'activate'}; set -u")
    monkeypatch.chdir(tmp_path)
    return fake


def run_script(script: Path, fake: Path, nodes: str, background: bool = False, **env):
    """The job script run as a node would; TMPDIR (where a node's `python -m smolalign.accelerate_config` writes the
    configs its launch reads, and leaves them) inside the test's folder."""
    (fake / "tmp").mkdir(exist_ok=True)
    environment = {"PATH": "/usr/bin:/bin", "TMPDIR": str(fake / "tmp"), "FAKE_DIR": str(fake), "FAKE_NODES": nodes,
                   "SLURM_JOB_ID": "4242",
                   "SLURM_JOB_NAME": "test", "SLURM_JOB_NODELIST": "node[1-9]", "SLURM_CPUS_ON_NODE": "32", **env}
    if background:
        return subprocess.Popen(["bash", str(script)], env=environment, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    return subprocess.run(["bash", str(script)], env=environment, capture_output=True, text=True, timeout=60)


def calls(fake: Path, tool: str) -> list[dict]:
    lines = (fake / "calls.jsonl").read_text().splitlines() if (fake / "calls.jsonl").exists() else []
    return [c for c in map(json.loads, lines) if c["tool"] == tool]


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def assert_runs_the_deepspeed_config_of_launch(config_file: str, preset: str) -> None:
    """A node's accelerate config names the DeepSpeed JSON that `--launch` and the CPU path run (buckets "auto",
    sized from the model by the trainer), not the preset's own settings (DeepSpeed's fixed default buckets)."""
    import yaml

    from smolalign.deepspeed_settings import deepspeed_config
    from smolalign.launch import preset_path, read_preset

    config = yaml.safe_load(Path(config_file).read_text())
    assert config["distributed_type"] == "DEEPSPEED"
    written = json.loads(Path(config["deepspeed_config"]["deepspeed_config_file"]).read_text())
    assert written == deepspeed_config(read_preset(preset_path(preset)), on_gpu=True)
    assert written["zero_optimization"]["reduce_bucket_size"] == "auto"
    assert written["zero_optimization"]["overlap_comm"] is True  # DeepSpeed's GPU default: NCCL beside compute


def torchrun_settings(accelerate_args: list[str]) -> dict:
    """What accelerate's own argument handling makes of one node's `accelerate launch` arguments: the settings it
    hands torchrun (the launchers are replaced by a capture, nothing starts)."""
    from unittest import mock

    import accelerate.commands.launch as launch
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    captured: dict = {}

    def multi_gpu(args):
        prepare_multi_gpu_env(args)
        captured.update(vars(args), launcher="torchrun")

    def deepspeed(args):
        command, _ = prepare_deepspeed_cmd_env(args)
        captured.update(vars(args), launcher="torchrun" if command is None else command[0])

    with mock.patch.object(launch, "multi_gpu_launcher", multi_gpu), \
            mock.patch.object(launch, "deepspeed_launcher", deepspeed):
        launch.launch_command(launch.launch_command_parser().parse_args(accelerate_args[1:]))
    return captured


@pytest.fixture
def sft_recipe(write_recipe, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(16))
    return str(write_recipe({"stage": "sft", "model": {"source": MODEL}, "data": {"sources": [{"path": str(data)}]},
                             "train": {"per_device_train_batch_size": 2, "max_length": 256, "save_steps": 10}},
                            "tiny-sft.yaml"))


@pytest.fixture
def rl_recipe(write_recipe, tmp_path):
    rows = [{"prompt": f"what is {i} plus {i}", "solution": str(2 * i)} for i in range(16)]
    data = write_jsonl(tmp_path / "prompts.jsonl", rows)

    def make(backend: str = "vllm_server", **server) -> str:
        return str(write_recipe({
            "stage": "rl", "method": "grpo", "model": {"source": MODEL, "revision": "v2"},
            "data": {"sources": [{"path": str(data)}]}, "rewards": [{"name": "math_accuracy"}],
            "generation": {"backend": backend, **({"server": {"port": 8123, "tensor_parallel": 2, **server}}
                                                  if backend == "vllm_server" else {})},
            "train": {"num_generations": 4, "per_device_train_batch_size": 4, "max_completion_length": 16}},
            "tiny-rl.yaml"))

    return make


def test_scripts_pass_bash_syntax_check(cli, cluster, sft_recipe, rl_recipe):
    for args in ([sft_recipe, "--nodes", "2"], [sft_recipe, "--nodes", "1", "--overwrite", "--preset", "ddp"],
                 [rl_recipe(), "--nodes", "2", "--vllm-nodes", "1"]):
        code, out, err = cli("launch", "slurm", *args, "--script", "job.sbatch")
        assert code == 0, err
        assert subprocess.run(["bash", "-n", "job.sbatch"], capture_output=True).returncode == 0


def test_header_asks_slurm_for_the_nodes_gpus_requeue_and_logs(cli, cluster, sft_recipe, tmp_path):
    code, out, err = cli("launch", "slurm", sft_recipe, "--nodes", "4", "--gpus-per-node", "4", "-p", "gpu",
                         "-t", "2-00:00:00", "-A", "lab", "--sbatch", "qos=high", "--signal-before", "600")
    assert code == 0, err
    script = tmp_path / "slurm" / "tiny-sft.sbatch"
    assert f"wrote {script}" in out and f"sbatch {script}" in out
    header = [line for line in script.read_text().splitlines() if line.startswith("#SBATCH")]
    assert header == ["#SBATCH --job-name=tiny-sft", "#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1",
                      "#SBATCH --gres=gpu:4", "#SBATCH --exclusive", "#SBATCH --mem=0", "#SBATCH --requeue",
                      "#SBATCH --signal=B:USR1@600", "#SBATCH --open-mode=append",
                      f"#SBATCH --output={tmp_path}/slurm/logs/%x-%j.out",
                      f"#SBATCH --error={tmp_path}/slurm/logs/%x-%j.err", "#SBATCH --partition=gpu",
                      "#SBATCH --time=2-00:00:00", "#SBATCH --account=lab", "#SBATCH --qos=high"]
    assert (tmp_path / "slurm" / "logs").is_dir()  # sbatch would not create it, and the job would have no logs
    code, out, err = cli("launch", "slurm", sft_recipe, "--nodes", "1", "-G", "4", "--sbatch", "gres=gpu:h100:4",
                         "--sbatch", "mem-per-gpu=80G", "--script", "-")
    assert code == 0, err
    header = [line for line in out.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --gres=gpu:h100:4" in header and "#SBATCH --gres=gpu:4" not in header
    assert "#SBATCH --mem-per-gpu=80G" in header and "#SBATCH --mem=0" not in header  # sbatch refuses both


def test_training_nodes_meet_at_a_c10d_rendezvous_on_the_first_node(cli, cluster, sft_recipe, tmp_path):
    code, out, err = cli("launch", "slurm", sft_recipe, "--nodes", "2", "--gpus-per-node", "4", "--set",
                         "train.learning_rate=1e-5", "-o", "runs/x", "--script", "job.sbatch",
                         "--main-process-port", "29555")
    assert code == 0, err
    done = run_script(tmp_path / "job.sbatch", cluster, "gpu-a gpu-b")
    assert done.returncode == 0, done.stderr
    [srun] = calls(cluster, "srun")
    assert "--nodelist=gpu-a,gpu-b" in srun["args"] and "--ntasks=2" in srun["args"]
    launches = calls(cluster, "accelerate")
    assert sorted(c["env"]["SLURMD_NODENAME"] for c in launches) == ["gpu-a", "gpu-b"]  # one launcher per node
    for launch in launches:
        args, env = launch["args"], launch["env"]
        assert args[0] == "launch"
        assert_runs_the_deepspeed_config_of_launch(option(args, "--config_file"), "zero3")
        assert option(args, "--num_machines") == "2" and option(args, "--num_processes") == "8"  # 2 nodes × 4 GPUs
        assert option(args, "--machine_rank") == env["SLURM_PROCID"]
        assert option(args, "--main_process_ip") == "gpu-a" and option(args, "--main_process_port") == "29555"
        assert option(args, "--rdzv_backend") == "c10d"
        assert option(args, "--deepspeed_multinode_launcher") == "standard"  # torchrun on each node, not pdsh
        tail = args[args.index("-m"):]
        assert tail == ["-m", "smolalign", "sft", sft_recipe, "--set", "train.learning_rate=1e-5", "--output-dir",
                        str(tmp_path / "runs" / "x"), "--resume"]
        assert env["SMOLALIGN_LAUNCHED"] == "1" and env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
        assert env["NCCL_ASYNC_ERROR_HANDLING"] == "1" and env["OMP_NUM_THREADS"] == "8"  # 32 CPUs / 4 GPUs
    assert sorted(c["env"]["SLURM_PROCID"] for c in launches) == ["0", "1"]
    assert calls(cluster, "trl") == [] and calls(cluster, "curl") == []
    for launch in launches:  # read by accelerate itself: every node joins gpu-a:29555 with 4 of the 8 processes
        settings = torchrun_settings(launch["args"])
        assert settings["launcher"] == "torchrun" and settings["rdzv_backend"] == "c10d"
        assert settings["rdzv_endpoint"] == "gpu-a:29555" and settings["nnodes"] == "2"
        assert settings["nproc_per_node"] == "4" and settings["node_rank"] == int(launch["env"]["SLURM_PROCID"])


def test_gradient_accumulation_keeps_the_global_batch_over_all_gpus(cli, cluster, sft_recipe, tmp_path):
    from launched_config import launched_sft_config

    code, out, err = cli("launch", "slurm", sft_recipe, "--nodes", "2", "--gpus-per-node", "8",
                         "--set", "launch.global_batch_size=128", "--script", "job.sbatch")
    assert code == 0, err
    # What each of the job's 16 processes builds for its trainer (WORLD_SIZE 16 from accelerate's launcher)
    config, hardware = launched_sft_config(sft_recipe, ["launch.global_batch_size=128"], 16, tmp_path / "run")
    assert config.gradient_accumulation_steps == 4 and hardware.world_size == 16
    assert config.per_device_train_batch_size * 16 * config.gradient_accumulation_steps == 128
    # 128 sequences / (per-device 2 × 16 processes) = 4, independently of the recipe's launch.num_processes (1)
    assert "gradient accumulation  4 (keeps launch.global_batch_size 128 over 16 process(es))" in out
    assert "world size             16 (cuda, 2 node(s) × 8 GPU(s) under Slurm)" in out
    assert "global batch           128" in out
    code, out, err = cli("launch", "slurm", sft_recipe, "--nodes", "3", "--set", "launch.global_batch_size=128")
    assert code == 2 and "not a multiple of per-device batch 2 × 24 process(es)" in err


def test_rl_with_a_vllm_node_serves_on_the_last_node_and_training_waits_for_it(cli, cluster, rl_recipe, tmp_path):
    code, out, err = cli("launch", "slurm", rl_recipe(), "--nodes", "2", "--vllm-nodes", "1", "--gpus-per-node", "2",
                         "--vllm-set", "max_model_len=4096", "--script", "job.sbatch")
    assert code == 0, err
    assert "#SBATCH --nodes=3" in (tmp_path / "job.sbatch").read_text()
    assert "vLLM server (http://VLLM_NODE:8123; weight-sync group port free, chosen at start)" in out  # the plan
    done = run_script(tmp_path / "job.sbatch", cluster, "n1 n2 n3")
    assert done.returncode == 0, done.stderr
    vllm_srun, train_srun = calls(cluster, "srun")
    assert "--nodelist=n3" in vllm_srun["args"] and "--ntasks=1" in vllm_srun["args"]
    assert "--nodelist=n1,n2" in train_srun["args"]
    [served] = calls(cluster, "trl")
    assert served["env"]["SLURMD_NODENAME"] == "n3"
    args = served["args"]
    assert args[0] == "vllm-serve" and option(args, "--model") == MODEL and option(args, "--revision") == "v2"
    assert option(args, "--tensor_parallel_size") == "2" and option(args, "--port") == "8123"
    assert option(args, "--host") == "0.0.0.0" and option(args, "--max_model_len") == "4096"
    assert {tuple(c["args"][-1:]) for c in calls(cluster, "curl")} == {("http://n3:8123/health",)}
    lines = (cluster / "calls.jsonl").read_text().splitlines()
    first_launch = next(i for i, line in enumerate(lines) if '"tool": "accelerate"' in line)
    last_probe = max(i for i, line in enumerate(lines) if '"tool": "curl"' in line)
    assert last_probe < first_launch  # training starts only once /health answers
    launches = calls(cluster, "accelerate")
    assert sorted(c["env"]["SLURMD_NODENAME"] for c in launches) == ["n1", "n2"]
    for launch in launches:
        args = launch["args"]
        assert option(args, "--num_machines") == "2" and option(args, "--num_processes") == "4"
        assert option(args, "--main_process_ip") == "n1"
        assert "generation.server.base_url=http://n3:8123" in args and args[-1] == "--resume"
        # the server joins training's weight-transfer group at the first training node's address, stated
        assert launch["env"]["VLLM_HOST_IP"] == "10.0.0.1"
    assert served["env"]["VLLM_HOST_IP"] is None  # the server's engine keeps its own address


def test_online_dpo_with_a_vllm_node_trains_against_the_served_model(cli, cluster, write_recipe, tmp_path):
    """TRL's online DPO talks to `trl vllm-serve` through the same VLLMClient as GRPO: the same server node."""
    data = write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus {i}", "solution": str(2 * i)}
                                                    for i in range(8)])
    recipe = write_recipe({
        "stage": "rl", "method": "online_dpo", "model": {"source": MODEL, "revision": "v2"},
        "data": {"sources": [{"path": str(data)}]}, "rewards": [{"name": "math_accuracy"}],
        "generation": {"backend": "vllm_server", "server": {"port": 8124, "tensor_parallel": 1}},
        "train": {"per_device_train_batch_size": 2, "max_new_tokens": 16, "max_length": 128}}, "online.yaml")
    code, out, err = cli("launch", "slurm", str(recipe), "--nodes", "1", "--vllm-nodes", "1", "--gpus-per-node", "1",
                         "--script", "job.sbatch")
    assert code == 0, err
    done = run_script(tmp_path / "job.sbatch", cluster, "n1 n2")
    assert done.returncode == 0, done.stderr
    [served] = calls(cluster, "trl")
    assert served["env"]["SLURMD_NODENAME"] == "n2" and option(served["args"], "--model") == MODEL
    [launch] = calls(cluster, "accelerate")
    assert launch["env"]["SLURMD_NODENAME"] == "n1"
    assert "generation.server.base_url=http://n2:8124" in launch["args"]


def test_a_vllm_server_that_dies_fails_the_job_before_training(cli, cluster, rl_recipe, tmp_path):
    assert cli("launch", "slurm", rl_recipe(), "--nodes", "1", "--vllm-nodes", "1", "--script", "job.sbatch")[0] == 0
    done = run_script(tmp_path / "job.sbatch", cluster, "n1 n2", FAKE_VLLM_FAILS="1")
    assert done.returncode == 1 and "the vLLM server on n2 exited before answering" in done.stderr
    assert calls(cluster, "accelerate") == []


@pytest.mark.parametrize("tracking", ["cgroup", "pgid"])
def test_usr1_reaches_training_then_the_job_requeues_and_the_next_run_resumes(cli, cluster, sft_recipe, tmp_path,
                                                                             tracking):
    """The fake training ranks (started in sessions of their own, as torchrun starts them) save (a file per rank)
    only on USR1 and exit 75 then: without the signal passed on to them, they run into their deadline and no rank
    saves. Under process-group tracking, srun's signal reaches only each task's group: the launchers, not the ranks."""
    assert cli("launch", "slurm", sft_recipe, "--nodes", "2", "--script", "job.sbatch")[0] == 0
    job = run_script(tmp_path / "job.sbatch", cluster, "a b", background=True, FAKE_TRAIN_UNTIL_REQUEUED="1",
                     FAKE_PROCTRACK=tracking)
    deadline = time.monotonic() + 30
    while not all((cluster / f"training-{rank}").exists() for rank in (0, 1)) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # both ranks have set their handlers
    job.send_signal(signal.SIGUSR1)  # what --signal=B:USR1@300 delivers to the batch shell
    out, err = job.communicate(timeout=60)
    assert (cluster / "saved-0").exists() and (cluster / "saved-1").exists()  # every rank got the signal
    assert job.returncode == 0, err  # a requeued job is not a failed one
    assert [c["args"] for c in calls(cluster, "scontrol") if c["args"][0] == "requeue"] == [["requeue", "4242"]]
    assert all(c["args"][-1] == "--resume" for c in calls(cluster, "accelerate"))


def test_overwrite_applies_to_the_first_run_only(cli, cluster, sft_recipe, tmp_path):
    assert cli("launch", "slurm", sft_recipe, "--nodes", "1", "--overwrite", "--script", "job.sbatch")[0] == 0
    for restarts, mode in (("0", "--overwrite"), ("1", "--resume")):
        (cluster / "calls.jsonl").unlink(missing_ok=True)
        done = run_script(tmp_path / "job.sbatch", cluster, "a", SLURM_RESTART_COUNT=restarts)
        assert done.returncode == 0, done.stderr
        assert [c["args"][-1] for c in calls(cluster, "accelerate")] == [mode]


def run_in_container(script: Path, fake: Path, nodes: str, tmp_path: Path, **env):
    """The script on a host without smolalign (only Slurm's tools, curl and apptainer on PATH)."""
    return run_script(script, fake, nodes, PATH=f"{fake / 'host' / 'bin'}:/usr/bin:/bin", FAKE_IMAGE="smolalign:1.0",
                      HF_HOME=str(tmp_path / "hf"), HOME=str(tmp_path / "home"), **env)


@pytest.mark.parametrize("entrypoint", ["", "executed"])
def test_with_pyxis_every_training_node_runs_smolalign_in_the_image(cli, cluster, sft_recipe, tmp_path, entrypoint):
    """The fake srun enters the image only through --container-image/--container-mounts, and refuses a step that
    names a host path not mounted or activates a host environment: with the container arguments left out, accelerate
    is not on the host's PATH and the job fails. Some sites' pyxis runs the image's ENTRYPOINT before the step's
    command (`bash -c ...`): the job runs the same."""
    code, out, err = cli("launch", "slurm", sft_recipe, "--nodes", "2", "-G", "4", "-o", "runs/x", "--script",
                         "job.sbatch", "--container", "smolalign:1.0")
    assert code == 0, err
    (tmp_path / "hf").mkdir()
    done = run_in_container(tmp_path / "job.sbatch", cluster, "gpu-a gpu-b", tmp_path, FAKE_PYXIS_ENTRYPOINT=entrypoint)
    assert done.returncode == 0, done.stderr
    launches = calls(cluster, "accelerate")
    assert sorted(c["env"]["SLURMD_NODENAME"] for c in launches) == ["gpu-a", "gpu-b"]
    run_dir = tmp_path / "runs" / "x"
    for launch in launches:
        args = launch["args"]
        assert launch["env"]["FAKE_IN_IMAGE"] == "smolalign:1.0" and launch["env"]["HF_HOME"] == str(tmp_path / "hf")
        # the host's caches over the image's own ENV; HOME stays the image's
        assert launch["env"]["SMOLALIGN_CACHE"] == str(tmp_path / "home" / ".cache" / "smolalign")
        assert launch["env"]["HOME"] == dockerfile_env()["HOME"]
        # the shipped preset, found and written out by the image's smolalign (here: this checkout)
        assert_runs_the_deepspeed_config_of_launch(option(args, "--config_file"), "zero3")
        assert args[args.index("-m"):] == ["-m", "smolalign", "sft", sft_recipe, "--output-dir", str(run_dir),
                                           "--resume"]
    [step] = [json.loads(line) for line in (cluster / "containers.jsonl").read_text().splitlines()]
    assert step["image"] == "smolalign:1.0" and step["workdir"] == str(tmp_path)
    assert {str(tmp_path), str(tmp_path / "hf")} <= set(step["mounts"])  # the run directory is inside tmp_path
    assert run_dir.is_dir()  # created before it is mounted
    assert "activate" not in (tmp_path / "job.sbatch").read_text()


def test_with_apptainer_the_vllm_server_and_training_run_in_the_image(cli, cluster, rl_recipe, tmp_path):
    elsewhere = tmp_path.parent / f"{tmp_path.name}-runs" / "run"  # outside the working directory: a mount of its own
    code, out, err = cli("launch", "slurm", rl_recipe(), "--nodes", "1", "--vllm-nodes", "1", "-G", "2",
                         "--script", "job.sbatch", "--container", "smolalign:1.0", "--container-runtime", "apptainer",
                         "-o", str(elsewhere))
    assert code == 0, err
    (tmp_path / "hf").mkdir()
    done = run_in_container(tmp_path / "job.sbatch", cluster, "n1 n2", tmp_path)
    assert done.returncode == 0, done.stderr
    [served] = calls(cluster, "trl")
    assert served["env"]["FAKE_IN_IMAGE"] == "smolalign:1.0" and served["env"]["SLURMD_NODENAME"] == "n2"
    assert served["env"]["HF_HOME"] == str(tmp_path / "hf")  # the server reads the host's models too
    [launch] = calls(cluster, "accelerate")
    assert launch["env"]["FAKE_IN_IMAGE"] == "smolalign:1.0" and launch["env"]["SLURMD_NODENAME"] == "n1"
    assert "generation.server.base_url=http://n2:8123" in launch["args"]
    assert [c["args"][:2] for c in calls(cluster, "apptainer")] == [["exec", "--nv"]] * 2
    steps = [json.loads(line) for line in (cluster / "containers.jsonl").read_text().splitlines()]
    assert len(steps) == 2 and all(str(elsewhere) in step["mounts"] for step in steps) and elsewhere.is_dir()


def test_the_servers_startup_deadline_starts_after_the_image_is_pulled(cli, cluster, rl_recipe, tmp_path):
    """The node pulls the image for 4 s (the fake srun) and the server answers as soon as it runs; a startup deadline
    of 2 s counts from the server's start, not from the srun line, so the job trains. Counted from the srun line (as
    it was), the pull alone ran it out."""
    code, out, err = cli("launch", "slurm", rl_recipe(startup_timeout=2), "--nodes", "1", "--vllm-nodes", "1", "-G",
                         "2", "--script", "job.sbatch", "--container", "smolalign:1.0")
    assert code == 0, err
    (tmp_path / "hf").mkdir()
    done = run_in_container(tmp_path / "job.sbatch", cluster, "n1 n2", tmp_path, FAKE_PULL_SECONDS="4")
    assert done.returncode == 0, done.stderr
    assert len(calls(cluster, "accelerate")) == 1
    [log] = (tmp_path / "logs").glob("*-vllm.log")
    assert "smolalign: the vLLM server process started on" in log.read_text()


def test_in_a_container_template_and_reward_files_elsewhere_are_mounted(cli, cluster, write_recipe, tmp_path,
                                                                        tmp_path_factory):
    """A team's template file and reward file outside this directory and the recipe's folder: their folders are in
    the job's mount list (without them the image would not find the files the recipe names)."""
    from paths import REPO as repo

    team = tmp_path_factory.mktemp("team-files")
    template = team / "templates" / "chatml.jinja"
    template.parent.mkdir()
    template.write_text((repo / "chat_templates" / "chatml.jinja").read_text())
    reward = team / "rewards" / "always.py"
    reward.parent.mkdir()
    reward.write_text("def always(completions, **kwargs):\n    return [1.0 for _ in completions]\n")
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    held_out = write_jsonl(tmp_path / "held_out.jsonl", [{"prompt": "1 plus 1", "solution": "2"}])
    recipe = write_recipe({"stage": "sft", "model": {"source": MODEL}, "template": {"name": str(template)},
                           "data": {"sources": [{"path": str(data)}]}, "train": {"max_length": 256},
                           "eval": {"data": [{"path": str(held_out)}], "rewards": [{"name": f"{reward}:always"}]}},
                          "team.yaml")
    code, out, err = cli("launch", "slurm", str(recipe), "--nodes", "1", "--skip-data", "--script", "job.sbatch",
                         "--container", "smolalign:1.0", "--preset", "ddp")
    assert code == 0, err
    [line] = [x for x in (tmp_path / "job.sbatch").read_text().splitlines() if x.startswith("CONTAINER_MOUNTS=")]
    mounts = {m.split(":")[0] for m in line.removeprefix("CONTAINER_MOUNTS=").strip('"').split(",")}
    assert {str(template.parent), str(reward.parent)} <= mounts or str(team) in mounts, mounts


def test_in_a_container_a_shipped_recipe_stays_a_name(cli, cluster, tmp_path):
    code, out, err = cli("launch", "slurm", "quickstart/sft", "--nodes", "1", "-G", "1", "--skip-data", "--script",
                         "job.sbatch", "--container", "smolalign:1.0", "--preset", "ddp")
    assert code == 0, err
    (tmp_path / "hf").mkdir()
    done = run_in_container(tmp_path / "job.sbatch", cluster, "n1", tmp_path)
    assert done.returncode == 0, done.stderr
    [launch] = calls(cluster, "accelerate")
    assert launch["args"][launch["args"].index("-m"):][:4] == ["-m", "smolalign", "sft", "quickstart/sft"]


def test_in_a_container_the_recipe_is_checked_against_the_images_packages(cli, cluster, tmp_path, monkeypatch):
    """smollm3/sft uses Liger, which this environment lacks and the image has: the script is written for the image,
    and refused for this environment."""
    monkeypatch.setattr("smolalign.target.installed", lambda module: module not in ("flash_attn", "liger_kernel"))
    args = ("launch", "slurm", "smollm3/sft", "--nodes", "1", "--skip-data", "--script", "job.sbatch")
    code, out, err = cli(*args)
    assert code == 2 and "train.use_liger_kernel" in err and not (tmp_path / "job.sbatch").exists()
    code, out, err = cli(*args, "--container", "smolalign:1.0")
    assert code == 0 and (tmp_path / "job.sbatch").is_file(), err


def test_script_to_stdout_and_submit(cli, cluster, sft_recipe, tmp_path, monkeypatch):
    code, out, err = cli("launch", "slurm", sft_recipe, "--nodes", "1", "--script", "-", "--preset", "ddp")
    assert code == 0, err
    assert out.startswith("#!/bin/bash\n") and "plan:" in err and "--deepspeed_multinode_launcher" not in out
    monkeypatch.setenv("PATH", f"{cluster / 'venv' / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DIR", str(cluster))
    code, out, err = cli("launch", "slurm", sft_recipe, "--nodes", "1", "--submit", "-J", "mine")
    assert code == 0, err
    assert "Submitted batch job 4242" in out
    assert [c["args"] for c in calls(cluster, "sbatch")] == [[str(tmp_path / "slurm" / "mine.sbatch")]]


def test_a_single_process_accelerate_config_is_refused(cli, cluster, sft_recipe, tmp_path):
    config = tmp_path / "single.yaml"
    config.write_text("distributed_type: 'NO'\nnum_processes: 1\n")
    code, out, err = cli("launch", "slurm", sft_recipe, "--nodes", "2", "--preset", str(config))
    assert code == 2 and "distributed_type NO does not run one process per GPU" in err


def test_every_node_activates_the_environment_that_wrote_the_script():
    from smolalign.slurm.job import environment_activation

    line = environment_activation()
    if sys.prefix != sys.base_prefix:
        assert line.startswith(f"set +u; source {sys.prefix}/bin/activate; set -u")
    else:
        assert line.startswith(f"export PATH={Path(sys.executable).parent}:")


def test_the_recipe_preset_is_the_default(cli, cluster, sft_recipe):
    code, out, err = cli("launch", "slurm", sft_recipe, "--nodes", "1", "--script", "-", "--set", "launch.preset=fsdp2")
    assert code == 0, err
    assert str(REPO / "recipes" / "accelerate" / "fsdp2.yaml") in out


@pytest.mark.parametrize(("args", "message"), [
    (["--nodes", "0"], "--nodes must be at least 1"),
    (["--nodes", "2", "--vllm-nodes", "1"], "--vllm-nodes: only smolalign rl with method grpo or online_dpo"),
    (["--nodes", "2", "--preset", "zer3"], "--preset zer3: no such accelerate config or preset (did you mean zero3?)"),
    (["--nodes", "2", "--set", "train.learnin_rate=1"], "learnin_rate"),
    (["--nodes", "2", "--gpus-per-node", "0"], "--gpus-per-node must be at least 1"),
    (["--nodes", "2", "-t", "4"], "--time 4 is not longer than --signal-before 300 s"),
    (["--nodes", "2", "-t", "soon"], "--time 'soon': expected minutes"),
    (["--nodes", "2", "--sbatch", "nodes=3"], "--sbatch nodes: set by --nodes and --vllm-nodes"),
    (["--nodes", "2", "-J", "my job"], "--job-name 'my job'"),
    (["--nodes", "2", "-G", "4", "--sbatch", "gres=gpu:h100:8"], "ask for gpu[:TYPE]:4"),
    (["--nodes", "1", "--container", " "], "--container: empty image name"),
    (["--nodes", "1", "--container", "img", "--container-runtime", "docker"], "--container-runtime docker: unknown"),
    (["--nodes", "1", "--container-runtime", "apptainer"], "--container-runtime needs --container IMAGE"),
    (["--nodes", "1", "--container-mount", "/data"], "--container-mount needs --container IMAGE"),
    (["--nodes", "1", "--container", "img", "--container-mount", "/no/such/dir"], "--container-mount /no/such/dir"),
    (["--nodes", "1", "--container", "img", "--setup", "source venv/bin/activate"], "drop that --setup line"),
    (["--nodes", "1", "--sbatch", "container-image=img"], "--sbatch container-image: use --container IMAGE"),
])
def test_bad_input_exits_2_before_writing(cli, cluster, sft_recipe, tmp_path, args, message):
    code, out, err = cli("launch", "slurm", sft_recipe, *args)
    assert code == 2 and message in err, err
    assert not (tmp_path / "slurm").exists()


@pytest.mark.parametrize(("recipe_args", "args", "message"), [
    ({}, ["--nodes", "1"], "pass --vllm-nodes 1"),
    ({}, ["--nodes", "1", "--vllm-nodes", "2"], "the trainer talks to one `trl vllm-serve` server"),
    ({"backend": "vllm_colocate"}, ["--nodes", "1", "--vllm-nodes", "1"], "generation.backend is vllm_colocate"),
    ({"base_url": "http://elsewhere:8000"}, ["--nodes", "1", "--vllm-nodes", "1"], "already names a running server"),
    ({}, ["--nodes", "1", "--vllm-nodes", "1", "-G", "1"], "tensor_parallel 2 needs more GPUs than a node has"),
    ({}, ["--nodes", "1", "--vllm-nodes", "1", "--vllm-set", "max_model_lenght=4"], "did you mean max_model_len?"),
    ({}, ["--nodes", "1", "--vllm-nodes", "1", "--vllm-set", "port=1"], "set generation.server.port"),
])
def test_vllm_nodes_are_checked_against_the_recipe(cli, cluster, rl_recipe, recipe_args, args, message):
    backend = recipe_args.pop("backend", "vllm_server")
    code, out, err = cli("launch", "slurm", rl_recipe(backend, **recipe_args), *args)
    assert code == 2 and message in err, err


def test_a_recipe_with_bad_data_is_refused(cli, cluster, write_recipe, tmp_path):
    rows = write_jsonl(tmp_path / "rows.jsonl", [{"question": "hi"}])
    recipe = write_recipe({"stage": "sft", "model": {"source": MODEL}, "data": {"sources": [{"path": str(rows)}]}})
    code, out, err = cli("launch", "slurm", str(recipe), "--nodes", "1")
    assert code == 2 and f"data source {rows}: cannot tell its format from columns question" in err, err
    code, out, err = cli("launch", "slurm", str(recipe), "--nodes", "1", "--skip-data", "--script", "-")
    assert code == 0 and out.startswith("#!/bin/bash"), err


def test_plan_notes_an_existing_checkpoint_and_no_saves(cli, cluster, sft_recipe, tmp_path):
    from checkpoint_bytes import trainer_checkpoint

    checkpoint = tmp_path / "runs" / "x" / "checkpoint-7"
    for name, content in trainer_checkpoint(7, "runs/x/").items():  # a complete one: weights, optimizer, state
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(content)
    code, out, err = cli("launch", "slurm", sft_recipe, "--nodes", "1", "-o", "runs/x", "--set",
                         "train.save_strategy='no'")
    assert code == 0, err
    assert f"the job continues from {checkpoint.resolve()}" in out
    assert "train.save_strategy is no: a requeued job has no checkpoint" in out


def test_plan_notes_a_time_limit_shorter_than_the_time_between_saves(cli, cluster, write_recipe, tmp_path):
    """From the plan's time per step (≈ 0.47 s on an H100 for this 1.6B shape and batch): 10,000 steps between saves
    take ≈ 78 min, longer than a 30-minute run, so each run ends with the save on the time-limit signal."""
    from safetensors.torch import save_file
    from tiny_models import build_tokenizer

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
        "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 8, "vocab_size": 32000,
        "max_position_embeddings": 4096}))
    save_file({}, str(model / "model.safetensors"))  # the plan reads the config only
    build_tokenizer(model)
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(16))
    recipe = write_recipe({"stage": "sft", "model": {"source": str(model)}, "data": {"sources": [{"path": str(data)}]},
                           "launch": {"gpu": "H100"},
                           "train": {"per_device_train_batch_size": 2, "max_length": 4096, "save_steps": 10000,
                                     "max_steps": 20000}})
    code, out, err = cli("launch", "slurm", str(recipe), "--nodes", "1", "-t", "30:00", "--signal-before", "60",
                         "--script", "-")
    assert code == 0, err
    [note] = [line for line in err.splitlines() if "between scheduled saves" in line]
    assert "--time 30:00 gives each run ≈ 29 min before the time-limit signal" in note
    assert "(train.save_steps 10000 × ≈ 471 ms per step)" in note
    code, out, err = cli("launch", "slurm", str(recipe), "--nodes", "1", "-t", "2:00:00", "--script", "-")
    assert code == 0 and "between scheduled saves" not in err, err


def test_a_sweep_array_job_runs_its_cells_in_the_image(cli, cluster, write_recipe, tmp_path):
    """`sweep --slurm container=IMAGE`: the sweep's folder (outside the working directory here) is mounted, where
    every cell's run directory is."""
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(16))
    held_out = write_jsonl(tmp_path / "held_out.jsonl", [{"prompt": "what is 1 plus 1", "solution": "2"}])
    recipe = write_recipe({"stage": "sft", "model": {"source": MODEL}, "data": {"sources": [{"path": str(data)}]},
                           "train": {"per_device_train_batch_size": 2, "max_length": 256, "max_steps": 2},
                           "eval": {"data": [{"path": str(held_out)}], "rewards": [{"name": "math_accuracy"}]}},
                          "sweep.yaml")
    sweep_dir = tmp_path.parent / f"{tmp_path.name}-sweeps" / "lr"
    code, out, err = cli("sweep", str(recipe), "--grid", "train.learning_rate=0.05,0.01", "-o", str(sweep_dir),
                         "--launch", "ddp", "--slurm", "gpus-per-node=1", "--slurm", "script=job.sbatch",
                         "--slurm", "container=smolalign:1.0")
    assert code == 0, err
    (tmp_path / "hf").mkdir()
    done = run_in_container(tmp_path / "job.sbatch", cluster, "n1", tmp_path, SLURM_ARRAY_TASK_ID="1")
    assert done.returncode == 0, done.stderr
    [launch] = calls(cluster, "accelerate")
    assert launch["env"]["FAKE_IN_IMAGE"] == "smolalign:1.0"
    assert launch["args"][launch["args"].index("-m"):][:3] == ["-m", "smolalign", "sweep"]
    [step] = [json.loads(line) for line in (cluster / "containers.jsonl").read_text().splitlines()]
    assert str(sweep_dir) in step["mounts"] and sweep_dir.is_dir()
