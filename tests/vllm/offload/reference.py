"""A reference model of vLLM's OffloadingConnector manager, transcribed for
the differential test (tests/vllm/offload/diff.sh): the same calls as
offload_replay.c reads, the same output.
  - 0.11.0 - 0.30.x: vllm/v1/kv_offload/lru_manager.py LRUOffloadingManager
    with the CPU backend of vllm/v1/kv_offload/backends/cpu.py (an
    OrderedDict the connector touches); 0.18 adds the "protected" keys of an
    offer, which 0.19 - 0.30 keep in cpu/policies/lru.py;
  - 0.31.0 on (RankedManager): cpu/manager.py CPUOffloadingManager, which
    records each request's accessed keys and hands them to
    cpu/policies/lru.py LRUCachePolicy when the request finishes, a heap of
    ranks with lazy invalidation; 0.33 adds the request's provisional rank
    (_RequestRank, on_request_access).
Stores complete at once (complete_store right after prepare_store), as
kvlab's tier does; loads are not pinned (complete_load at once). Block
hashes are whole numbers.

    python3 reference.py < ops.txt
"""
import heapq
import sys
from collections import OrderedDict


class Block:
    """BlockStatus: ref_cnt -1 until its store completes."""
    __slots__ = ("ref_cnt",)

    def __init__(self):
        self.ref_cnt = -1

    @property
    def is_ready(self):
        return self.ref_cnt >= 0


class LRUOffloadingManager:
    def __init__(self, num_blocks, protect=False):
        self.num_blocks = num_blocks          # CPUBackend: num_cpu_blocks
        self.protect = protect                # 0.18 on
        self.num_allocated = 0
        self.blocks = OrderedDict()           # block_hash -> Block, LRU first

    def get_num_free_blocks(self):
        return self.num_blocks - self.num_allocated

    def lookup(self, block_hashes):
        hit_count = 0
        for block_hash in block_hashes:
            block = self.blocks.get(block_hash)
            if block is None or not block.is_ready:
                break
            hit_count += 1
        return hit_count

    def touch(self, block_hashes):
        for block_hash in reversed(list(block_hashes)):
            if self.blocks.get(block_hash):
                self.blocks.move_to_end(block_hash)

    def prepare_store(self, block_hashes):
        block_hashes_list = list(block_hashes)
        block_hashes_to_store = [h for h in block_hashes_list if h not in self.blocks]
        num_blocks_to_evict = len(block_hashes_to_store) - self.get_num_free_blocks()
        to_evict = []
        if num_blocks_to_evict > 0:
            protected = set(block_hashes_list) if self.protect else set()
            for block_hash, block in self.blocks.items():
                if block.ref_cnt == 0 and block_hash not in protected:
                    to_evict.append(block_hash)
                    num_blocks_to_evict -= 1
                    if num_blocks_to_evict == 0:
                        break
            else:
                return None
        for block_hash in to_evict:
            self.blocks.pop(block_hash)
            self.num_allocated -= 1
        for block_hash in block_hashes_to_store:
            self.blocks[block_hash] = Block()   # allocate_blocks
            self.num_allocated += 1
        return block_hashes_to_store, to_evict

    def complete_store(self, block_hashes):
        for block_hash in block_hashes:
            block = self.blocks[block_hash]
            if not block.is_ready:
                block.ref_cnt = 0


class RankedLRU:
    """cpu/policies/lru.py LRUCachePolicy (0.31: int ranks, kept here as
    (rank, 0); 0.33: (request rank, -position) while a request runs)."""

    def __init__(self, provisional):
        self.provisional = provisional
        self.chunks = {}            # key -> ref_cnt (-1 while its store is pending)
        self.ranks = {}
        self.evictable = set()
        self.heap = []
        self.next_rank = 0
        self.request_ranks = {}     # req -> its _RequestRank

    def _get_request_rank(self, req):
        if req not in self.request_ranks:
            self.next_rank += 1
            self.request_ranks[req] = self.next_rank
        return self.request_ranks[req]

    def _assign_new_rank(self, key):
        if key not in self.chunks:
            return False
        self.next_rank += 1
        self.ranks[key] = (self.next_rank, 0)
        return key in self.evictable

    def _update_recency(self, keys):
        for key in keys:
            if self._assign_new_rank(key):
                heapq.heappush(self.heap, (self.ranks[key], key))

    def insert(self, key, req, pos):
        self.chunks[key] = -1
        if self.provisional:
            self.ranks[key] = (self._get_request_rank(req), -pos)
        else:
            self.next_rank += 1
            self.ranks[key] = (self.next_rank, 0)

    def mark_evictable(self, key):
        self.evictable.add(key)
        heapq.heappush(self.heap, (self.ranks[key], key))

    def on_request_access(self, keys_pos, req):
        if not self.provisional:        # the hook is 0.33's
            return
        request_rank = self._get_request_rank(req)
        for key, pos in keys_pos:
            if key not in self.chunks:
                continue
            rank = (request_rank, -pos)
            if self.ranks[key] >= rank:
                continue
            self.ranks[key] = rank
            if key in self.evictable:
                heapq.heappush(self.heap, (rank, key))

    def on_request_finished(self, keys):
        self._update_recency(reversed(keys))

    def evict(self, n, protected):
        selected, deferred = [], []
        while self.heap and len(selected) < n:
            entry = heapq.heappop(self.heap)
            rank, key = entry
            if key not in self.evictable or self.ranks.get(key) != rank or key in selected:
                continue
            if key in protected:
                deferred.append(entry)
                continue
            selected.append(key)
        for entry in deferred:
            heapq.heappush(self.heap, entry)
        if len(selected) < n:
            for key in selected:
                heapq.heappush(self.heap, (self.ranks[key], key))
            return None
        for key in selected:
            self.evictable.remove(key)
            del self.chunks[key]
            del self.ranks[key]
        return selected

    def held(self):
        return sorted(self.chunks, key=self.ranks.__getitem__)


