-- history.sql - a generated history of the ledger, inside PostgreSQL (issue 42, item 1): the rows a
-- year of loads leaves in every table the services write (docs/ledger.md §2; contract §2, §3), for
-- the plan tests (tests/integration/test_history_plans.py) and the history benchmark.
--
--   psql -v ON_ERROR_STOP=1 -v runs=3000 -v parts=8 -v chunks=3 -v span='365 days' \
--        -v active=12 -v tag=h -f scripts/bench/history.sql      (as the migration/DDL account)
--
-- psql variables (all optional):
--   runs    ended runs to generate (3000); 180000 is a year of 500 loads a day
--   parts   partitions per run (8)           chunks  files (chunks) per partition (3)
--   span    the time the history covers, ending `ago` before now ('365 days')
--   ago     how long before now the span ends ('0 days'): a year in two halves is span '182 days 12
--           hours' twice, ago the same for the older half, so that rows lie in time order as a
--           real ledger's do (the active runs are today's whatever ago is)
--   active  active runs of today besides the history (12): every active status, each on a job
--           and business key of its own (uq_load_run_active), one with a DEAD VALIDATE_RUN
--   jobs    job keys the runs are spread over (50)
--   tag     a word in every generated key, so that two histories never collide ('h')
--   seed    setseed() value in [-1, 1] (0.42): the same variables give the same rows
--
-- Shares (ended runs): SUCCESS 90 %; FAILED_EXTRACT 3.5 %, TIMED_OUT 2 %, FAILED_STAGE_VALIDATION
-- 1 %, FAILED_TARGET_VALIDATION 1 %, FAILED_PUBLISH 0.5 %, FAILED_SNAPSHOT_EXPIRED 0.5 %,
-- FAILED_MANIFEST 0.5 %, and 1 % whose publish went unknown: PUBLISH_UNKNOWN (active, waiting for
-- an operator) in the newest 10 % of a span that ends now, resolved as FAILED_PUBLISH before. A failed extraction
-- leaves its unfinished partitions RUNNING (contract §3.2) until the sweeper's rule ended_partitions
-- makes them TIMED_OUT (RUN_ENDED, §7.6) recovery.stale later, with one PARTITIONS_TIMED_OUT event:
-- the history holds them as that rule left them (a ledger upgraded from before the rule drains its
-- own, docs/performance.md); 3 % of the runs had a partition
-- reissued (REISSUE_PARTITION ACKED, two claim tokens); 30 % of the timed-out runs have a DEAD
-- reissue (half of them abandoned by the sweeper). Runs ended longer ago than their retention (3 days success,
-- 14 days failed) are cleaned (RUN_CLEANED); 0.5 % of the runs have a CLEANUP_FAILED event.
-- Every row respects the tables' checks and keys; runs start evenly over the span (rows in time
-- order, as a real ledger has them). One transaction; ANALYZE is left to the caller.
\set ON_ERROR_STOP on
\if :{?runs}
\else
\set runs 3000
\endif
\if :{?parts}
\else
\set parts 8
\endif
\if :{?chunks}
\else
\set chunks 3
\endif
\if :{?span}
\else
\set span '365 days'
\endif
\if :{?ago}
\else
\set ago '0 days'
\endif
\if :{?active}
\else
\set active 12
\endif
\if :{?jobs}
\else
\set jobs 50
\endif
\if :{?tag}
\else
\set tag h
\endif
\if :{?seed}
\else
\set seed 0.42
\endif

BEGIN;
SELECT setseed(:seed) AS seeded \gset

