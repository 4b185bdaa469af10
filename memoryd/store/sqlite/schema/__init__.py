"""The schema: a ``pragma user_version`` ladder (``ladder.py``) of numbered migrations (``migrations/``)."""
