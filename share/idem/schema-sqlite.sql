-- idem record store schema, version 2, SQLite (table prefix idem_); run on a version 1 database it upgrades it
CREATE TABLE IF NOT EXISTS idem_schema (version INTEGER NOT NULL, fence_floor INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS idem_records (key BLOB PRIMARY KEY, state INTEGER NOT NULL, fp_hi INTEGER NOT NULL, fp_lo INTEGER NOT NULL, fence INTEGER NOT NULL, took_over INTEGER NOT NULL DEFAULT 0, lease_until INTEGER NOT NULL, expires_at INTEGER NOT NULL, result BLOB) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);
CREATE TABLE IF NOT EXISTS idem_steps (key BLOB NOT NULL, idx INTEGER NOT NULL, name BLOB NOT NULL, fp_hi INTEGER NOT NULL, fp_lo INTEGER NOT NULL, result BLOB, PRIMARY KEY (key, idx)) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS idem_steps_end AFTER UPDATE OF state ON idem_records WHEN NEW.state IN (1, 2) BEGIN DELETE FROM idem_steps WHERE key = NEW.key; END;
CREATE TRIGGER IF NOT EXISTS idem_steps_gone AFTER DELETE ON idem_records BEGIN DELETE FROM idem_steps WHERE key = OLD.key; END;
CREATE TRIGGER IF NOT EXISTS idem_steps_expired AFTER UPDATE OF fence ON idem_records WHEN OLD.expires_at <= CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) BEGIN DELETE FROM idem_steps WHERE key = NEW.key; END;
CREATE TABLE IF NOT EXISTS idem_entity_ops (key BLOB PRIMARY KEY, entity TEXT NOT NULL, fence INTEGER NOT NULL, state INTEGER NOT NULL, fp_hi INTEGER NOT NULL, fp_lo INTEGER NOT NULL, produced TEXT NOT NULL, result BLOB, created_ms INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO idem_schema (version) SELECT 2 WHERE NOT EXISTS (SELECT 1 FROM idem_schema);
UPDATE idem_schema SET version = 2 WHERE version < 2;