-- The runs: i, keys, status, start and end. Ended runs start evenly over the span (the last two
-- hours left free), active ones in the last half hour.
CREATE TEMP TABLE h_run ON COMMIT DROP AS
SELECT i, run_id, job_key, business_key, status, started, ended, u2, u3,
       CASE WHEN status IN ('FAILED_MANIFEST', 'CREATED') THEN 0 ELSE :parts END AS nparts,
       status NOT IN ('FAILED_MANIFEST', 'CREATED', 'EXTRACTING', 'FAILED_EXTRACT', 'FAILED_SNAPSHOT_EXPIRED',
                      'TIMED_OUT') AS past_extract,
       status NOT IN ('FAILED_MANIFEST', 'CREATED', 'EXTRACTING', 'FAILED_EXTRACT', 'FAILED_SNAPSHOT_EXPIRED',
                      'TIMED_OUT', 'EXTRACTED_VALIDATED') AS past_start,
       status IN ('SUCCESS', 'FAILED_TARGET_VALIDATION', 'PUBLISH_UNKNOWN', 'FAILED_PUBLISH', 'PUBLISHING',
                  'PUBLISHED') AS publish_claimed
  FROM (SELECT i, md5('llhist:' || :'tag' || ':' || i)::uuid AS run_id,
               CASE WHEN i > :runs THEN 'HIST_' || upper(:'tag') || '_ACTIVE_' || (i - :runs)
                    ELSE 'HIST_' || upper(:'tag') || '_JOB_' || lpad(((i - 1) % :jobs)::text, 3, '0') END AS job_key,
               CASE WHEN i > :runs OR u >= 0.99 THEN to_char(st, 'YYYY-MM-DD') || '.' || :'tag' || i
                    ELSE to_char(st, 'YYYY-MM-DD') END AS business_key,
               CASE WHEN i > :runs THEN (ARRAY['CREATED', 'EXTRACTING', 'EXTRACTED_VALIDATED', 'STAGE_VALIDATING',
                                               'STAGING_VALIDATED', 'PUBLISHING', 'PUBLISHED'])[1 + (i - :runs) % 7]
                    WHEN u < 0.900 THEN 'SUCCESS'
                    WHEN u < 0.935 THEN 'FAILED_EXTRACT'
                    WHEN u < 0.955 THEN 'TIMED_OUT'
                    WHEN u < 0.965 THEN 'FAILED_STAGE_VALIDATION'
                    WHEN u < 0.975 THEN 'FAILED_TARGET_VALIDATION'
                    WHEN u < 0.980 THEN 'FAILED_PUBLISH'
                    WHEN u < 0.985 THEN 'FAILED_SNAPSHOT_EXPIRED'
                    WHEN u < 0.990 THEN 'FAILED_MANIFEST'
                    WHEN i > 0.9 * :runs AND :'ago'::interval = interval '0' THEN 'PUBLISH_UNKNOWN'
                    ELSE 'FAILED_PUBLISH' END AS status,
               st AS started,
               CASE WHEN i > :runs THEN NULL ELSE st + interval '20 minutes' + u2 * interval '40 minutes' END AS ended,
               u2, u3
          FROM (SELECT i, u, u2, u3,
                       CASE WHEN i > :runs THEN clock_timestamp() - interval '30 minutes' + (i - :runs) * interval '1 minute'
                            ELSE clock_timestamp() - :'ago'::interval - :'span'::interval
                                 + (:'span'::interval - interval '2 hours') * ((i - 1)::float8 / :runs) END AS st
                  FROM (SELECT i, random() AS u, random() AS u2, random() AS u3
                          FROM generate_series(1, :runs + :active) AS i) r0) r1) r2;

-- The partitions: k = 0 .. nparts-1; status from the run's; nf = its WRITTEN files.
CREATE TEMP TABLE h_part ON COMMIT DROP AS
SELECT r.*, k, lpad(k::text, 4, '0') AS pid, pstatus,
       CASE pstatus WHEN 'SUCCESS' THEN :chunks WHEN 'PENDING' THEN 0 ELSE least(1, :chunks) END AS nf,
       CASE WHEN pstatus <> 'PENDING' AND r.past_extract AND r.u3 < 0.03 AND k = 1 THEN 2
            WHEN pstatus = 'PENDING' THEN 0 ELSE 1 END AS attempts,
       r.started + (coalesce(r.ended, clock_timestamp()) - r.started) * ((k + 1)::float8 / (r.nparts + 2)) AS pdone
  FROM h_run r
 CROSS JOIN LATERAL generate_series(0, r.nparts - 1) AS k
 CROSS JOIN LATERAL (SELECT CASE
          WHEN r.past_extract THEN 'SUCCESS'
          WHEN r.status IN ('FAILED_EXTRACT', 'FAILED_SNAPSHOT_EXPIRED') THEN
               CASE WHEN k = 0 THEN 'FAILED' WHEN k % 2 = 1 THEN 'SUCCESS'
                    WHEN r.i <= :runs THEN 'TIMED_OUT' ELSE 'RUNNING' END
          WHEN r.status = 'TIMED_OUT' THEN CASE WHEN k % 2 = 1 THEN 'SUCCESS' ELSE 'TIMED_OUT' END
          ELSE CASE k % 3 WHEN 0 THEN 'SUCCESS' WHEN 1 THEN 'RUNNING' ELSE 'PENDING' END END AS pstatus) ps;

