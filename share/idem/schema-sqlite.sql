-- idem record store schema, version 1, SQLite (table prefix idem_)
CREATE TABLE IF NOT EXISTS idem_schema (version INTEGER NOT NULL, fence_floor INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS idem_records (key BLOB PRIMARY KEY, state INTEGER NOT NULL, fp_hi INTEGER NOT NULL, fp_lo INTEGER NOT NULL, fence INTEGER NOT NULL, took_over INTEGER NOT NULL DEFAULT 0, lease_until INTEGER NOT NULL, expires_at INTEGER NOT NULL, result BLOB) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);
INSERT INTO idem_schema (version) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM idem_schema);
