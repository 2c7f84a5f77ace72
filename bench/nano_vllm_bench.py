#!/usr/bin/env python3
"""kvlab's engine against nano-vllm's scheduler and block manager, side by side
in one run, on the same requests (same token ids, same pool). Not a test: it
prints figures for the README.

nano-vllm (a small Python re-implementation of vLLM's serving loop) is not
part of kvlab and is not shipped here. This script locates it:
  1. $NANOVLLM_DIR: a folder holding nanovllm/engine/{scheduler,block_manager,
     sequence}.py (a checkout of nano-vllm);
  2. ~/.cache/kvlab-bench/nano-vllm/ (the same layout);
  3. else the nano-vllm-fork package from PyPI, downloaded into
     ~/.cache/kvlab-bench/ (`pip download --no-deps`);
and exits 77 (skipped) when none is there. Only those three modules run: the
harness gives them a stand-in config and sampling parameters, so neither torch
nor a GPU is needed; numpy and xxhash (which the block manager imports) come
from a small venv in ~/.cache/kvlab-bench/venv made on first use.

Both sides get every request at time 0 (a closed batch), max_num_seqs 256,
max_num_batched_tokens 8192 and the same block size and number of blocks; nano-vllm samples each request's tokens from kvlab's own list
(`kvlab simulate --steps-out`), so prefix sharing is the same. kvlab is timed
two ways, its engine loop alone (build/bench_engine on the same trace and
flags: submitting the requests and stepping until all finish) and the whole
`kvlab simulate` process; nano-vllm as the same loop (making and adding its
Sequences, then schedule + postprocess until all finish), without the Python
start-up. CPU time.

usage: bench/nano_vllm_bench.py [KVLAB] [REQUESTS] [BLOCK_SIZE] [NUM_BLOCKS]
  (defaults: build/kvlab, 10000, 256 -- nano-vllm's own block size, which its
  Config requires -- and the blocks that hold the same 446,880 tokens)
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import types

CACHE = os.path.expanduser("~/.cache/kvlab-bench")
ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "assets")
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def ensure_deps():
    try:
        import numpy  # noqa: F401
        import xxhash  # noqa: F401
        return
    except ImportError:
        pass
    venv = os.path.join(CACHE, "venv")
    py = os.path.join(venv, "bin", "python")
    if os.environ.get("KVLAB_BENCH_IN_VENV"):
        print("nano-vllm bench: numpy/xxhash missing even in the bench venv; skipped")
        sys.exit(77)
    if not os.path.exists(py):
        os.makedirs(CACHE, exist_ok=True)
        if subprocess.call([sys.executable, "-m", "venv", venv]) != 0 or subprocess.call(
                [py, "-m", "pip", "install", "-q", "numpy", "xxhash"]) != 0:
            print("nano-vllm bench: cannot install numpy and xxhash into a venv; skipped")
            sys.exit(77)
    os.environ["KVLAB_BENCH_IN_VENV"] = "1"
    os.execv(py, [py] + sys.argv)


def locate_nano():
    for d in (os.environ.get("NANOVLLM_DIR"), os.path.join(CACHE, "nano-vllm")):
        if d and os.path.exists(os.path.join(d, "nanovllm", "engine", "scheduler.py")):
            return d, "local"
    fork = os.path.join(CACHE, "nano-vllm-fork")
    if not os.path.exists(os.path.join(fork, "nanovllm", "engine", "scheduler.py")):
        os.makedirs(fork, exist_ok=True)
        if subprocess.call([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "nano-vllm-fork", "-d", fork],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
            import zipfile
            for f in os.listdir(fork):
                if f.endswith(".whl"):
                    with zipfile.ZipFile(os.path.join(fork, f)) as z:
                        z.extractall(fork, [n for n in z.namelist() if n.startswith("nanovllm/")])
    if os.path.exists(os.path.join(fork, "nanovllm", "engine", "scheduler.py")):
        return fork, "PyPI nano-vllm-fork"
    return None, None


def import_nano(root):
    # the package, its config and sampling parameters as stand-ins: the real
    # ones import torch and transformers, which the scheduler never needs
    pkg = types.ModuleType("nanovllm")
    pkg.__path__ = [os.path.join(root, "nanovllm")]
    sys.modules["nanovllm"] = pkg
    cfg = types.ModuleType("nanovllm.config")

    class Config:
        pass

    cfg.Config = Config
    sys.modules["nanovllm.config"] = cfg
    sp = types.ModuleType("nanovllm.sampling_params")

    class SamplingParams:
        def __init__(self, temperature=1.0, max_tokens=64, ignore_eos=False, **kw):
            self.temperature, self.max_tokens, self.ignore_eos = temperature, max_tokens, ignore_eos
            self.cfg_scale, self.top_k, self.top_p, self.repetition_penalty = 1.0, None, None, 1.0
            self.logits_processor = self.logits_processor_update_state = None

    sp.SamplingParams = SamplingParams
    sys.modules["nanovllm.sampling_params"] = sp
    from nanovllm.engine.scheduler import Scheduler
    from nanovllm.engine.sequence import Sequence
    return Config, SamplingParams, Scheduler, Sequence


def gen_spec(n):
    return (f"gen:requests={n},rate=1e9,prompt=512,output=128,shared=0.3,prefix=1024,prefixes=8,"
            f"max_prompt=6000,max_output=1024,seed=1")


def flags(num_blocks, block_size):
    return ["--max-model-len", "8192", "--max-num-seqs", "256", "--max-num-batched-tokens", "8192",
            "--block-size", str(block_size), "--num-gpu-blocks-override", str(num_blocks)]


def engine_loop(bench, n, num_blocks, block_size):
    """CPU seconds of the engine loop alone (bench_engine on the same trace)."""
    out = subprocess.run([bench, ASSETS,
                          gen_spec(n)] + flags(num_blocks, block_size),
                         capture_output=True, text=True, env=dict(os.environ, BENCH_SIM_ONLY="1"))
    for line in out.stdout.splitlines():
        if "s CPU" in line and "wall" in line:
            return float(line.split("wall,")[1].split("s CPU")[0])
    sys.exit(f"nano-vllm bench: bench_engine failed: {out.stderr.strip() or out.stdout.strip()}")


def kvlab_run(kvlab, n, num_blocks, block_size, steps_out=None):
    args = [kvlab, "simulate", MODEL, "--gpu", "h100-80gb"] + flags(num_blocks, block_size) + [
        "--trace", gen_spec(n), "--json"]
    if steps_out:
        args += ["--steps-out", steps_out]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"nano-vllm bench: kvlab simulate failed: {out.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(out.stdout), wall, cpu


def main():
    ensure_deps()
    kvlab = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "build", "kvlab")
    bench = os.path.join(os.path.dirname(os.path.abspath(kvlab)), "bench_engine")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    block_size = int(sys.argv[3]) if len(sys.argv) > 3 else 256
    # the same KV memory as the plan's 27,930 blocks of 16 tokens (Llama-3.1-8B, H100)
    num_blocks = int(sys.argv[4]) if len(sys.argv) > 4 else 27930 * 16 // block_size
    root, where = locate_nano()
    if not root:
        print("nano-vllm bench: nano-vllm not found (set NANOVLLM_DIR to a checkout); skipped")
        return 77
    Config, SamplingParams, Scheduler, Sequence = import_nano(root)
    with tempfile.TemporaryDirectory() as tmp:
        steps = os.path.join(tmp, "steps.jsonl")
        kvlab_run(kvlab, n, num_blocks, block_size, steps)
        reqs = []
        with open(steps) as f:
            for line in f:
                if line.startswith('{"type":"request"'):
                    reqs.append(json.loads(line))
    summary, wall, cpu = kvlab_run(kvlab, n, num_blocks, block_size)  # timed without the dump
    loop = engine_loop(bench, n, num_blocks, block_size) if os.path.exists(bench) else 0.0

    c = Config()
    c.max_num_seqs, c.max_num_batched_tokens, c.eos = 256, 8192, -1
    c.num_kvcache_blocks, c.kvcache_block_size = num_blocks, block_size
    Sequence.block_size = block_size
    s = Scheduler(c)
    outs = {}
    prompts = [(list(r["prompt_token_ids"]), r["max_tokens"], r["output_token_ids"]) for r in reqs]
    # timed like kvlab's loop: the requests are submitted inside it
    t0 = time.perf_counter()
    c0 = time.process_time()
    for ids, max_tokens, out_ids in prompts:
        seq = Sequence(ids, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
        outs[seq.seq_id] = out_ids
        s.add(seq)
    nsteps = 0
    while not s.is_finished():
        seqs, _ = s.schedule()
        s.postprocess(seqs, [outs[q.seq_id][q.num_completion_tokens] for q in seqs])
        nsteps += 1
    nano_cpu = time.process_time() - c0
    nano_wall = time.perf_counter() - t0
    print(f"{len(reqs)} requests at once, {num_blocks} blocks of {block_size} tokens, max_num_seqs 256, "
          f"max_num_batched_tokens 8192 (nano-vllm from {where})")
    print(f"  kvlab engine loop (bench_engine): {loop:.3f} s CPU; kvlab simulate, whole process: {cpu:.3f} s CPU "
          f"({wall:.3f} s wall), {summary['steps']} steps, {summary['preemptions']} preemptions")
    print(f"  nano-vllm scheduler + block manager loop: {nano_cpu:.2f} s CPU ({nano_wall:.2f} s wall), "
          f"{nsteps} steps")
    if loop > 0:
        print(f"  ratio, loop to loop: {nano_cpu / loop:.0f}x; nano-vllm's loop to kvlab's whole process: "
              f"{nano_cpu / cpu:.0f}x (CPU time)")
    else:
        print(f"  ratio, nano-vllm's loop to kvlab's whole process: {nano_cpu / cpu:.0f}x (CPU time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