INSERT INTO nifi_ops.load_run
       (run_id, job_key, business_key, status, snapshot_scn, source_count, source_null_split_count,
        source_min_split, source_max_split, expected_partition_count, success_partition_count,
        failed_partition_count, extracted_count, staging_count, target_count, hdfs_run_path,
        stage_table_name, publish_token, version_no, parameters, started_at, heartbeat_at,
        extract_completed_at, publish_started_at, published_at, completed_at, error_stage, error_code,
        error_message, cleaned_at)
SELECT r.run_id, r.job_key, r.business_key, r.status,
       CASE WHEN r.nparts > 0 THEN 81234567890 + r.i END,
       CASE WHEN r.nparts > 0 THEN r.nparts::bigint * :chunks * 100000 END,
       CASE WHEN r.nparts > 0 THEN 0 END,
       CASE WHEN r.nparts > 0 THEN 0 END,
       CASE WHEN r.nparts > 0 THEN r.nparts::bigint * 1000000 - 1 END,
       CASE WHEN r.nparts > 0 THEN r.nparts END,
       coalesce(pc.ok, 0), coalesce(pc.failed, 0),
       CASE WHEN r.past_extract THEN r.nparts::bigint * :chunks * 100000 ELSE 0 END,
       CASE WHEN r.past_start AND r.status NOT IN ('STAGE_VALIDATING', 'FAILED_STAGE_VALIDATION')
            THEN r.nparts::bigint * :chunks * 100000 END,
       CASE WHEN r.status = 'SUCCESS' THEN r.nparts::bigint * :chunks * 100000 END,
       '/data/raw/' || r.job_key || '/run_id=' || r.run_id,
       'stg_' || lower(r.job_key) || '_' || replace(r.run_id::text, '-', ''),
       CASE WHEN r.publish_claimed THEN md5('llhist-pub:' || r.run_id)::uuid END,
       CASE r.status WHEN 'SUCCESS' THEN 8 WHEN 'CREATED' THEN 0 WHEN 'FAILED_MANIFEST' THEN 1 ELSE 4 END,
       '{"allowEmptySource": false}'::jsonb, r.started,
       coalesce(r.ended, clock_timestamp() - (r.i % 5) * interval '1 minute'),
       CASE WHEN r.past_extract THEN r.started + (coalesce(r.ended, clock_timestamp()) - r.started) * 0.7 END,
       CASE WHEN r.publish_claimed THEN r.started + (coalesce(r.ended, clock_timestamp()) - r.started) * 0.85 END,
       CASE WHEN r.status IN ('SUCCESS', 'FAILED_TARGET_VALIDATION', 'PUBLISHED')
            THEN r.started + (coalesce(r.ended, clock_timestamp()) - r.started) * 0.9 END,
       CASE WHEN r.i <= :runs AND r.status <> 'PUBLISH_UNKNOWN' THEN r.ended END,
       CASE r.status WHEN 'FAILED_EXTRACT' THEN 'EXTRACT' WHEN 'FAILED_SNAPSHOT_EXPIRED' THEN 'EXTRACT'
            WHEN 'TIMED_OUT' THEN 'RECOVERY' WHEN 'FAILED_STAGE_VALIDATION' THEN 'STAGE_VALIDATION'
            WHEN 'FAILED_TARGET_VALIDATION' THEN 'TARGET_VALIDATION' WHEN 'FAILED_PUBLISH' THEN 'PUBLISH'
            WHEN 'PUBLISH_UNKNOWN' THEN 'PUBLISH' WHEN 'FAILED_MANIFEST' THEN 'MANIFEST' END,
       CASE r.status WHEN 'FAILED_EXTRACT' THEN 'ROW_COUNT_MISMATCH' WHEN 'FAILED_SNAPSHOT_EXPIRED' THEN 'ORA-01555'
            WHEN 'TIMED_OUT' THEN 'PARTITION_STALE' WHEN 'FAILED_STAGE_VALIDATION' THEN 'STAGE_COUNT_MISMATCH'
            WHEN 'FAILED_TARGET_VALIDATION' THEN 'TARGET_COUNT_MISMATCH' WHEN 'FAILED_PUBLISH' THEN 'HIVE_ERROR'
            WHEN 'PUBLISH_UNKNOWN' THEN 'PUBLISH_STALE' WHEN 'FAILED_MANIFEST' THEN 'MANIFEST_INVALID' END,
       CASE WHEN r.status NOT IN ('SUCCESS') AND r.i <= :runs THEN 'generated history: ' || lower(r.status) END,
       CASE WHEN r.i <= :runs AND r.status = 'SUCCESS' AND r.ended < clock_timestamp() - interval '3 days'
                 THEN r.ended + interval '3 days 1 hour'
            WHEN r.i <= :runs AND r.status NOT IN ('SUCCESS', 'PUBLISH_UNKNOWN')
                 AND r.ended < clock_timestamp() - interval '14 days' AND r.u3 >= 0.005
                 THEN r.ended + interval '14 days 1 hour' END
  FROM h_run r
  LEFT JOIN (SELECT run_id, count(*) FILTER (WHERE pstatus = 'SUCCESS') AS ok,
                    count(*) FILTER (WHERE pstatus = 'FAILED') AS failed
               FROM h_part GROUP BY run_id) pc ON pc.run_id = r.run_id
 ORDER BY r.i;

