#!/usr/bin/env python3
"""Replay a `kvlab simulate --steps-out` file on vLLM's own scheduler and
compare every step.

vLLM's scheduler, KV cache manager and block pool are plain Python: built the
way vLLM's unit tests build them (tests/v1/core/utils.py create_scheduler: a
hand-made KVCacheConfig, a folder holding only config.json,
skip_tokenizer_init=True, VLLM_TARGET_DEVICE=cpu), they run without a GPU or
weights. Each step adds the requests kvlab admitted to its queue before that
step (same token ids, priorities, salts and arrival times), calls schedule(),
feeds update_from_output() the token kvlab samples for every request whose
prompt is fully computed, and compares with kvlab's record of the step:

  tokens scheduled per request (in schedule order), requests admitted from
  the waiting queue and their prefix-cache hits, preemptions, finishes (in
  order), and the counters: running, waiting, free blocks, prefix-cache
  queries and hits (and the preempted ones), block allocations, frees and
  evictions, preemptions.

It stops at the first difference, printing both sides, and exits 1; exits 0
when every step is identical. vLLM is used with its own defaults for every
scheduling rule: only what kvlab's config line names is passed.

usage: replay.py STEPS.jsonl [STEPS.jsonl ...] [--json]
  (several files share one vLLM import; one result line each)
"""
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")


def load(path):
    cfg, reqs, steps = None, {}, []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            t = r.get("type")
            if t == "config":
                cfg = r
            elif t == "request":
                reqs[r["id"]] = r
            elif t == "step":
                steps.append(r)
    if cfg is None:
        sys.exit(f"replay: {path} has no config line (not a kvlab --steps-out file)")
    return cfg, reqs, steps


def make_model_dir(max_model_len):
    # The smallest config vLLM accepts for a decoder: only its shape matters
    # to the config code, and the scheduler never reads it.
    d = tempfile.mkdtemp(prefix="kvlab-vllm-model-")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
            "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 131072,
            "max_position_embeddings": max_model_len, "torch_dtype": "float16",
            "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
        }, f)
    return d


def kwargs_for(fn, **kw):
    """Pass only the arguments fn takes (the constructors differ by release)."""
    import inspect
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return kw
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return kw
    return {k: v for k, v in kw.items() if k in params}


