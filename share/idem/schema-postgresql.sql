-- idem record store schema, version 1, PostgreSQL (table prefix idem_)
CREATE TABLE IF NOT EXISTS idem_schema (version bigint NOT NULL, fence_floor bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS idem_records (key bytea PRIMARY KEY, state smallint NOT NULL, fp_hi bigint NOT NULL, fp_lo bigint NOT NULL, fence bigint NOT NULL, took_over smallint NOT NULL DEFAULT 0, lease_until bigint NOT NULL, expires_at bigint NOT NULL, result bytea);
CREATE INDEX IF NOT EXISTS idem_records_expires_at ON idem_records (expires_at);
CREATE SEQUENCE IF NOT EXISTS idem_fences AS bigint CACHE 1;
INSERT INTO idem_schema (version) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM idem_schema);
