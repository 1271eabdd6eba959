-- scripts/bench/chunk_end.sql - once per transaction, before its COMMIT: the run heartbeats the
-- chunk reports of the transaction asked for (batch.c kloop_touch_runs), here the run of
-- the transaction's last chunk (a transaction of the workload spans one or two runs).
UPDATE nifi_ops.load_run SET heartbeat_at = clock_timestamp() WHERE run_id = ANY(ARRAY[(:pre::text || '-0000-4000-8000-' || lpad(:r::text, 12, '0'))::uuid]);
