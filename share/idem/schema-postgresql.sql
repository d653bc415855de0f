-- idem record store schema, version 3, PostgreSQL (table prefix idem_); run on a version 1 or 2 database it upgrades it
CREATE TABLE IF NOT EXISTS idem_schema (version bigint NOT NULL, fence_floor bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS idem_records (key bytea PRIMARY KEY, state smallint NOT NULL, fp_hi bigint NOT NULL, fp_lo bigint NOT NULL, fence bigint NOT NULL, took_over smallint NOT NULL DEFAULT 0, lease_until bigint NOT NULL, expires_at bigint NOT NULL, result bytea, waiters integer NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);
CREATE SEQUENCE IF NOT EXISTS idem_fences AS bigint CACHE 1;
CREATE TABLE IF NOT EXISTS idem_steps (key bytea NOT NULL, idx bigint NOT NULL, name bytea NOT NULL, fp_hi bigint NOT NULL, fp_lo bigint NOT NULL, result bytea, PRIMARY KEY (key, idx));
CREATE OR REPLACE FUNCTION idem_steps_drop() RETURNS trigger LANGUAGE plpgsql AS $idem$ BEGIN DELETE FROM idem_steps WHERE key = OLD.key; RETURN NULL; END $idem$;
CREATE OR REPLACE TRIGGER idem_steps_end AFTER UPDATE OF state ON idem_records FOR EACH ROW WHEN (NEW.state IN (1, 2)) EXECUTE FUNCTION idem_steps_drop();
CREATE OR REPLACE TRIGGER idem_steps_gone AFTER DELETE ON idem_records FOR EACH ROW EXECUTE FUNCTION idem_steps_drop();
CREATE OR REPLACE TRIGGER idem_steps_expired AFTER UPDATE OF fence ON idem_records FOR EACH ROW WHEN (OLD.expires_at <= CAST(extract(epoch FROM statement_timestamp()) * 1000 AS bigint)) EXECUTE FUNCTION idem_steps_drop();
CREATE TABLE IF NOT EXISTS idem_entity_ops (key bytea PRIMARY KEY, entity TEXT NOT NULL, fence bigint NOT NULL, state smallint NOT NULL, fp_hi bigint NOT NULL, fp_lo bigint NOT NULL, produced TEXT NOT NULL, result bytea, created_ms bigint NOT NULL);
CREATE SEQUENCE IF NOT EXISTS idem_entity_fences AS bigint CACHE 1;
DO $idem$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'idem_records'::regclass AND attname = 'waiters' AND NOT attisdropped) THEN ALTER TABLE idem_records ADD COLUMN waiters integer NOT NULL DEFAULT 0; END IF; END $idem$;
CREATE OR REPLACE FUNCTION idem_records_wake() RETURNS trigger LANGUAGE plpgsql AS $idem$ BEGIN PERFORM pg_notify('idem_records_wake', md5(OLD.key) || ' ' || OLD.fence); IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; NEW.waiters := 0; RETURN NEW; END $idem$;
CREATE OR REPLACE TRIGGER idem_records_wake BEFORE UPDATE OF state, fence ON idem_records FOR EACH ROW WHEN (OLD.waiters > 0) EXECUTE FUNCTION idem_records_wake();
CREATE OR REPLACE TRIGGER idem_records_wake_gone AFTER DELETE ON idem_records FOR EACH ROW WHEN (OLD.waiters > 0) EXECUTE FUNCTION idem_records_wake();
INSERT INTO idem_schema (version) SELECT 3 WHERE NOT EXISTS (SELECT 1 FROM idem_schema);
UPDATE idem_schema SET version = 3 WHERE version < 3;