INSERT INTO nifi_ops.load_partition
       (run_id, partition_id, lower_bound, upper_bound, upper_inclusive, is_null_partition, status,
        expected_row_count, actual_row_count, fragment_count, file_count, byte_count, attempt_count,
        claim_token, worker_node, started_at, heartbeat_at, completed_at, error_code, error_message,
        written_file_count, written_row_count, written_byte_count, written_count_sum, written_count_sumsq)
SELECT p.run_id, p.pid, p.k::bigint * 1000000, (p.k + 1)::bigint * 1000000 - 1, p.k = p.nparts - 1, false,
       p.pstatus, :chunks * 100000,
       CASE WHEN p.pstatus = 'SUCCESS' THEN :chunks * 100000 END,
       CASE WHEN p.pstatus = 'SUCCESS' THEN :chunks END,
       CASE WHEN p.pstatus = 'SUCCESS' THEN :chunks END,
       CASE WHEN p.pstatus = 'SUCCESS' THEN :chunks * 52428800::bigint END,
       p.attempts,
       CASE WHEN p.attempts > 0 THEN md5('llhist-tok:' || p.run_id || p.pid || p.attempts)::uuid END,
       CASE WHEN p.attempts > 0 THEN 'nifi-' || (p.k % 3 + 1) END,
       CASE WHEN p.attempts > 0 THEN p.started + interval '1 minute' END,
       CASE WHEN p.attempts > 0 THEN p.pdone END,
       CASE WHEN p.pstatus = 'TIMED_OUT' AND p.status <> 'TIMED_OUT' THEN least(p.ended + interval '10 minutes', clock_timestamp())
            WHEN p.pstatus IN ('SUCCESS', 'FAILED', 'TIMED_OUT') THEN p.pdone END,
       CASE p.pstatus WHEN 'FAILED' THEN CASE p.status WHEN 'FAILED_SNAPSHOT_EXPIRED' THEN 'ORA-01555'
                                                        ELSE 'ROW_COUNT_MISMATCH' END
                      WHEN 'TIMED_OUT' THEN CASE WHEN p.status = 'TIMED_OUT' THEN 'PARTITION_STALE'
                                                 ELSE 'RUN_ENDED' END END,
       CASE WHEN p.pstatus IN ('FAILED', 'TIMED_OUT') THEN 'generated history' END,
       p.nf, p.nf * 100000::bigint, p.nf * 52428800::bigint, p.nf * :chunks::bigint, p.nf * :chunks::bigint * :chunks
  FROM h_part p
 ORDER BY p.i, p.k;

