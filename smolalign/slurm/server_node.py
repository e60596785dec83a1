"""The vLLM server node of a `launch slurm --vllm-nodes 1` job: what runs there (`trl vllm-serve` with the recipe's
options), and the script's lines that start it and wait until it answers, its startup deadline counted from when its
process starts (after any image pull)."""

import shlex
from dataclasses import dataclass

from smolalign.slurm.container import in_container


@dataclass(frozen=True)
class VllmServer:
    """`trl vllm-serve` on the job's last node, for an rl recipe with `generation.backend: vllm_server`."""

    command: tuple[str, ...]
    """`trl vllm-serve` and its arguments as words (smolalign.generation.server_command), quoted when rendered."""
    model: str
    """What vLLM loads: the policy's hub id or local directory (weights are synced from training afterwards)."""
    port: int
    startup_timeout: float
    """Seconds training waits for the server's /health before the job fails."""


VLLM_PROBE = ('until [ "$(curl -s -o /dev/null -w \'%{http_code}\' --max-time 5 "$VLLM_URL/health")" = 200 ]; '
              'do')


SERVER_STARTED = "smolalign: the vLLM server process started"
"""What the server's step prints first, in its log, once its process runs (in the image, after any pull): the
startup deadline counts from there, so pulling a multi-GB image on the node does not count against it."""


def server_node_step(job, server: VllmServer) -> str:
    """The script's lines that start `server` on its node (in the job's image, if any) and wait for its /health."""
    timeout = int(server.startup_timeout)
    srun_options, command_prefix = in_container(job)
    started = shlex.quote(f'echo "{SERVER_STARTED} on $(hostname)"; exec "$@"')
    return "\n".join([
        f'VLLM_LOG={shlex.quote(job.log_dir)}/"$SLURM_JOB_NAME-$SLURM_JOB_ID-vllm.log"',
        # The log is appended to across requeues: this start's lines come after what it holds now.
        "VLLM_LOG_START=$(wc -c < \"$VLLM_LOG\" 2> /dev/null || echo 0)",
        'srun --nodes=1 --ntasks=1 --nodelist="$VLLM_NODE" --cpus-per-task="$CPUS_PER_NODE" --output="$VLLM_LOG" '
        f"--open-mode=append {srun_options}\\",
        f"  {command_prefix}sh -c {started} vllm-server "
        + " ".join(shlex.quote(word) for word in server.command) + " &",
        "VLLM_PID=$!",
        "trap 'kill \"$VLLM_PID\" 2> /dev/null || true' EXIT",
        'echo "smolalign: waiting for the vLLM server at $VLLM_URL/health (log: $VLLM_LOG)"',
        # The deadline starts when the server's process does (its first line in the log), not before the image pull.
        "VLLM_DEADLINE=",
        # 200 from vLLM's /health only: a redirect or a dead engine's 503 is not healthy (curl -f would pass a 3xx)
        VLLM_PROBE,
        '  if ! kill -0 "$VLLM_PID" 2> /dev/null; then',
        '    echo "error: the vLLM server on $VLLM_NODE exited before answering; see $VLLM_LOG" >&2',
        "    exit 1",
        "  fi",
        f'  if [ -z "$VLLM_DEADLINE" ] && tail -c +$(( VLLM_LOG_START + 1 )) "$VLLM_LOG" 2> /dev/null '
        f'| grep -q "{SERVER_STARTED}"; then',
        f"    VLLM_DEADLINE=$(( SECONDS + {timeout} ))",
        "  fi",
        '  if [ -n "$VLLM_DEADLINE" ] && (( SECONDS >= VLLM_DEADLINE )); then',
        f'    echo "error: the vLLM server on $VLLM_NODE did not answer /health within {timeout} s '
        '(generation.server.startup_timeout); see $VLLM_LOG" >&2',
        "    exit 1",
        "  fi",
        "  sleep 5",
        "done",
    ])
