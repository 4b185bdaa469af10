"""The memory counts system.health sums, kept by triggers."""

SQL = """
-- system.health's memory counts without reading every row: each write to memories appends what
-- it changed (+1 live for an insert, -1 live +1 deleted for a soft delete, ...) to memory_counts,
-- in the same transaction, and health sums the table.  Appends take no lock another writer
-- waits for; gc folds the rows into one (admin/retention.fold_counts) so the sum stays short.
-- (Written to run again safely: the counts are then taken afresh.)
CREATE TABLE IF NOT EXISTS memory_counts (
    live bigint NOT NULL,       -- rows with deleted_at_ms IS NULL
    deleted bigint NOT NULL     -- rows with deleted_at_ms IS NOT NULL
);

-- An insert's rows count +1, a delete's -1 (the trigger's argument), as live or deleted.
CREATE OR REPLACE FUNCTION memory_counts_tally() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    sign bigint := TG_ARGV[0]::bigint;
BEGIN
    INSERT INTO memory_counts (live, deleted)
        SELECT sign * count(*) FILTER (WHERE deleted_at_ms IS NULL), sign * count(*) FILTER (WHERE deleted_at_ms IS NOT NULL)
        FROM changed_rows HAVING count(*) > 0;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION memory_counts_moved() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.deleted_at_ms IS NULL THEN
        INSERT INTO memory_counts (live, deleted) VALUES (1, -1);
    ELSE
        INSERT INTO memory_counts (live, deleted) VALUES (-1, 1);
    END IF;
    RETURN NULL;
END
$$;

-- The table's lock first: no write lands between the count below and the triggers.
LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE;
DROP TRIGGER IF EXISTS memory_counts_insert ON memories;
CREATE TRIGGER memory_counts_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_counts_tally('1');
DROP TRIGGER IF EXISTS memory_counts_delete ON memories;
CREATE TRIGGER memory_counts_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION memory_counts_tally('-1');
-- Row by row, and only for the rows whose deleted state changed (hit counts, supersession and
-- the other updates call nothing).
DROP TRIGGER IF EXISTS memory_counts_update ON memories;
CREATE TRIGGER memory_counts_update AFTER UPDATE OF deleted_at_ms ON memories FOR EACH ROW
    WHEN ((OLD.deleted_at_ms IS NULL) <> (NEW.deleted_at_ms IS NULL)) EXECUTE FUNCTION memory_counts_moved();
DELETE FROM memory_counts;
INSERT INTO memory_counts (live, deleted)
    SELECT count(*) FILTER (WHERE deleted_at_ms IS NULL), count(*) FILTER (WHERE deleted_at_ms IS NOT NULL)
    FROM memories;
-- The live memories past their expiry (health subtracts them from the live ones), counted from
-- the index alone: only memories given an expiry are in it.
CREATE INDEX IF NOT EXISTS memories_live_expiry ON memories (expires_at_ms)
    WHERE deleted_at_ms IS NULL AND expires_at_ms IS NOT NULL;
"""