INSERT INTO nifi_ops.load_claim_token (run_id, partition_id, claim_token, attempt_no, worker_node, granted_at)
SELECT p.run_id, p.pid, md5('llhist-tok:' || p.run_id || p.pid || a)::uuid, a, 'nifi-' || (p.k % 3 + 1),
       p.started + a * interval '1 minute'
  FROM h_part p CROSS JOIN LATERAL generate_series(1, p.attempts) AS a
 ORDER BY p.i, p.k, a;

INSERT INTO nifi_ops.load_file
       (run_id, partition_id, chunk_index, fragment_identifier, fragment_count, hdfs_path, record_count,
        byte_count, status, written_at, updated_at)
SELECT p.run_id, p.pid, c, md5('llhist-frag:' || p.run_id || p.pid), :chunks,
       '/data/raw/' || p.job_key || '/run_id=' || p.run_id || '/part-' || p.pid || '-' || lpad(c::text, 5, '0')
           || '.snappy.parquet',
       100000, 52428800, 'WRITTEN', p.pdone - (p.nf - c) * interval '10 seconds',
       p.pdone - (p.nf - c) * interval '10 seconds'
  FROM h_part p CROSS JOIN LATERAL generate_series(0, p.nf - 1) AS c
 ORDER BY p.i, p.k, c;

INSERT INTO nifi_ops.load_validation
       (run_id, stage, metric_name, expected_value, actual_value, tolerance, result, query_version, measured_at)
SELECT r.run_id, m.stage, m.metric, (r.nparts * :chunks * 100000)::text,
       CASE WHEN m.fail THEN '0' ELSE (r.nparts * :chunks * 100000)::text END, '0',
       CASE WHEN m.fail THEN 'FAIL' ELSE 'PASS' END, 'v1',
       r.started + (coalesce(r.ended, clock_timestamp()) - r.started) * m.at::float8
  FROM h_run r
 CROSS JOIN LATERAL (VALUES ('SOURCE', 'SOURCE_COUNT', false, 0.05, r.nparts > 0),
                            ('SOURCE', 'SOURCE_MAX_SPLIT', false, 0.05, r.nparts > 0),
                            ('STAGING', 'STAGE_COUNT', r.status = 'FAILED_STAGE_VALIDATION', 0.75,
                             r.past_start AND r.status <> 'STAGE_VALIDATING'),
                            ('STAGING', 'AMOUNT_SUM', false, 0.75, r.past_start AND r.status <> 'STAGE_VALIDATING'),
                            ('TARGET', 'TARGET_COUNT', r.status = 'FAILED_TARGET_VALIDATION', 0.95,
                             r.status IN ('SUCCESS', 'FAILED_TARGET_VALIDATION')),
                            ('TARGET', 'AMOUNT_SUM', false, 0.95, r.status IN ('SUCCESS', 'FAILED_TARGET_VALIDATION')))
       AS m(stage, metric, fail, at, present)
 WHERE m.present
 ORDER BY r.i;

