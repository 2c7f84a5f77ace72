"""A reference model of vLLM's OffloadingConnector manager, 0.11.0 - 0.18.x
(vllm/v1/kv_offload/lru_manager.py LRUOffloadingManager with the CPU backend
of vllm/v1/kv_offload/backends/cpu.py; 0.18 adds the "protected" keys of an
offer, which 0.19 - 0.30 keep in cpu/policies/lru.py), transcribed for the differential test
(tests/vllm/offload/diff.sh): the same calls as offload_replay.c reads, the
same output. Stores complete at once (complete_store right after
prepare_store), as kvlab's tier does; loads are not pinned (complete_load at
once). Block hashes are whole numbers.

    python3 reference.py < ops.txt
"""
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
            m = LRUOffloadingManager(keys[0], bool(keys[1]))
            stored = evicted = skipped = 0
        elif op == "T":
            m.touch(keys)
        elif op == "L":
            r = m.lookup(keys)
        elif op == "S":
            res = m.prepare_store(keys)
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
