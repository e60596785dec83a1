"""A stand-in for vLLM 0.31's OpenAI server (`python -m vllm.entrypoints.openai.api_server`), for what the real one
cannot be made to do on a CPU on demand: start slowly, never become healthy, crash, die mid-run, stall, ignore
SIGTERM. Put `tests/standins/vllm_server` first on a child's PYTHONPATH and smolalign's own command line starts this
instead of vLLM. It takes the options smolalign passes (unknown ones are refused with exit 2, as vLLM's parser does)
and answers every request TRL 1.16's VLLMClient makes with the real server's payloads (recorded from it;
tests/integration/test_vllm_server.py drives the client against both with the same assertions): `/health` (200;
503 for a dead engine; `/health/` redirects as FastAPI does), `/v1/models` (the served name), `/server_info` and
`/get_world_size` (with VLLM_SERVER_DEV_MODE=1), `/v1/completions` (token ids, logprobs, prompt logprobs),
`/reset_prefix_cache`, `/collective_rpc`, and the weight-update lifecycle. The NCCL transfer itself is not here.

Like vLLM on a GPU, it starts its engine core as a child process in its own process group, which watches no parent
(a process that sleeps): a server whose own process dies leaves it running unless its group is killed.

STANDIN_RECORD: a file that receives this process's argv, environment and pid and its engine core's pid as JSON,
then `stopped` on SIGTERM.
STANDIN_BEHAVIOUR: ok | slow:SECONDS (listens late) | never (always 503) | die:SECONDS (exits 1 after serving that
long) | stall (completions never answer) | crash (exits 1 at once) | ignore-term (ignores SIGTERM).
"""

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

behaviour = os.environ.get("STANDIN_BEHAVIOUR", "ok")
record = os.environ.get("STANDIN_RECORD")
VOCAB = 64


def note(**values):
    if record:
        with open(record, "a") as out:
            out.write(json.dumps(values) + "\n")


parser = argparse.ArgumentParser(prog="api_server")
for option in ("--model", "--host", "--dtype", "--kv-cache-dtype", "--model-impl", "--uvicorn-log-level",
               "--revision", "--distributed-executor-backend", "--speculative-config", "--weight-transfer-config",
               "--logprobs-mode", "--served-model-name"):
    parser.add_argument(option)
for option in ("--port", "--tensor-parallel-size", "--data-parallel-size", "--max-model-len", "--max-logprobs",
               "--kv-cache-memory-bytes", "--max-num-seqs"):
    parser.add_argument(option, type=int)
parser.add_argument("--gpu-memory-utilization", type=float)
for flag in ("--enable-prefix-caching", "--no-enable-prefix-caching", "--enforce-eager", "--trust-remote-code",
             "--enable-scale-out"):
    parser.add_argument(flag, action="store_true")
args = parser.parse_args()
served = args.served_model_name or args.model
engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
note(argv=sys.argv[1:], env={k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "VLLM_SERVER_DEV_MODE")},
     pid=os.getpid(), engine=engine.pid)


def on_term(signum, frame):
    note(stopped=True)
    engine.terminate()
    engine.wait()
    os._exit(0)


signal.signal(signal.SIGTERM, signal.SIG_IGN if behaviour == "ignore-term" else on_term)
if behaviour == "crash":
    print("RuntimeError: CUDA error: no kernel image is available for execution on the device", flush=True)
    sys.exit(1)
if behaviour.startswith("slow:"):
    time.sleep(float(behaviour.split(":")[1]))
print(f"INFO: serving {args.model} as {served} on http://{args.host}:{args.port}", flush=True)


def logprob(context: list[int], token: int) -> float:
    """A fixed log-probability of `token` after `context`, as a model's would be: normalised over VOCAB tokens."""
    weights = [math.exp(((t * 7 + sum(context)) % 11) / 4) for t in range(VOCAB)]
    return math.log(weights[token % VOCAB] / sum(weights))