-- The outbox: one VALIDATE_RUN per run past extraction (ACKED once validation started; one active
-- run's is DEAD), an ACKED REISSUE_PARTITION per reissued partition, a DEAD one per timed-out run.
INSERT INTO nifi_ops.load_dispatch
       (dispatch_id, run_id, dispatch_type, partition_id, status, attempt_count, next_attempt_at,
        last_http_status, last_error, created_at, sent_at, acked_at)
SELECT d.id, d.run_id, d.type, d.pid, d.status, d.attempts, d.at, CASE WHEN d.status <> 'PENDING' THEN 202 END,
       d.err, d.at, CASE WHEN d.status IN ('SENT', 'ACKED') THEN d.at + interval '1 second' END,
       CASE WHEN d.status = 'ACKED' THEN d.at + interval '5 seconds' END
  FROM (SELECT md5('llhist-val:' || r.run_id)::uuid AS id, r.run_id, 'VALIDATE_RUN' AS type, NULL AS pid,
               CASE WHEN r.past_start THEN 'ACKED' WHEN r.i = :runs + 2 THEN 'DEAD' ELSE 'SENT' END AS status,
               CASE WHEN r.i = :runs + 2 THEN 5 ELSE 1 END AS attempts,
               r.started + (coalesce(r.ended, clock_timestamp()) - r.started) * 0.7 AS at,
               CASE WHEN r.i = :runs + 2 THEN 'no ack after 5 attempts (ack timeout)' END AS err, r.i, 0 AS k
          FROM h_run r WHERE r.past_extract
        UNION ALL
        SELECT md5('llhist-rei:' || p.run_id || p.pid)::uuid, p.run_id, 'REISSUE_PARTITION', p.pid, 'ACKED', 1,
               p.started + interval '90 seconds', NULL, p.i, p.k
          FROM h_part p WHERE p.attempts = 2
        UNION ALL
        SELECT md5('llhist-dead:' || r.run_id)::uuid, r.run_id, 'REISSUE_PARTITION', '0000', 'DEAD', 5,
               r.ended - interval '1 minute',
               CASE WHEN r.u2 < 0.5 THEN 'abandoned: the run ended before the command was acknowledged'
                    ELSE 'no ack after 5 attempts (ack timeout)' END, r.i, 0
          FROM h_run r WHERE r.status = 'TIMED_OUT' AND r.u3 < 0.3) d
 ORDER BY d.i, d.k;

INSERT INTO nifi_ops.load_validation_start (run_id, dispatch_id, node, started_at)
SELECT r.run_id, md5('llhist-val:' || r.run_id)::uuid, 'nifi-1',
       r.started + (coalesce(r.ended, clock_timestamp()) - r.started) * 0.72
  FROM h_run r WHERE r.past_start ORDER BY r.i;

INSERT INTO nifi_ops.load_publish_token (run_id, publish_token, granted_at)
SELECT r.run_id, md5('llhist-pub:' || r.run_id)::uuid,
       r.started + (coalesce(r.ended, clock_timestamp()) - r.started) * 0.85
  FROM h_run r WHERE r.publish_claimed ORDER BY r.i;

-- Decisions: refused run requests (a second request for an active key), 0.5 % of the runs.
INSERT INTO nifi_ops.load_run_rejection (run_id, job_key, business_key, code, message, decided_at)
SELECT md5('llhist-rej:' || r.run_id)::uuid, r.job_key, r.business_key, 'DUPLICATE_ACTIVE_RUN',
       'an active run exists for this job and business key', r.started + interval '5 minutes'
  FROM h_run r WHERE r.u3 >= 0.995 AND r.i <= :runs ORDER BY r.i;

-- Refusals a replay restates (0013): one per rejection, as the registrar records it (on a topic
-- named with the tag: two histories' offsets never collide).
INSERT INTO nifi_ops.input_refusal
       (consumer_group, topic, kafka_partition, kafka_offset, value_digest, kind, code, reply, reason, recorded_at)
SELECT 'loadledger.registrar', 'loadledger.run.requests.' || :'tag', (r.i % 6), r.i, hashtext(r.run_id::text), 'REPLY',
       'DUPLICATE_ACTIVE_RUN', '{"outcome": "REJECTED"}', NULL, r.started + interval '5 minutes'
  FROM h_run r WHERE r.u3 >= 0.995 AND r.i <= :runs ORDER BY r.i;

-- Events, in the order of their runs: the service's status and partition events, NiFi's chunk
-- events, reissues, dead dispatches, cleanups and failed cleanups.
INSERT INTO nifi_ops.load_event
       (event_id, event_time, event_level, event_name, run_id, job_key, business_key, partition_id, chunk_index,
        process_group, processor_name, node_id, attempt_no, row_count, byte_count, duration_ms, error_class,
        error_code, message, details)
SELECT md5('llhist-ev:' || e.run_id || ':' || e.name || ':' || coalesce(e.pid, '') || ':' || coalesce(e.chunk, -1))::uuid,
       e.at, e.level, e.name, e.run_id, e.job_key, e.business_key, e.pid, e.chunk, e.pg, e.proc, e.node, e.attempt,
       e.nrows, e.nbytes, e.dur, e.eclass, e.ecode, e.msg, e.details
  FROM (
    SELECT r.i, r.started + (coalesce(r.ended, clock_timestamp()) - r.started) * s.at::float8 AS at, s.level, s.name,
           r.run_id, r.job_key, r.business_key, NULL::text AS pid, NULL::int AS chunk, 'control' AS pg,
           s.proc, NULL::text AS node, NULL::int AS attempt, NULL::bigint AS nrows, NULL::bigint AS nbytes,
           NULL::bigint AS dur, NULL::text AS eclass, s.ecode, s.msg, s.details
      FROM h_run r
     CROSS JOIN LATERAL (VALUES
         (0.0, 'INFO', 'RUN_STARTED', 'registrar', NULL, NULL, jsonb_build_object('to', 'CREATED'), true),
         (0.05, CASE WHEN r.status = 'FAILED_MANIFEST' THEN 'ERROR' ELSE 'INFO' END,
          CASE WHEN r.status = 'FAILED_MANIFEST' THEN 'MANIFEST_INVALID' ELSE 'MANIFEST_CREATED' END, 'registrar',
          CASE WHEN r.status = 'FAILED_MANIFEST' THEN 'MANIFEST_INVALID' END, NULL,
          jsonb_build_object('to', CASE WHEN r.status = 'FAILED_MANIFEST' THEN 'FAILED_MANIFEST' ELSE 'EXTRACTING' END),
          r.status <> 'CREATED'),
         (0.7, 'INFO', 'EXTRACT_VALIDATED', 'completion', NULL, NULL, jsonb_build_object('to', 'EXTRACTED_VALIDATED'),
          r.past_extract),
         (0.72, 'INFO', 'STAGE_VALIDATION_STARTED', 'completion', NULL, NULL,
          jsonb_build_object('to', 'STAGE_VALIDATING'), r.past_start),
         (0.8, 'INFO', 'STAGE_VALIDATED', 'completion', NULL, NULL, jsonb_build_object('to', 'STAGING_VALIDATED'),
          r.past_start AND r.status NOT IN ('STAGE_VALIDATING', 'FAILED_STAGE_VALIDATION')),
         (0.85, 'INFO', 'PUBLISH_STARTED', 'claimer', NULL, NULL, jsonb_build_object('to', 'PUBLISHING'),
          r.publish_claimed),
         (0.9, 'INFO', 'PUBLISH_FINISHED', 'completion', NULL, NULL, jsonb_build_object('to', 'PUBLISHED'),
          r.status IN ('SUCCESS', 'FAILED_TARGET_VALIDATION', 'PUBLISHED')),
         (1.0, 'INFO', 'RUN_SUCCESS', 'completion', NULL, NULL, jsonb_build_object('to', 'SUCCESS'),
          r.status = 'SUCCESS'),
         (1.0, 'ERROR', 'PUBLISH_UNKNOWN', 'sweeper', 'PUBLISH_STALE', 'no publish result within PT30M',
          jsonb_build_object('to', 'PUBLISH_UNKNOWN'), r.status = 'PUBLISH_UNKNOWN'),
         (1.0, 'ERROR', 'RUN_TIMED_OUT', 'sweeper', 'PARTITION_STALE', 'generated history',
          jsonb_build_object('to', 'TIMED_OUT'), r.status = 'TIMED_OUT'),
         (1.0, 'ERROR', 'RUN_FAILED', 'completion', 'GENERATED', 'generated history',
          jsonb_build_object('to', r.status),
          r.status IN ('FAILED_EXTRACT', 'FAILED_SNAPSHOT_EXPIRED', 'FAILED_STAGE_VALIDATION',
                       'FAILED_TARGET_VALIDATION', 'FAILED_PUBLISH')))
        AS s(at, level, name, proc, ecode, msg, details, present)
     WHERE s.present
    UNION ALL
    SELECT p.i, p.started + interval '1 minute' * a, 'INFO', 'PARTITION_STARTED', p.run_id, p.job_key,
           p.business_key, p.pid, a, 'control', 'claimer', 'nifi-' || (p.k % 3 + 1), a, NULL, NULL, NULL, NULL,
           NULL, NULL, '{}'::jsonb
      FROM h_part p CROSS JOIN LATERAL generate_series(1, p.attempts) AS a
    UNION ALL
    SELECT p.i, p.pdone, CASE WHEN p.pstatus = 'SUCCESS' THEN 'INFO' ELSE 'ERROR' END,
           CASE WHEN p.pstatus = 'SUCCESS' THEN 'PARTITION_SUCCESS' ELSE 'PARTITION_FAILED' END, p.run_id,
           p.job_key, p.business_key, p.pid, NULL, 'control', 'completion', NULL, p.attempts,
           CASE WHEN p.pstatus = 'SUCCESS' THEN :chunks * 100000 END, NULL, NULL, NULL,
           CASE WHEN p.pstatus = 'FAILED' THEN 'ROW_COUNT_MISMATCH' END, NULL, '{}'::jsonb
      FROM h_part p WHERE p.pstatus IN ('SUCCESS', 'FAILED')
    UNION ALL
    SELECT p.i, p.pdone - (p.nf - c) * interval '10 seconds', 'INFO', 'CHUNK_WRITTEN', p.run_id, p.job_key,
           p.business_key, p.pid, c, 'PG-20', 'PutHDFS', 'nifi-' || (p.k % 3 + 1), p.attempts, 100000, 52428800,
           1500 + c * 10, NULL, NULL, NULL, '{}'::jsonb
      FROM h_part p CROSS JOIN LATERAL generate_series(0, p.nf - 1) AS c
    UNION ALL
    SELECT p.i, p.started + interval '85 seconds', 'WARN', 'RECOVERY_REISSUED', p.run_id, p.job_key,
           p.business_key, p.pid, NULL, 'control', 'sweeper', NULL, 1, NULL, NULL, NULL, NULL, 'HEARTBEAT_STALE',
           'reset by sweeper for reissue', '{}'::jsonb
      FROM h_part p WHERE p.attempts = 2
    UNION ALL
    SELECT r.i, r.ended - interval '1 minute', CASE WHEN r.u2 < 0.5 THEN 'INFO' ELSE 'ERROR' END,
           CASE WHEN r.u2 < 0.5 THEN 'DISPATCH_ABANDONED' ELSE 'DISPATCH_DEAD' END, r.run_id, r.job_key,
           r.business_key, '0000', NULL, 'control', 'sweeper', NULL, 5, NULL, NULL, NULL, NULL, NULL,
           'REISSUE_PARTITION: no ack after 5 attempts', '{}'::jsonb
      FROM h_run r WHERE r.status = 'TIMED_OUT' AND r.u3 < 0.3
    UNION ALL
    SELECT min(p.i), least(min(p.ended) + interval '10 minutes', clock_timestamp()), 'INFO', 'PARTITIONS_TIMED_OUT', p.run_id, min(p.job_key),
           min(p.business_key), NULL, NULL, 'control', 'sweeper', NULL, NULL, NULL, NULL, NULL, NULL, 'RUN_ENDED',
           'the run ended ' || min(p.status) || '; no report for 600000 ms',
           jsonb_build_object('partitions', jsonb_agg(p.pid ORDER BY p.pid), 'runStatus', min(p.status))
      FROM h_part p WHERE p.pstatus = 'TIMED_OUT' AND p.status <> 'TIMED_OUT' GROUP BY p.run_id
    UNION ALL
    SELECT r.i, r.ended + CASE WHEN r.status = 'SUCCESS' THEN interval '3 days 1 hour' ELSE interval '14 days 1 hour' END,
           'INFO', 'RUN_CLEANED', r.run_id, r.job_key, r.business_key, NULL, NULL, 'control', 'loadctl', NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, jsonb_build_object('deletedPath', '/data/raw/' || r.job_key)
      FROM h_run r
     WHERE r.i <= :runs AND r.status <> 'PUBLISH_UNKNOWN'
       AND r.ended + CASE WHEN r.status = 'SUCCESS' THEN interval '3 days' ELSE interval '14 days' END
           < clock_timestamp() AND (r.status = 'SUCCESS' OR r.u3 >= 0.005)
    UNION ALL
    SELECT r.i, r.ended + interval '2 hours', 'WARN', 'CLEANUP_FAILED', r.run_id, r.job_key, r.business_key,
           NULL, NULL, 'PG-70', 'DeleteHDFS', 'nifi-2', NULL, NULL, NULL, NULL, 'HDFS', 'HDFS_ERROR',
           'permission denied on the run directory', '{}'::jsonb
      FROM h_run r WHERE r.i <= :runs AND r.u3 < 0.005 AND r.ended + interval '2 hours' < clock_timestamp()
  ) e
 ORDER BY e.at, e.i;

COMMIT;
