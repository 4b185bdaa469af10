"""[llm] and [extraction]: defaults, the environment, mistakes named by key, and the key kept secret."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from memoryd.cli import main
from memoryd.config import ExtractionConfig, LlmConfig, config_reference, load_config
from memoryd.errors import ConfigError


def test_extraction_is_off_by_default() -> None:
    config = load_config(environ={})
    assert config.llm == LlmConfig() and config.llm.provider == "none"
    assert config.extraction == ExtractionConfig()
    assert (config.extraction.confidence_threshold, config.extraction.secrets) == (0.7, "refuse")


def test_llm_settings_come_from_the_environment() -> None:
    config = load_config(
        environ={
            "MEMORYD_LLM_PROVIDER": "ollama",
            "MEMORYD_LLM_URL": "http://127.0.0.1:11434",
            "MEMORYD_LLM_MODEL": "llama3.2",
            "MEMORYD_LLM_CONCURRENCY": "4",
            "MEMORYD_EXTRACTION_SECRETS": "redact",
            "MEMORYD_EXTRACTION_DEBOUNCE_SECONDS": "5",
        }
    )
    assert (config.llm.provider, config.llm.model, config.llm.concurrency) == ("ollama", "llama3.2", 4)
    assert (config.extraction.secrets, config.extraction.debounce_seconds) == ("redact", 5.0)


@pytest.mark.parametrize(
    ("environ", "key"),
    [
        ({"MEMORYD_LLM_PROVIDER": "anthropic"}, "llm.provider"),
        ({"MEMORYD_LLM_CONCURRENCY": "0"}, "llm.concurrency"),
        ({"MEMORYD_EXTRACTION_CONFIDENCE_THRESHOLD": "1.5"}, "extraction.confidence_threshold"),
        ({"MEMORYD_EXTRACTION_SECRETS": "ignore"}, "extraction.secrets"),
    ],
)
def test_bad_values_stop_start_up_naming_the_key(environ: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(environ=environ)


def test_the_reference_lists_the_new_sections() -> None:
    reference = tomllib.loads(config_reference())
    assert reference["llm"]["provider"] == "none"
    assert reference["extraction"]["debounce_seconds"] == 30.0


@pytest.mark.usefixtures("no_memoryd_env")
def test_memoryd_config_never_prints_the_llm_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("MEMORYD_LLM_PROVIDER", "openai")
    monkeypatch.setenv("MEMORYD_LLM_API_KEY", "sk-llm-secret-42")
    monkeypatch.setenv("MEMORYD_DATA_DIR", str(tmp_path))
    assert main(["config"]) == 0
    out = capsys.readouterr().out
    assert "sk-llm-secret-42" not in out
    assert json.loads(out)["llm"]["api_key"] == "***"
