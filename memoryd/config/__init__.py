"""Configuration: the keys (``sections.py``) and how the file, environment and flags combine
into one ``Config`` (``loading.py``)."""

from memoryd.config.loading import ENV_PREFIX, config_reference, load_config
from memoryd.config.sections import (
    AuthConfig,
    Config,
    ContextConfig,
    EmbedConfig,
    EmbedderKind,
    ExtractionConfig,
    LifecycleConfig,
    LimitsConfig,
    LlmConfig,
    LlmProvider,
    ModelServerConfig,
    StorageConfig,
    SummaryConfig,
    SupersessionConfig,
    default_data_dir,
)

__all__ = [
    "ENV_PREFIX",
    "AuthConfig",
    "Config",
    "ContextConfig",
    "EmbedConfig",
    "EmbedderKind",
    "ExtractionConfig",
    "LifecycleConfig",
    "LimitsConfig",
    "LlmConfig",
    "LlmProvider",
    "ModelServerConfig",
    "StorageConfig",
    "SummaryConfig",
    "SupersessionConfig",
    "config_reference",
    "default_data_dir",
    "load_config",
]
