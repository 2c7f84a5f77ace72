"""Replay manager calls (gen_ops.py) on vLLM's own LRUOffloadingManager with
its CPUBackend (vllm/v1/kv_offload/lru_manager.py, backends/cpu.py; vLLM
0.11.0 - 0.18.x), printing what reference.py and offload_replay.c print.
Run with the python of a venv from tests/vllm/setup.sh:

    $VENV/bin/python vllm_replay.py < ops.txt
"""
import sys

from vllm.v1.kv_offload.backends.cpu import CPUBackend
from vllm.v1.kv_offload.lru_manager import LRUOffloadingManager


def h(k):
    return int(k).to_bytes(8, "little")   # a BlockHash is bytes


def main():
    m = None
    back = {}
    stored = evicted = skipped = 0
    for line in sys.stdin:
        if not line.strip() or line.startswith("#"):
            continue
        op, *rest = line.split()
        keys = [int(k) for k in rest]
        for k in keys:
            back[h(k)] = k
        r = 0
        if op == "C":
            m = LRUOffloadingManager(CPUBackend(block_size=16, num_blocks=keys[0]))  # keys[1]: the release decides
        elif op == "T":
            m.touch([h(k) for k in keys])
        elif op == "L":
            r = m.lookup([h(k) for k in keys])
        elif op in ("P", "F"):
            pass  # prepare_load pins nothing that outlives the call; no finish hook before 0.31
        elif op == "S":
            out = m.prepare_store([h(k) for k in keys[2:]])  # keys[0:2]: request, position
            if out is None:
                r = -1
                skipped += 1
            else:
                m.complete_store(out.block_hashes_to_store)
                r = len(out.block_hashes_to_store)
                stored += r
                evicted += len(out.block_hashes_evicted)
        sys.stdout.write(f"{op} {r} |" + "".join(f" {back[b]}" for b in m.blocks) + "\n")
    sys.stdout.write(f"stats stored {stored} evicted {evicted} skipped {skipped}\n")


if __name__ == "__main__":
    main()
