"""``memory``: the memoryd command for sandboxed tools.  Standard library only (plus memoryd_client).

Run ``memory --help``.  Shipped as a single-file zipapp (``build_zipapp.py``) that needs only a
python3, and as the ``memory-cli`` distribution with a ``memory`` console script.
"""

__version__ = "0.1.0"
