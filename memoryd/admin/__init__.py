"""Host-side admin commands: ``memoryd stats | gc | export | import | backup | check``.

They talk to the database file directly, not to the daemon: SQLite in WAL mode lets one
writer and any number of readers in other processes work at the same time, and every write
here takes the write lock up front (BEGIN IMMEDIATE) in short transactions, so the daemon's
own writes wait at most a moment (its busy timeout, ``storage.busy_timeout_ms``, absorbs it).
Reads (stats, export, backup, check) run in one snapshot and never block the daemon.  This
needs no admin RPC and no trust decision on the socket: whoever can run these commands can
read the database file anyway.  The daemon does not have to run.

``memoryd.cli`` parses the arguments; each module here does one command and returns the exit
status.
"""
