package loadledger.nifi;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * The reference scenario's events (kafka-edition.md section 8; the same load as
 * tools/nifisim/llsim/scenario.py): job ORACLE_INSP_DTL_DAILY, 105,000 rows in 8 partitions of
 * 15,000 ids (0005 empty), 3 chunks of 5,000 rows per non-empty partition, SCN
 * 48151623420000000042. Values are plain Java maps in the shape of the project's Avro schemas.
 */
final class Scenario {
    static final String JOB = "ORACLE_INSP_DTL_DAILY";
    static final String SCN = "48151623420000000042";
    static final String HDFS_ROOT = "/data/stage";
    static final int PARTITIONS = 8;
    static final long IDS = 15000;
    static final String EMPTY = "0005";
    static final long ROWS_PER_CHUNK = 5000;
    static final long SOURCE_COUNT = 105000;

    final String runId = UUID.randomUUID().toString();
    final String businessKey;
    final String hdfsRunPath;
    final Map<String, String> tokens = new LinkedHashMap<>();

    Scenario(String businessKey) {
        this.businessKey = businessKey;
        this.hdfsRunPath = HDFS_ROOT + "/" + JOB + "/run_id=" + runId;
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    static String pid(int i) {
        return String.format("%04d", i);
    }

    static long expected(String pid) {
        return pid.equals(EMPTY) ? 0 : IDS;
    }

    /** The partition ids with rows. */
    List<String> nonEmpty() {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < PARTITIONS; i++) {
            if (expected(pid(i)) > 0) {
                out.add(pid(i));
            }
        }
        return out;
    }

    Map<String, Object> runRequest() {
        return map("runId", runId, "jobKey", JOB, "businessKey", businessKey, "hdfsRoot", HDFS_ROOT,
                   "stageTablePrefix", "stg_insp_dtl_", "allowEmptySource", false, "parameters",
                   map("flow", "PG-10"), "requestedAt", null);
    }

    Map<String, Object> manifest() {
        List<Object> parts = new ArrayList<>();
        for (int i = 0; i < PARTITIONS; i++) {
            long lo = 1 + i * IDS;
            boolean last = i == PARTITIONS - 1;
            long hi = last ? PARTITIONS * IDS : lo + IDS;
            parts.add(map("partitionId", pid(i), "lowerBound", Long.toString(lo), "upperBound", Long.toString(hi),
                          "upperInclusive", last, "isNullPartition", false, "expectedRowCount", expected(pid(i))));
        }
        return map("runId", runId, "snapshotScn", SCN, "sourceCount", SOURCE_COUNT, "sourceNullSplitCount", 0L,
                   "sourceMinSplit", "1", "sourceMaxSplit", Long.toString(PARTITIONS * IDS), "plannedPartitionCount",
                   PARTITIONS, "sourceMetrics",
                   map("AMOUNT_SUM", "52500000.00", "MIN_TS", "2026-09-28T00:00:00", "MAX_TS", "2026-09-28T23:59:59"),
                   "sourceMetricsVersion", "v1", "partitions", parts);
    }

    Map<String, Object> claim(String pid) {
        String token = tokens.computeIfAbsent(pid, p -> UUID.randomUUID().toString());
        return map("runId", runId, "partitionId", pid, "claimToken", token, "workerNode", "nifi-node-1");
    }

    /** The chunk reports of one partition (one FlowFile: the records of its extraction). */
    List<Map<String, Object>> chunks(String pid) {
        String token = tokens.get(pid);
        long rows = expected(pid);
        int n = (int) Math.max(1, (rows + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK);
        List<Map<String, Object>> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            long rec = Math.min(ROWS_PER_CHUNK, rows - i * ROWS_PER_CHUNK);
            out.add(map("runId", runId, "partitionId", pid, "claimToken", token, "chunkIndex", i, "chunkCount", n,
                        "fragmentIdentifier", "frag-" + pid + "-" + token.substring(0, 8), "hdfsPath",
                        String.format("%s/part-%s/chunk-%05d.parquet", hdfsRunPath, pid, i), "recordCount", rec,
                        "byteCount", rec * 96));
        }
        return out;
    }

    static Map<String, Object> metric(String name, String value) {
        return map("metricName", name, "expectedValue", value, "actualValue", value, "tolerance", null, "result",
                   "PASS", "details", map());
    }

    Map<String, Object> metrics(String stage) {
        String count = stage.equals("STAGING") ? "STAGE_COUNT" : "TARGET_COUNT";
        return map("runId", runId, "stage", stage, "queryVersion", "v1", "metrics",
                   List.of(metric(count, Long.toString(SOURCE_COUNT)), metric("AMOUNT_SUM", "52500000.00")));
    }
}
