"""The manager calls the OffloadingConnector makes for a workload, as
offload_replay.c and reference.py read them (tests/vllm/offload/diff.sh).

Requests read one of `docs` shared documents (doc_blocks blocks each, the
same block hashes for every reader) followed by blocks of their own. Each
request, as the connector's scheduler does
(distributed/kv_transfer/kv_connector/v1/offloading_connector.py, from 0.31
offloading/scheduler.py):
  - on admission (get_num_new_matched_tokens): T all its full blocks (up to
    0.30: _touch), then L the blocks after its GPU prefix hit, up to its last
    block (kvlab keeps the last prompt token to compute), and P the blocks it
    found (update_state_after_alloc: prepare_load);
  - while it runs, `active` requests at a time, each step
    (_get_reqs_to_store): S its blocks not offered yet, up to `chunk` more
    (chunked prefill), and when something was stored T all its blocks so
    far (up to 0.30); a store the tier refuses is offered again the next
    step, until the request has run its prefill steps and one more;
  - F when it finishes (on_request_finished, 0.31 on; a no-op before).
Whether a store went through decides the next calls, so the reference
model runs alongside to write them; both sides then replay the same list.

    python3 gen_ops.py RULES CAPACITY DOCS DOC_BLOCKS OWN_MAX CHUNK ACTIVE REQUESTS SEED

RULES: the manager's release era, 0 for 0.11 - 0.17, 1 for 0.18 - 0.30 (an
offer's own keys are not evicted), 2 for 0.31 - 0.32 (keys ranked per request,
no scheduler touches), 3 for 0.33 on (a running request's provisional rank).
"""
import random
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from reference import make_manager  # noqa: E402


def main():
    rules, cap, docs, doc_blocks, own_max, chunk, active, nreq, seed = map(int, sys.argv[1:10])
    protect, lru = int(rules >= 1), max(0, rules - 1)
    rnd = random.Random(seed)
    m = make_manager(cap, protect, lru)
    out = [f"C {cap} {protect} {lru}"]
    own = 10**9

    def emit(op, keys, req=None, first=None):
        head = [] if req is None else [req] if first is None else [req, first]
        out.append(op + "".join(f" {k}" for k in head + list(keys)))
        if op == "T":
            m.touch(keys)
            return 0
        if op == "L":
            return m.lookup(keys)
        if op == "P":
            if lru:
                m.prepare_load(req, first, keys)
            return 0
        if op == "F":
            if lru:
                m.request_finished(req)
            return 0
        res = m.prepare_store(req, first, keys) if lru else m.prepare_store(keys)
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
            if not lru:
                emit("T", keys)
            gpu_hit = rnd.randint(0, doc_blocks) if rnd.random() < 0.5 else 0
            if len(keys) - 1 > gpu_hit:
                hits = emit("L", keys[gpu_hit:len(keys) - 1])
                if hits:
                    emit("P", keys[gpu_hit:gpu_hit + hits], i, gpu_hit)
            # it runs its prefill steps and one more, then finishes whatever was stored
            reqs[i] = {"keys": keys, "next": 0, "steps": -(-len(keys) // chunk) + 1}
            running.append(i)
        for i in list(running):
            r = reqs[i]
            end = min(len(r["keys"]), r["next"] + chunk)
            stored = emit("S", r["keys"][r["next"]:end], i, r["next"])
            if stored >= 0:
                r["next"] = end
            if stored > 0 and not lru:
                emit("T", r["keys"][:end])
            r["steps"] -= 1
            if r["next"] >= len(r["keys"]) or r["steps"] == 0:
                running.remove(i)
                emit("F", r["keys"], i)
    print("\n".join(out))


if __name__ == "__main__":
    main()