class RankedManager:
    """cpu/manager.py CPUOffloadingManager, 0.31.0 on (store_threshold 1)."""

    def __init__(self, num_chunks, provisional):
        self.num_chunks = num_chunks
        self.num_allocated = 0
        self.num_evictable = 0
        self.policy = RankedLRU(provisional)
        self.access = {}            # req -> _RequestCacheAccess: seen keys, (position, key) pairs

    def _record(self, req, keys_pos):
        state = self.access.setdefault(req, {"seen": set(), "keys": []})
        new = []
        for key, pos in keys_pos:
            if key in state["seen"]:
                continue
            state["seen"].add(key)
            state["keys"].append((pos, key))
            new.append((key, pos))
        if new:
            self.policy.on_request_access(new, req)

    def lookup(self, keys):
        hits = 0
        for key in keys:
            if self.policy.chunks.get(key, -1) < 0:
                break
            hits += 1
        return hits

    def prepare_load(self, req, first, keys):
        # ref_cnt up and down again at once: only the access is recorded
        self._record(req, [(k, first + i) for i, k in enumerate(keys)])

    def prepare_store(self, req, first, keys):
        to_store = [k for k in keys if k not in self.policy.chunks]
        ready = {k for k in keys if self.policy.chunks.get(k, -1) >= 0}
        recorded = set(to_store) | ready
        self._record(req, [(k, first + i) for i, k in enumerate(keys) if k in recorded])
        if not to_store:
            return [], []
        n_evict = len(to_store) - (self.num_chunks - self.num_allocated)
        evicted = []
        if n_evict > 0:
            if n_evict > self.num_evictable:
                return None
            evicted = self.policy.evict(n_evict, set(keys))
            if evicted is None:
                return None
            self.num_evictable -= len(evicted)
            self.num_allocated -= len(evicted)
        pos = {k: first + i for i, k in enumerate(keys)}
        for key in to_store:
            self.policy.insert(key, req, pos[key])
            self.num_allocated += 1
        return to_store, evicted

    def complete_store(self, keys):
        for key in keys:
            if self.policy.chunks[key] < 0:
                self.policy.chunks[key] = 0
                self.num_evictable += 1
                self.policy.mark_evictable(key)

    def touch(self, keys):
        self.policy._update_recency(reversed(list(keys)))

    def request_finished(self, req):
        state = self.access.pop(req, None)
        self.policy.request_ranks.pop(req, None)
        if state is not None:
            self.policy.on_request_finished([k for _, k in sorted(state["keys"])])

    @property
    def blocks(self):
        return self.policy.held()


def make_manager(cap, protect, lru):
    """The manager of a C line: lru 0 up to 0.30, 1 for 0.31 - 0.32, 2 from 0.33."""
    return LRUOffloadingManager(cap, bool(protect)) if lru == 0 else RankedManager(cap, lru == 2)


def main():
    m = None
    stored = evicted = skipped = 0
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip() or line.startswith("#"):
            continue
        op, *rest = line.split()
        keys = [int(k) for k in rest]
        r = 0
        if op == "C":
            m = make_manager(keys[0], keys[1], keys[2] if len(keys) > 2 else 0)
            stored = evicted = skipped = 0
        elif op == "T":
            m.touch(keys)
        elif op == "L":
            r = m.lookup(keys)
        elif op == "P":
            if isinstance(m, RankedManager):
                m.prepare_load(keys[0], keys[1], keys[2:])
        elif op == "F":
            if isinstance(m, RankedManager):
                m.request_finished(keys[0])
        elif op == "S":
            res = m.prepare_store(keys[2:]) if not isinstance(m, RankedManager) else \
                m.prepare_store(keys[0], keys[1], keys[2:])
            if res is None:
                r = -1
                skipped += 1
            else:
                to_store, to_evict = res
                m.complete_store(to_store)
                r = len(to_store)
                stored += r
                evicted += len(to_evict)
        else:
            sys.exit(f"reference: unknown op {op!r}")
        out.write(f"{op} {r} |" + "".join(f" {k}" for k in m.blocks) + "\n")
    out.write(f"stats stored {stored} evicted {evicted} skipped {skipped}\n")


if __name__ == "__main__":
    main()
