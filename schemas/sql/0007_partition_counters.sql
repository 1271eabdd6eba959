-- 0007_partition_counters: the partition's WRITTEN files summed as they are written (issue 8 §3).
--
-- The chunk gate of contract §5.4 steps 8-10 aggregates the WRITTEN files of a partition after
-- every chunk report: O(n) per chunk, O(n²) per partition. These counters are kept by the chunk
-- report's own upsert (a new row adds its contribution, a changed row the difference, an identical
-- row nothing) and reset by the sweeper when it invalidates a partition's files, so the gate reads
-- one row. The gate passes from the counters alone when every WRITTEN file carries the same
-- chunkCount C and there are C of them (indexes are unique and below their chunkCount, so they are
-- 0..C-1): written_count_sum = n*C and written_count_sumsq = n*C*C say "all equal to C". Any other
-- state at files >= chunkCount is judged with the full aggregate, once.
ALTER TABLE nifi_ops.load_partition
    ADD COLUMN written_file_count  integer NOT NULL DEFAULT 0,
    ADD COLUMN written_row_count   bigint  NOT NULL DEFAULT 0,
    ADD COLUMN written_byte_count  bigint  NOT NULL DEFAULT 0,
    ADD COLUMN written_count_sum   bigint  NOT NULL DEFAULT 0,
    ADD COLUMN written_count_sumsq bigint  NOT NULL DEFAULT 0;

UPDATE nifi_ops.load_partition p
   SET written_file_count = f.files, written_row_count = f.rows, written_byte_count = f.bytes,
       written_count_sum = f.csum, written_count_sumsq = f.csumsq
  FROM (SELECT run_id, partition_id, count(*) AS files, sum(record_count) AS rows,
               sum(coalesce(byte_count, 0)) AS bytes, sum(fragment_count::bigint) AS csum,
               sum(fragment_count::bigint * fragment_count::bigint) AS csumsq
          FROM nifi_ops.load_file WHERE status = 'WRITTEN' GROUP BY run_id, partition_id) f
 WHERE p.run_id = f.run_id AND p.partition_id = f.partition_id;