class Vllm:
    def __init__(self, cfg):
        import torch
        import vllm
        from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
        from vllm.sampling_params import SamplingParams
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
        from vllm.v1.outputs import ModelRunnerOutput
        from vllm.v1.request import Request, RequestStatus
        from vllm.v1.structured_output import StructuredOutputManager
        try:
            from vllm.utils.hashing import sha256 as _unused  # noqa: F401
        except Exception:
            pass
        self.version = vllm.__version__
        self.Request, self.RequestStatus, self.SamplingParams = Request, RequestStatus, SamplingParams
        self.ModelRunnerOutput = ModelRunnerOutput
        bs, mml = cfg["block_size"], cfg["max_model_len"]
        sc = SchedulerConfig(**kwargs_for(
            SchedulerConfig,
            max_num_seqs=cfg["max_num_seqs"], max_num_batched_tokens=cfg["max_num_batched_tokens"],
            max_model_len=mml, long_prefill_token_threshold=cfg["long_prefill_token_threshold"],
            enable_chunked_prefill=bool(cfg["enable_chunked_prefill"]), policy=cfg["policy"],
            is_encoder_decoder=False, async_scheduling=False))
        mc = ModelConfig(**kwargs_for(
            ModelConfig, model=make_model_dir(mml), tokenizer=None, skip_tokenizer_init=True, dtype="float16",
            seed=0, max_model_len=mml, trust_remote_code=False))
        cc = CacheConfig(**kwargs_for(
            CacheConfig, block_size=bs, gpu_memory_utilization=0.9, swap_space=0, cache_dtype="auto",
            enable_prefix_caching=bool(cfg["enable_prefix_caching"])))
        try:
            vc = VllmConfig(scheduler_config=sc, model_config=mc, cache_config=cc)
        except RuntimeError:
            # releases that cannot infer a device without a GPU (0.11): say "cpu"
            from vllm.config import DeviceConfig
            vc = VllmConfig(scheduler_config=sc, model_config=mc, cache_config=cc,
                            device_config=DeviceConfig(device="cpu"))
        spec = FullAttentionSpec(**kwargs_for(FullAttentionSpec, block_size=bs, num_kv_heads=1, head_size=1,
                                              dtype=torch.float32, use_mla=False))
        kvc = KVCacheConfig(num_blocks=cfg["num_blocks"], kv_cache_tensors=[],
                            kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)])
        cc.num_gpu_blocks = cfg["num_blocks"]
        import inspect
        extra = {}
        sp = inspect.signature(Scheduler.__init__).parameters
        if "block_size" in sp:
            extra["block_size"] = bs
        self.s = Scheduler(vllm_config=vc, kv_cache_config=kvc, log_stats=True,
                           structured_output_manager=StructuredOutputManager(vc), **extra)
        self.block_hasher = self._hasher(get_request_block_hasher, init_none_hash, bs)
        self.counts = {"block_allocations": 0, "block_frees": 0, "block_evictions": 0}
        self.stats = {"prefix_cache_queries": 0, "prefix_cache_hits": 0,
                      "preempted_prefix_cache_queries": 0, "preempted_prefix_cache_hits": 0}
        self.num_preemptions = 0
        self.preempted_now = []
        self._wrap_pool()
        self._wrap_queue()

    def _hasher(self, get_request_block_hasher, init_none_hash, bs):
        from vllm.v1.core import kv_cache_utils as kcu
        fn = None
        for name in ("sha256_cbor", "sha256_cbor_64bit", "sha256"):
            for mod in ("vllm.utils.hashing", "vllm.utils"):
                try:
                    m = __import__(mod, fromlist=[name])
                    fn = getattr(m, name)
                    break
                except (ImportError, AttributeError):
                    continue
            if fn:
                break
        fn = fn or hash
        init_none_hash(fn)
        return get_request_block_hasher(bs, fn)

    def _wrap_pool(self):
        pool = self.s.kv_cache_manager.block_pool
        counts = self.counts
        get_new, free, evict = pool.get_new_blocks, pool.free_blocks, pool._maybe_evict_cached_block

        def get_new_blocks(n, *a, **k):
            blocks = get_new(n, *a, **k)
            counts["block_allocations"] += len(blocks)
            return blocks

        def free_blocks(ordered, *a, **k):
            blocks = list(ordered)
            free(blocks, *a, **k)
            counts["block_frees"] += sum(1 for b in blocks if b.ref_cnt == 0 and not b.is_null)

        def maybe_evict(block, *a, **k):
            ev = evict(block, *a, **k)
            if ev:
                counts["block_evictions"] += 1
            return ev

        pool.get_new_blocks, pool.free_blocks, pool._maybe_evict_cached_block = get_new_blocks, free_blocks, maybe_evict

    def _wrap_queue(self):
        # preemption puts the victim back with prepend_request (and only then)
        q = self.s.waiting
        prepend = q.prepend_request
        now = self.preempted_now

        def prepend_request(req):
            now.append(int(req.request_id))
            return prepend(req)

        q.prepend_request = prepend_request

    def add(self, r):
        sp = self.SamplingParams(max_tokens=r["max_tokens"], ignore_eos=True, temperature=0.0)
        req = self.Request(**kwargs_for(
            self.Request, request_id="%010d" % r["id"], prompt_token_ids=list(r["prompt_token_ids"]),
            sampling_params=sp, pooling_params=None, eos_token_id=None, arrival_time=r["arrival_s"],
            priority=r["priority"], cache_salt=r["cache_salt"], block_hasher=self.block_hasher,
            multi_modal_inputs=None, multi_modal_hashes=None, multi_modal_placeholders=None, mm_features=None,
            lora_request=None))
        req._kvlab_out = r["output_token_ids"]
        self.s.add_request(req)

    def step(self):
        s = self.s
        RS = self.RequestStatus
        before = {rid: (q.status, q.num_computed_tokens) for rid, q in s.requests.items()}
        self.preempted_now.clear()
        out = s.schedule()
        sched = list(out.num_scheduled_tokens.items())
        scheduled = [[int(rid), n] for rid, n in sched]
        admitted = []
        for rid, n in sched:
            st, comp = before[rid]
            if st in (RS.WAITING, RS.PREEMPTED):
                q = s.requests[rid]
                admitted.append([int(rid), q.num_computed_tokens - n - comp, 1 if st == RS.PREEMPTED else 0])
        preempted = list(self.preempted_now)
        self.num_preemptions += len(preempted)
        # the model runner: one sampled token for each request whose prompt is
        # fully computed after this step; nothing for a chunk of a prefill
        ids, toks = [], []
        for rid, n in sched:
            q = s.requests[rid]
            ids.append(rid)
            if q.status == RS.RUNNING and q.num_computed_tokens >= q.num_tokens:
                toks.append([q._kvlab_out[len(q.output_token_ids)]])
            else:
                toks.append([])
        mro = self.ModelRunnerOutput(**kwargs_for(
            self.ModelRunnerOutput, req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
            sampled_token_ids=toks, logprobs=None, prompt_logprobs_dict={}, pooler_output=[],
            spec_token_ids=None))
        eco = s.update_from_output(out, mro)
        finished = []
        for o in eco.values():
            for ro in o.outputs:
                if ro.finish_reason is not None:
                    finished.append(int(ro.request_id))
            st = o.scheduler_stats
            if st is not None and st.prefix_cache_stats is not None:
                p = st.prefix_cache_stats
                self.stats["prefix_cache_queries"] += p.queries
                self.stats["prefix_cache_hits"] += p.hits
                self.stats["preempted_prefix_cache_queries"] += getattr(p, "preempted_queries", 0)
                self.stats["preempted_prefix_cache_hits"] += getattr(p, "preempted_hits", 0)
        rec = {"scheduled": scheduled, "admitted": admitted, "preempted": preempted, "finished": finished,
               "num_running": len(s.running), "num_waiting": len(s.waiting),
               "num_free_blocks": s.kv_cache_manager.block_pool.get_num_free_blocks(),
               "num_preemptions_total": self.num_preemptions}
        rec.update(self.stats)
        rec.update(self.counts)
        return rec