def completion(prompt: list[int], index: int, body: dict) -> dict:
    tokens = [(sum(prompt) + 3 * index + 5 * step) % VOCAB + 1 for step in range(body.get("max_tokens", 16))]
    choice = {"index": index, "text": " ".join(map(str, tokens)), "finish_reason": "length", "stop_reason": None,
              "token_ids": tokens if body.get("return_token_ids") else None, "prompt_token_ids": prompt,
              "prompt_logprobs": None, "routed_experts": None, "logprobs": None}
    if body.get("logprobs") is not None:
        values = [logprob(prompt + tokens[:i], t) for i, t in enumerate(tokens)]
        names = [f"token_id:{t}" if body.get("return_tokens_as_token_ids") else str(t) for t in tokens]
        choice["logprobs"] = {"text_offset": list(range(len(tokens))), "token_logprobs": values, "tokens": names,
                              "top_logprobs": [{name: value} for name, value in zip(names, values, strict=True)]}
    if body.get("prompt_logprobs") is not None:
        choice["prompt_logprobs"] = [None] + [
            {str(t): {"logprob": logprob(prompt[:i], t), "rank": 1, "decoded_token": str(t)}}
            for i, t in enumerate(prompt) if i > 0]
    return choice


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, code, body=None, headers=()):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        path = self.path.split("?")[0]
        dev = os.environ.get("VLLM_SERVER_DEV_MODE") == "1"
        if path == "/health":
            self.reply(503 if behaviour == "never" else 200)
        elif path == "/health/":
            self.reply(307, headers=[("Location", "/health")])
        elif path == "/v1/models":
            self.reply(200, {"object": "list", "data": [{"id": served, "object": "model", "owned_by": "vllm",
                                                         "root": args.model, "max_model_len": args.max_model_len}]})
        elif path == "/server_info" and dev:
            transfer = json.loads(args.weight_transfer_config) if args.weight_transfer_config else None
            self.reply(200, {"vllm_config": {"model_config": {"model": args.model, "logprobs_mode": args.logprobs_mode,
                                                              "max_model_len": args.max_model_len},
                                             "weight_transfer_config": transfer}})
        elif path == "/get_world_size" and dev:
            self.reply(200, {"world_size": (args.tensor_parallel_size or 1) * (args.data_parallel_size or 1)})
        else:
            self.reply(404, {"detail": "Not Found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        dev = os.environ.get("VLLM_SERVER_DEV_MODE") == "1"
        if self.path == "/v1/completions":
            if behaviour == "stall":
                time.sleep(3600)
            if body.get("model") != served:
                self.reply(404, {"error": {"message": f"The model `{body.get('model')}` does not exist.",
                                           "type": "NotFoundError", "code": 404}})
                return
            prompts = body.get("prompt") or [[]]
            prompts = [prompts] if prompts and isinstance(prompts[0], int) else prompts
            n = body.get("n", 1)
            choices = [completion(p, i * n + k, body) for i, p in enumerate(prompts) for k in range(n)]
            for index, choice in enumerate(choices):
                choice["index"] = index
            self.reply(200, {"id": "cmpl-standin", "object": "text_completion", "created": int(time.time()),
                             "model": served, "choices": choices})
        elif self.path == "/reset_prefix_cache" and dev:
            self.reply(200, {"success": True})
        elif self.path == "/start_weight_update" and dev:
            self.reply(200, {"message": "Weight update started"})
        elif self.path == "/finish_weight_update" and dev:
            self.reply(200, {"message": "Weight update finished"})
        elif self.path == "/collective_rpc" and dev:
            note(collective_rpc=body)
            self.reply(200, {"results": [None]})
        else:
            self.reply(404, {"detail": "Not Found"})


server = ThreadingHTTPServer((args.host, args.port), Handler)
if behaviour.startswith("die:"):
    def die():
        time.sleep(float(behaviour.split(":")[1]))
        print("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue", flush=True)
        os._exit(1)

    threading.Thread(target=die, daemon=True).start()
server.serve_forever()
