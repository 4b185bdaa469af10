"""Extraction's own cost per fact, beyond the LLM's time: the prompt, the decode of the reply,
the filters (secrets scan included).  In-process, no HTTP; prints numbers.

    .venv/bin/python bench/bench_extract.py [--facts 20] [--rounds 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memoryd.extract import ConversationMessage, ExtractionResult, Speaker, build_prompt, filter_facts  # noqa: E402
from memoryd.llm import decode_reply  # noqa: E402
from memoryd.secrets import scan  # noqa: E402


def reply_text(facts: int) -> str:
    return json.dumps(
        {
            "facts": [
                {
                    "content": f"David Cramer's colleague number {i} prefers meetings before 10:00 on weekdays.",
                    "memory_type": "preference",
                    "confidence": 0.9,
                    "subjects": [f"Colleague {i}"],
                    "sensitivity": "public",
                    "shared": False,
                    "speaker": "david",
                }
                for i in range(facts)
            ]
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--facts", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    messages = [ConversationMessage(role="user" if i % 2 == 0 else "assistant", content="x " * 200) for i in range(50)]
    speaker = Speaker(username="david", display_name="David Cramer")
    now = datetime(2026, 11, 22, 18, 0, tzinfo=UTC)
    text = reply_text(args.facts)
    samples = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        build_prompt(messages, speaker=speaker, owner_names=["Dave"], now=now)
        reply = decode_reply(text, ExtractionResult)
        kept = filter_facts(reply.facts, confidence_threshold=0.7, secrets="refuse", owner_names=["david"])
        samples.append(time.perf_counter() - started)
        assert len(kept.facts) == args.facts
    per_call = statistics.median(samples)
    print(
        f"prompt (50 messages) + decode + filters, {args.facts} facts: "
        f"{per_call * 1000:.3f} ms per call, {per_call / args.facts * 1000:.3f} ms per fact (median of {args.rounds})"
    )
    sentence = "David mentioned that the quarterly review moved to 3 December 2026 at the Lyon office. " * 12
    started = time.perf_counter()
    for _ in range(args.rounds):
        scan(sentence)
    print(f"secrets scan of {len(sentence)} characters: {(time.perf_counter() - started) / args.rounds * 1000:.3f} ms")


if __name__ == "__main__":
    main()
