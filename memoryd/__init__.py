"""memoryd: long-term memory for AI assistants, served as JSON-RPC 2.0 on a Unix socket."""

__version__ = "0.1.0"
