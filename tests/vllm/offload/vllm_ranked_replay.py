"""Replay manager calls (gen_ops.py) on vLLM's own CPUOffloadingManager and
LRUCachePolicy (vllm/v1/kv_offload/cpu/manager.py, cpu/policies/lru.py;
vLLM 0.31.0 on), printing what reference.py and offload_replay.c print.
Those files and what they import from vllm/v1/kv_offload run as they are,
read from SRC/vllm (an unpacked wheel); torch, numpy and the rest of vLLM
are stubbed (nothing of theirs runs in the manager's bookkeeping).

    python3 vllm_ranked_replay.py SRC < ops.txt
"""
import importlib.abc
import importlib.util
import os
import sys
import types

SRC = os.path.join(sys.argv[1], "vllm")
REAL = ("vllm.v1.kv_offload.base", "vllm.v1.kv_offload.config", "vllm.v1.kv_offload.cpu.manager",
        "vllm.v1.kv_offload.cpu.common", "vllm.v1.kv_offload.cpu.policies.base",
        "vllm.v1.kv_offload.cpu.policies.lru", "vllm.v1.kv_offload.cpu.policies.factory",
        "vllm.v1.kv_offload.cpu.policies.arc", "vllm.v1.metrics.cache_hit_source")


class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub_class(name)


def _stub_class(name):
    return _Meta(name, (), {"__init__": lambda self, *a, **k: None,
                            "__getattr__": lambda self, n: (lambda *a, **k: None),
                            "__call__": lambda self, *a, **k: None})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        v = _stub_class(name)
        setattr(self, name, v)
        return v


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top not in ("vllm", "torch", "numpy"):
            return None
        if name in REAL:
            rel = name.split(".")[1:]
            f = os.path.join(SRC, *rel) + ".py"
            return importlib.util.spec_from_file_location(name, f)
        return importlib.util.spec_from_loader(name, self, is_package=True)

    def create_module(self, spec):
        m = _StubModule(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
sys.argv = sys.argv[:1]

from vllm.v1.kv_offload.base import ReqContext, make_offload_key  # noqa: E402
from vllm.v1.kv_offload.cpu.manager import CPUOffloadingManager  # noqa: E402


def key(k):
    return make_offload_key(int(k).to_bytes(8, "little"), 0)   # one KV cache group


def main():
    m = None
    back, ctx = {}, {}
    stored = evicted = skipped = 0

    def req_ctx(req, first, ks):
        c = ctx.get(req)
        if c is None:
            c = ctx[req] = ReqContext(req_id=str(req))
            m.on_new_request(c)
        for i, k in enumerate(ks):     # the scheduler's end-token positions, one block per key
            c.set_offload_key_position(key(k), (first + i + 1) * 16)
        return c

    for line in sys.stdin:
        if not line.strip() or line.startswith("#"):
            continue
        op, *rest = line.split()
        keys = [int(k) for k in rest]
        r = 0
        if op == "C":
            m = CPUOffloadingManager(num_chunks=keys[0])
            stored = evicted = skipped = 0
            ctx = {}
        else:
            for k in keys[1:] if op in "SPF" else keys:
                back[key(k)] = k
        if op == "T":
            m.touch([key(k) for k in keys], None)
        elif op == "L":
            for k in keys:
                if m.lookup(key(k), None).name != "HIT":
                    break
                r += 1
        elif op == "P":
            c = req_ctx(keys[0], keys[1], keys[2:])
            ks = [key(k) for k in keys[2:]]
            m.prepare_load(ks, c)
            m.complete_load(ks, c)
        elif op == "S":
            c = req_ctx(keys[0], keys[1], keys[2:])
            out = m.prepare_store([key(k) for k in keys[2:]], c)
            if out is None:
                r = -1
                skipped += 1
            else:
                m.complete_store(out.keys_to_store, c)
                r = len(out.keys_to_store)
                stored += r
                evicted += len(out.evicted_keys)
        elif op == "F":
            c = ctx.pop(keys[0], None)
            if c is not None:
                m.on_request_finished(c)
        held = sorted(m._policy.chunks, key=m._policy._ranks.__getitem__)
        sys.stdout.write(f"{op} {r} |" + "".join(f" {back[k]}" for k in held) + "\n")
    sys.stdout.write(f"stats stored {stored} evicted {evicted} skipped {skipped}\n")


if __name__ == "__main__":
    main()
