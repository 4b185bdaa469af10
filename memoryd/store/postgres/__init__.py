"""The PostgreSQL + pgvector backend: one database that several daemons (hosts) share.

    db.py          the connection pool, transactions on worker threads, version checks, errors
    schema.py      versioned migrations, run once under an advisory lock
    tokens.py      the keyword index's tokens (the same porter tokenizer as SQLite's FTS5)
    visibility.py  the rules of ``store.visibility`` as PostgreSQL WHERE clauses
    memories.py    memory.* (add, list, get, delete, short ids, health) and the search
    jobs.py        embed jobs: leases with FOR UPDATE SKIP LOCKED
    people/, supersession.py, conversations/, maintenance.py: the other interfaces
    store.py       ``PostgresStore``: the ``interfaces.Backend``

Its dependencies are the optional extra ``memoryd[postgres]`` (psycopg 3, psycopg-pool,
pgvector); nothing imports this package unless ``[storage] backend = "postgres"``.
"""

from memoryd.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
