-- 0010_schema_history: every service reads the ledger's schema version at start
-- (common/include/ll/schema_version.h, docs/operations.md "Schema versions") from the migration
-- history, so every service role may read it. The history's own columns (checksum, applied_by,
-- duration_ms, baselined) are added by `loadctl migrate` itself before it applies anything,
-- because it needs them to record this very file.
GRANT SELECT ON nifi_ops.schema_migrations
    TO ll_registrar, ll_claimer, ll_completion, ll_dispatcher, ll_sweeper, ll_operator;
