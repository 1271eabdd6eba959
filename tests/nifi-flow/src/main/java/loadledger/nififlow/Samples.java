package loadledger.nififlow;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What the templates are fed: a sample value for every FlowFile attribute a template or the
 * UpdateAttribute before it reads, by name (an attribute without one fails the check, naming it),
 * the content of the paths that use their content, and the reference scenario's Manifest
 * (tools/nifisim/llsim/scenario.py). An optional attribute has two samples, empty first: a
 * template runs once per sample (the i-th run takes each attribute's i-th sample, or its last).
 */
final class Samples {
    static final String RUN_ID = "6f1c2a4e-3b7d-4e8a-9c21-5d0f7a9b1e42";
    static final String CLAIM_TOKEN = "0b9e6d52-8f3a-4c17-a2d4-7e5f1c3b9a60";
    static final String PUBLISH_TOKEN = "c4a7e1f0-2d6b-4f93-8e15-9b3c0d7a6f28";
    static final String DISPATCH_ID = "3e8d5b21-7c4f-4a96-b0e2-1f6a9c8d5e74";

    /** The incoming content of the ValidationMetrics wraps: a JSON array of Metric records. */
    static final String METRICS = "[{\"metricName\":\"STAGE_COUNT\",\"expectedValue\":\"105000\",\"actualValue\":\"105000\","
            + "\"tolerance\":null,\"result\":\"PASS\",\"details\":{}}]";

    /** The attributes NiFi gives every FlowFile itself (nifi-mock's MockFlowFile has them too). */
    static final Set<String> CORE = Set.of("uuid", "filename", "path", "entryDate", "lineageStartDate", "fileSize");

    static final Map<String, List<String>> ATTRIBUTES = new LinkedHashMap<>();

    static {
        // identities
        put("ll.run.id", RUN_ID);
        put("ll.cmd.runId", RUN_ID);
        put("ll.cmd.dispatchId", DISPATCH_ID);
        put("ll.dispatch.id", DISPATCH_ID);
        put("ll.job.key", "ORACLE_INSP_DTL_DAILY");
        put("ll.business.key", "2026-09-28");
        put("ll.partition.id", "0000");
        put("ll.claim.token", CLAIM_TOKEN);
        put("ll.publish.token", PUBLISH_TOKEN);
        // run request: empty = take the parameter's default
        put("ll.hdfs.root", "", "/data/stage");
        put("ll.stage.table.prefix", "", "stg_insp_dtl_");
        put("ll.allow.empty.source", "false");
        // chunk report
        put("ll.chunk.index", "0");
        put("ll.chunk.count", "3");
        put("ll.record.count", "5000");
        put("ll.byte.count", "", "480000");
        put("ll.fragment.id", "", "frag-0000-0b9e6d52");
        put("ll.hdfs.path", "/data/stage/ORACLE_INSP_DTL_DAILY/run_id=" + RUN_ID + "/part-0000/chunk-00000.parquet");
        // failures: empty = the template's own default; the second has what escapeJson must escape
        put("ll.error.stage", "", "EXTRACT");
        put("ll.error.class", "", "ORACLE");
        put("ll.error.code", "", "ORA-00028");
        put("ll.error.message", "", "ORA-00028: your session has been killed (\"kill -9\" \\ \u00e9)\nline 2");
        put("ll.reply.attempt", "", "1");
        put("ll.fail.expected", "CREATED");
        put("ll.fail.status", "FAILED_MANIFEST");
        // publish and target validation
        put("ll.publish.outcome", "PUBLISHED", "FAILED_PUBLISH");
        put("ll.target.count", "", "105000");
    }

    private Samples() {
    }

    private static void put(final String name, final String... values) {
        ATTRIBUTES.put(name, List.of(values));
    }

    /** How many runs the attributes ask for (the longest list of samples). */
    static int runs(final Set<String> names) {
        int n = 1;
        for (final String a : names) {
            n = Math.max(n, ATTRIBUTES.getOrDefault(a, List.of("")).size());
        }
        return n;
    }

    static Map<String, String> forRun(final Set<String> names, final int run) {
        final Map<String, String> out = new LinkedHashMap<>();
        for (final String a : names) {
            final List<String> v = ATTRIBUTES.get(a);
            out.put(a, v.get(Math.min(run, v.size() - 1)));
        }
        return out;
    }

    private static final Pattern REF = Pattern.compile("\\$\\{\\s*(?:'([^']*)'|\"([^\"]*)\"|([A-Za-z0-9_.\\-]+))(\\s*\\()?");

    /**
     * The attribute names an expression reads: every ${name...} subject (also nested ones), not the
     * functions without a subject NiFi evaluates itself (hostname(), now(), UUID(), ...).
     */
    static Set<String> attributesIn(final String el) {
        final Set<String> out = new TreeSet<>();
        if (el == null) {
            return out;
        }
        final Matcher m = REF.matcher(el);
        while (m.find()) {
            if (m.start() > 0 && el.charAt(m.start() - 1) == '$') {
                continue; // $${ is a literal
            }
            if (m.group(4) != null) {
                continue; // a function: ${hostname(true)}
            }
            out.add(m.group(1) != null ? m.group(1) : m.group(2) != null ? m.group(2) : m.group(3));
        }
        return out;
    }

    /** The Manifest of the reference scenario (scenario.py Run.manifest()): 8 partitions of 15,000 ids, 0005 empty. */
    static String manifest() {
        final ObjectMapper m = new ObjectMapper();
        final ObjectNode o = m.createObjectNode();
        final int partitions = 8;
        final int ids = 15000;
        o.put("runId", RUN_ID);
        o.put("snapshotScn", "48151623420000000042");
        o.put("sourceCount", 105000L);
        o.put("sourceNullSplitCount", 0L);
        o.put("sourceMinSplit", "1");
        o.put("sourceMaxSplit", String.valueOf(partitions * ids));
        o.put("plannedPartitionCount", partitions);
        final ObjectNode metrics = o.putObject("sourceMetrics");
        metrics.put("AMOUNT_SUM", "52500000.00");
        metrics.put("MIN_TS", "2026-09-28T00:00:00");
        metrics.put("MAX_TS", "2026-09-28T23:59:59");
        o.put("sourceMetricsVersion", "v1");
        final ArrayNode parts = o.putArray("partitions");
        final List<String> empty = new ArrayList<>(List.of("0005"));
        for (int i = 0; i < partitions; i++) {
            final String pid = String.format("%04d", i);
            final long lo = 1L + (long) i * ids;
            final boolean last = i == partitions - 1;
            final long hi = last ? (long) partitions * ids : lo + ids;
            final ObjectNode p = parts.addObject();
            p.put("partitionId", pid);
            p.put("lowerBound", String.valueOf(lo));
            p.put("upperBound", String.valueOf(hi));
            p.put("upperInclusive", last);
            p.put("isNullPartition", false);
            p.put("expectedRowCount", empty.contains(pid) ? 0L : ids);
        }
        return o.toString();
    }
}
