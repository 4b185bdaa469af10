"""Supersession on PostgreSQL: the add path and history (``supersession.py``), the 'supersede'
job (``supersession_jobs.py``) and the ``Supersessions`` interface (``supersession_repository.py``).
"""

from memoryd.store.postgres.supersession.supersession import (
    add,
    attribute_candidates,
    history,
    mark_superseded,
    matching,
    send_candidates,
)
from memoryd.store.postgres.supersession.supersession_jobs import (
    claim_jobs,
    complete_job,
    job_candidates,
    vector_neighbours,
)
from memoryd.store.postgres.supersession.supersession_repository import Supersessions

__all__ = [
    "Supersessions",
    "add",
    "attribute_candidates",
    "claim_jobs",
    "complete_job",
    "history",
    "job_candidates",
    "mark_superseded",
    "matching",
    "send_candidates",
    "vector_neighbours",
]
