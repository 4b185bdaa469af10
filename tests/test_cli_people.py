"""The sandbox `memory` command's people subcommands: context, forget-person, --about."""

from __future__ import annotations

import json

from tests import test_cli_output
from tests.test_cli_output import Cli, out

# The CLI's fixtures, shared with test_cli_output.py.
cli = test_cli_output.cli
memory_pyz = test_cli_output.memory_pyz


async def test_context_prints_the_block_and_json_the_whole_answer(cli: Cli) -> None:
    assert out(await cli("context", "hello")) == "Nothing known yet.\n"
    out(await cli("add", "My wife's name is Sarah"))
    out(await cli("add", "Sarah likes Italian food"))
    text = out(await cli("context", "what should I cook for my wife?", "--max-chars", "300"))
    assert "People mentioned:\n- Sarah (wife)\n" in text and len(text) <= 301
    answer = json.loads(out(await cli("context", "my wife?", "-n", "1", "--json")))
    assert len(answer["memories"]) == 1 and answer["people"][0]["name"] == "Sarah"
    assert out(await cli("context", "hello")).startswith("About the user:\nSarah (wife): ")
    assert out(await cli("context", "hello", "--no-summary")) == "No memories found.\n"
    bare = json.loads(out(await cli("context", "my wife?", "--no-summary", "--json")))
    assert bare["summary"] == "" and bare["text"].startswith("People mentioned:")


async def test_about_and_forget_person(cli: Cli) -> None:
    out(await cli("add", "Tom is my boss"))
    out(await cli("add", "Tom likes golf"))
    out(await cli("add", "I like tea"))
    assert len(json.loads(out(await cli("list", "--about", "my boss", "--json")))) == 2
    assert "golf" in out(await cli("search", "golf", "-a", "Tom"))
    assert out(await cli("forget-person", "my boss")) == "Forgot Tom: 2 memories deleted\n"
    assert [m["content"] for m in json.loads(out(await cli("list", "--json")))] == ["I like tea"]
    failed = await cli("forget-person", "Tom")
    assert failed.returncode == 1 and b"None of your people" in failed.stderr
