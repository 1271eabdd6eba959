-- scripts/bench/chunk.sql - the statements ll-completion runs for one chunk report, as a pgbench
-- script body (no BEGIN/COMMIT: scripts/bench.sh wraps 1 or N copies in one transaction, as the
-- service groups them). Taken from services/completion/chunk_report.c, ownership.c and
-- common/src/core/ledger.c (ledger_run_lock, own_lock_partition, chunk_file_row, SAVEPOINT,
-- chunk_upsert_file, chunk_touch_partition, ledger_run_touch, chunk_aggregate; on a partition's
-- last chunk also chunk_partition_success, chunk_run_partition_success, ledger_event_insert,
-- ledger_complete_extract and, for the run's last partition, ledger_enqueue_validate,
-- ledger_notify, ledger_event_insert).
--
-- Differences from the service, all small: the run id, partition id and path are built in SQL
-- from pgbench integers (pgbench has no string variables), a few columns carry aliases for
-- \gset, the completion CAS is wrapped in a CTE that counts its row, and ids the service makes
-- in C (event, dispatch) come from gen_random_uuid().
--
-- Variables: -D n=-1 (chunk counter, kept per client across transactions), C (chunks per
-- partition), P (partitions per run), pre (first 8 hex digits of the run ids). Chunk k goes to
-- run k / (C*P), partition (k / C) % P, chunk index k % C: partitions fill in order, like the
-- service workload. The ledger must hold those runs with their partitions RUNNING (claimed).
\set n :n + 1
\set c :n % :C
\set p (:n / :C) % :P
\set r :n / (:C * :P)
SELECT status, job_key, business_key, snapshot_scn::text, hdfs_run_path, stage_table_name, source_count, coalesce((parameters->>'allowEmptySource')::boolean, false), error_code, error_message, publish_token::text, extracted_count FROM nifi_ops.load_run WHERE run_id = (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid FOR UPDATE;
SELECT status, claim_token::text AS tok, expected_row_count FROM nifi_ops.load_partition WHERE run_id = (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid AND partition_id = lpad(:p::text, 4, '0') FOR UPDATE \gset
SELECT fragment_count, hdfs_path, record_count, byte_count FROM nifi_ops.load_file WHERE run_id = (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid AND partition_id = lpad(:p::text, 4, '0') AND chunk_index = :c::int FOR UPDATE;
SAVEPOINT chunk_upsert;
INSERT INTO nifi_ops.load_file (run_id, partition_id, chunk_index, fragment_identifier, fragment_count, hdfs_path, record_count, byte_count, status, written_at, updated_at) VALUES ((:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid, lpad(:p::text, 4, '0'), :c::int, 'frag-' || lpad(:p::text, 4, '0'), :C::int, '/data/stage/ORACLE_INSP_DTL_DAILY/run_id=' || :pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0') || '/part-' || lpad(:p::text, 4, '0') || '/chunk-' || lpad(:c::text, 5, '0') || '.parquet', 100::bigint, 9600::bigint, 'WRITTEN', clock_timestamp(), clock_timestamp()) ON CONFLICT (run_id, partition_id, chunk_index) DO UPDATE SET fragment_identifier = excluded.fragment_identifier, fragment_count = excluded.fragment_count, hdfs_path = excluded.hdfs_path, record_count = excluded.record_count, byte_count = excluded.byte_count, status = 'WRITTEN', updated_at = clock_timestamp();
UPDATE nifi_ops.load_partition SET heartbeat_at = clock_timestamp() WHERE run_id = (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid AND partition_id = lpad(:p::text, 4, '0');
UPDATE nifi_ops.load_run SET heartbeat_at = clock_timestamp() WHERE run_id = (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid;
SELECT count(*) AS files, coalesce(min(chunk_index), 0) AS lo, coalesce(max(chunk_index), 0) AS hi, coalesce(sum(record_count), 0) AS rows_sum, coalesce(sum(coalesce(byte_count, 0)), 0) AS bytes, count(DISTINCT fragment_count) AS counts FROM nifi_ops.load_file WHERE run_id = (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid AND partition_id = lpad(:p::text, 4, '0') AND status = 'WRITTEN' \gset
\if :c = :C - 1
UPDATE nifi_ops.load_partition SET status = 'SUCCESS', actual_row_count = :rows_sum::bigint, file_count = :files::int, fragment_count = :files::int, byte_count = :bytes::bigint, completed_at = clock_timestamp(), heartbeat_at = clock_timestamp() WHERE run_id = (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid AND partition_id = lpad(:p::text, 4, '0') AND status = 'RUNNING' AND claim_token = :tok::uuid;
UPDATE nifi_ops.load_run SET success_partition_count = success_partition_count + 1, heartbeat_at = clock_timestamp() WHERE run_id = (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid;
INSERT INTO nifi_ops.load_event (event_id, event_level, event_name, run_id, job_key, business_key, partition_id, chunk_index, process_group, processor_name, row_count, error_class, error_code, message, details) SELECT gen_random_uuid(), 'INFO', 'PARTITION_SUCCESS'::text, (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid, r.job_key, r.business_key, lpad(:p::text, 4, '0'), NULL::int, 'LOAD_CONTROL_API', lower('PARTITION_SUCCESS'::text), :rows_sum::bigint, NULL, NULL, nullif(left(NULL, 2000), ''), coalesce(json_build_object('files', :files::bigint, 'bytes', :bytes::bigint)::jsonb, '{}'::jsonb) FROM (SELECT 1) AS one LEFT JOIN nifi_ops.load_run r ON r.run_id = (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid;
WITH p AS (SELECT count(*) AS n, count(*) FILTER (WHERE status = 'SUCCESS') AS ok, coalesce(sum(actual_row_count), 0) AS rows_sum FROM nifi_ops.load_partition WHERE run_id = (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid), u AS (UPDATE nifi_ops.load_run r SET status = 'EXTRACTED_VALIDATED', success_partition_count = p.ok, extracted_count = p.rows_sum, extract_completed_at = clock_timestamp(), heartbeat_at = clock_timestamp(), version_no = r.version_no + 1 FROM p WHERE r.run_id = (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid AND r.status = 'EXTRACTING' AND p.n = r.expected_partition_count AND p.ok = r.expected_partition_count AND p.rows_sum = r.source_count RETURNING r.source_count) SELECT count(*) AS won FROM u \gset
\if :won
INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type, status, next_attempt_at, created_at) VALUES (gen_random_uuid(), (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid, 'VALIDATE_RUN', 'PENDING', clock_timestamp(), clock_timestamp()) ON CONFLICT (run_id) WHERE dispatch_type = 'VALIDATE_RUN' DO NOTHING;
SELECT pg_notify('load_dispatch', :pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'));
INSERT INTO nifi_ops.load_event (event_id, event_level, event_name, run_id, job_key, business_key, partition_id, chunk_index, process_group, processor_name, row_count, error_class, error_code, message, details) SELECT gen_random_uuid(), 'INFO', 'EXTRACT_VALIDATED'::text, (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid, r.job_key, r.business_key, NULL, NULL::int, 'LOAD_CONTROL_API', lower('EXTRACT_VALIDATED'::text), r.source_count, NULL, NULL, NULL, '{}'::jsonb FROM (SELECT 1) AS one LEFT JOIN nifi_ops.load_run r ON r.run_id = (:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid;
\endif
\endif
