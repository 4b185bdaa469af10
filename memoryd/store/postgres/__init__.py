"""The PostgreSQL + pgvector backend: one database that several daemons (hosts) share.

    db.py            the connection pool, transactions on worker threads, errors
    server_versions.py  the PostgreSQL and pgvector versions memoryd needs
    schema.py        versioned migrations (the steps in migrations/), run once under an advisory lock
    tokens.py        the keyword index's tokens (the same porter tokenizer as SQLite's FTS5)
    visibility.py    the rules of ``store.visibility`` as PostgreSQL WHERE clauses
    memories/        memory.* (add, list, get, delete, pin, short ids, health counts)
    search/          hybrid search: keyword, vector, people, neighbours, one or two round trips
    jobs.py          embed jobs: leases with FOR UPDATE SKIP LOCKED
    supersession/    supersession: the add path, history, the 'supersede' job
    people/, conversations/, admin/: the other interfaces (admin/: maintenance, stats, transfer)
    notices.py, listen.py  NOTIFY after commit, and LISTEN for the other daemons' changes
    store.py         ``PostgresStore``: the ``interfaces.Backend``

Its dependencies are the optional extra ``memoryd[postgres]`` (psycopg 3, psycopg-pool,
pgvector); nothing imports this package unless ``[storage] backend = "postgres"``.
"""

from memoryd.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
