"""The manager calls the OffloadingConnector makes for a workload, as
offload_replay.c and reference.py read them (tests/vllm/offload/diff.sh).

Requests read one of `docs` shared documents (doc_blocks blocks each, the
same block hashes for every reader) followed by blocks of their own. Each
request, as vLLM 0.11-0.18's connector scheduler does
(distributed/kv_transfer/kv_connector/v1/offloading_connector.py):
  - on admission (get_num_new_matched_tokens): T all its full blocks, then
    L the blocks after its GPU prefix hit, up to its last block (kvlab keeps
    the last prompt token to compute);
  - while it runs, `active` requests at a time, each step
    (_get_reqs_to_store): S its blocks not offered yet, up to `chunk` more
    (chunked prefill), and when something was stored T all its blocks so
    far; a store the tier refuses is offered again the next step, until the
    request has run its prefill steps and one more.
Whether a store went through decides the next calls, so the reference
model runs alongside to write them; both sides then replay the same list.

    python3 gen_ops.py PROTECT CAPACITY DOCS DOC_BLOCKS OWN_MAX CHUNK ACTIVE REQUESTS SEED

PROTECT 1 follows vLLM 0.18 and later (an offer's own keys are not evicted).
"""
import random
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from reference import LRUOffloadingManager  # noqa: E402


def main():
    protect, cap, docs, doc_blocks, own_max, chunk, active, nreq, seed = map(int, sys.argv[1:10])
    rnd = random.Random(seed)
    m = LRUOffloadingManager(cap, bool(protect))
    out = [f"C {cap} {protect}"]
    own = 10**9

    def emit(op, keys):
        out.append(op + "".join(f" {k}" for k in keys))
        if op == "T":
            m.touch(keys)
            return 0
        if op == "L":
            return m.lookup(keys)
        res = m.prepare_store(keys)
        if res is None:
            return -1
        m.complete_store(res[0])
        return len(res[0])

    waiting, running = list(range(nreq)), []
    reqs = {}
    while waiting or running:
        while waiting and len(running) < active:
            i = waiting.pop(0)
            d = rnd.randrange(docs)
            n_own = rnd.randint(0, own_max)
            keys = [d * 100000 + j + 1 for j in range(doc_blocks)] + list(range(own, own + n_own))
            own += n_own
            emit("T", keys)
            gpu_hit = rnd.randint(0, doc_blocks) if rnd.random() < 0.5 else 0
            if len(keys) - 1 > gpu_hit:
                emit("L", keys[gpu_hit:len(keys) - 1])
            # it runs its prefill steps and one more, then finishes whatever was stored
            reqs[i] = {"keys": keys, "next": 0, "steps": -(-len(keys) // chunk) + 1}
            running.append(i)
        for i in list(running):
            r = reqs[i]
            end = min(len(r["keys"]), r["next"] + chunk)
            stored = emit("S", r["keys"][r["next"]:end])
            if stored >= 0:
                r["next"] = end
            if stored > 0:
                emit("T", r["keys"][:end])
            r["steps"] -= 1
            if r["next"] >= len(r["keys"]) or r["steps"] == 0:
                running.remove(i)
    print("\n".join(out))


if __name__ == "__main__":
    main()
