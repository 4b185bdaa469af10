"""What `memoryd serve` imports before it is ready: only what the configuration runs."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from memoryd.cli import main

#: The daemon's own modules as `memoryd serve` imports them (cli._serve).
SERVE_IMPORTS = "import memoryd.cli, memoryd.server.head_start, memoryd.server.serve"


def imported_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after ``code`` (this process has imported everything)."""
    script = f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout
    return set(out.split())


def test_the_daemons_modules_leave_out_httpx_and_the_model_libraries() -> None:
    modules = imported_after(SERVE_IMPORTS)
    assert "memoryd.server.daemon" in modules
    # httpx: only the ollama/openai embedders and the LLM clients use it.
    for heavy in ("httpx", "memoryd.http_backend", "memoryd.llm.client", "memoryd.embed.http"):
        assert heavy not in modules, heavy
    # The local model's libraries: imported by the head start when embedder = "local".
    for heavy in ("onnxruntime", "tokenizers", "safetensors", "memoryd.embed.local"):
        assert heavy not in modules, heavy


def test_the_integrity_check_begins_before_trio_is_imported() -> None:
    modules = imported_after("import memoryd.cli, memoryd.server.head_start")
    assert "trio" not in modules
    assert "numpy" not in modules


def test_a_configured_backend_is_imported_when_built() -> None:
    from memoryd.config import LlmConfig
    from memoryd.embed import make_embedder
    from memoryd.llm.factory import make_llm

    code = (
        "from memoryd.embed import make_embedder\nfrom memoryd.llm.factory import make_llm\n"
        "from memoryd.config import EmbedConfig, LlmConfig\n"
        "make_embedder('ollama', EmbedConfig(url='http://127.0.0.1:1', model='m'))\n"
        "make_llm(LlmConfig(provider='ollama', url='http://127.0.0.1:1', model='m'))"
    )
    assert {"httpx", "memoryd.embed.http", "memoryd.llm.ollama"} <= imported_after(code)
    assert make_llm(LlmConfig()) is None
    assert type(make_embedder("none")).__name__ == "NoEmbedder"


def test_the_cli_gives_the_collector_back(capsys: pytest.CaptureFixture[str]) -> None:
    assert gc.isenabled()
    assert main(["config", "--defaults"]) == 0
    assert gc.isenabled()
    with pytest.raises(SystemExit):
        main(["serve", "--embedder", "nonsense"])
    assert gc.isenabled()
    capsys.readouterr()