FIELDS = ["scheduled", "admitted", "preempted", "finished", "num_running", "num_waiting", "num_free_blocks",
          "prefix_cache_queries", "prefix_cache_hits", "preempted_prefix_cache_queries",
          "preempted_prefix_cache_hits", "block_allocations", "block_frees", "block_evictions",
          "num_preemptions_total"]


def replay(path, as_json):
    t0 = time.perf_counter()
    cfg, reqs, steps = load(path)
    if cfg["mode"] != "paged":
        sys.exit("replay: only paged mode exists in vLLM")
    v = Vllm(cfg)
    t1 = time.perf_counter()
    for k in steps:
        for rid in k["arrived"]:
            v.add(reqs[rid])
        got = v.step()
        for f in FIELDS:
            if got[f] != k[f]:
                print(f"{path}: step {k['step']}: {f} differs")
                print(f"  kvlab: {json.dumps(k[f])[:2000]}")
                print(f"  vLLM {v.version}: {json.dumps(got[f])[:2000]}")
                return 1
    t2 = time.perf_counter()
    last = steps[-1] if steps else {}
    result = {"file": path, "vllm": v.version, "steps": len(steps), "requests": len(reqs), "identical": True,
              "setup_s": round(t1 - t0, 3), "loop_s": round(t2 - t1, 3),
              "preemptions": last.get("num_preemptions_total", 0),
              "prefix_cache_hits": last.get("prefix_cache_hits", 0)}
    if as_json:
        print(json.dumps(result), flush=True)
    else:
        print(f"{path}: identical at every step: {len(steps)} steps, {len(reqs)} requests, vLLM {v.version}, "
              f"{result['preemptions']} preemptions, {result['prefix_cache_hits']} prefix-hit tokens "
              f"(vLLM scheduler loop {t2 - t1:.2f} s)", flush=True)
    return 0


def main():
    files = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not files or "-h" in sys.argv or "--help" in sys.argv:
        print(__doc__)
        return 0 if files else 2
    t0 = time.perf_counter()
    import vllm.v1.core.sched.scheduler  # noqa: F401  (the import is most of the start-up)
    if "--json" in sys.argv:
        print(json.dumps({"import_s": round(time.perf_counter() - t0, 3)}), flush=True)
    rc = 0
    for f in files:
        rc |= replay(f, "--json" in sys.argv)
        if rc:
            break
    return rc


if __name__ == "__main__":
    sys.exit(main())
