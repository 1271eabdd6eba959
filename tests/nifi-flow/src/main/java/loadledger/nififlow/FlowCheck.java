package loadledger.nififlow;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.nifi.flow.VersionedProcessGroup;

import java.io.File;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The shipped NiFi flow definitions checked with NiFi 2.6.0's own classes (tests/nifi-flow/README.md).
 *
 * <pre>
 * java -cp ... loadledger.nififlow.FlowCheck --repo REPO --flow nifi/loadledger-flow.json [--flow ...]
 *      [--dump DIR] [--manifest FILE]
 * </pre>
 *
 * One line per check (OK, FAIL, NOTE); exit 1 when any check failed, 2 on bad usage.
 * --flow is relative to --repo (or absolute); --dump writes every message produced (check 5);
 * --manifest is the Manifest JSON published as-is (default: the reference scenario's, Samples).
 */
public final class FlowCheck {
    private FlowCheck() {
    }

    public static void main(final String[] args) throws Exception {
        String repo = null;
        String dump = null;
        String manifestFile = null;
        final List<String> flows = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            final String a = args[i];
            if (i + 1 >= args.length) {
                usage("missing value after " + a);
            }
            switch (a) {
                case "--repo" -> repo = args[++i];
                case "--flow" -> flows.add(args[++i]);
                case "--dump" -> dump = args[++i];
                case "--manifest" -> manifestFile = args[++i];
                default -> usage("unknown option " + a);
            }
        }
        if (repo == null || flows.isEmpty()) {
            usage("--repo and at least one --flow are needed");
        }
        final long t0 = System.nanoTime();
        final File root = new File(repo);
        final Report report = new Report();
        final Schemas schemas = new Schemas(new File(root, "schemas/avro"));
        final File tableFile = new File(root, "tools/nififlow/components-2.6.0.json");
        final JsonNode table = new ObjectMapper().readTree(tableFile);
        final String manifest = manifestFile == null ? Samples.manifest() : Files.readString(new File(manifestFile).toPath());
        File dumpDir = null;
        final ArrayNode index = new ObjectMapper().createArrayNode();
        if (dump != null) {
            dumpDir = new File(dump);
            Files.createDirectories(dumpDir.toPath());
        }

        report.flow("components-2.6.0.json");
        TableCheck.run(tableFile, report);
        FindingCheck.run(schemas, manifest, report);

        for (final String f : flows) {
            final File file = new File(f).isAbsolute() ? new File(f) : new File(root, f);
            report.flow(file.getName());
            final Flow flow = load(file, report);
            if (flow == null) {
                continue;
            }
            ComponentCheck.run(flow, schemas, table, report);
            new TemplateCheck(flow, schemas, report, dumpDir, index, manifest, root).run();
        }

        if (dumpDir != null) {
            final ObjectMapper m = new ObjectMapper();
            m.writerWithDefaultPrettyPrinter().writeValue(new File(dumpDir, "index.json"), index);
            // the stand-in registry's ids, as a schema.ids_file for the services' Confluent framing
            final ObjectNode ids = m.createObjectNode();
            for (final Map.Entry<String, Integer> e : new TreeMap<>(schemas.idOfName).entrySet()) {
                ids.put(String.valueOf(e.getValue()), schemas.file(e.getKey()).getAbsolutePath());
            }
            m.writerWithDefaultPrettyPrinter().writeValue(new File(dumpDir, "schema-ids.json"), ids);
        }
        report.flow("-");
        System.out.printf("RESULT flowcheck: %d ok, %d failed (%.1f s)%n", report.passed(), report.failed(),
                (System.nanoTime() - t0) / 1e9);
        System.exit(report.failed() == 0 ? 0 : 1);
    }

    private static void usage(final String why) {
        System.err.println("FlowCheck: " + why);
        System.err.println("usage: FlowCheck --repo REPO --flow FILE [--flow FILE ...] [--dump DIR] [--manifest FILE]");
        System.exit(2);
    }

    /** Check 1: NiFi's model reads the file as its upload does, and strictly; then the sanity of what it read. */
    private static Flow load(final File file, final Report report) {
        final Flow flow;
        try {
            flow = Flow.read(file, false);
            report.ok("read as RegisteredFlowSnapshot the way NiFi 2.6.0's upload reads it (NON_NULL, Jakarta XML Binding"
                    + " introspector, unknown properties ignored)");
        } catch (final Exception e) {
            report.fail("NiFi 2.6.0's upload cannot read it as RegisteredFlowSnapshot: " + e.getMessage());
            return null;
        }
        try {
            Flow.read(file, true);
            report.ok("read strictly (FAIL_ON_UNKNOWN_PROPERTIES): no key NiFi's model would drop");
        } catch (final Exception e) {
            report.fail("a key NiFi's model does not know (NiFi would drop it silently): " + e.getMessage());
        }
        final VersionedProcessGroup root = flow.snapshot.getFlowContents();
        if (root == null) {
            report.fail("no flowContents");
            return null;
        }
        final boolean ctxOk = flow.snapshot.getParameterContexts() != null && flow.snapshot.getParameterContexts().containsKey("loadledger");
        report.check(ctxOk, "parameter context 'loadledger' present", "it is not: " +
                (flow.snapshot.getParameterContexts() == null ? "none" : flow.snapshot.getParameterContexts().keySet()));
        report.check("loadledger".equals(root.getParameterContextName()) && flow.context != null,
                "the root group's parameter context is 'loadledger'", "it is " + root.getParameterContextName());
        report.check(!flow.processors.isEmpty() && !flow.services.isEmpty(), "flowContents: " + flow.groupNames.size()
                + " groups, " + flow.processors.size() + " processors, " + flow.services.size() + " controller services, "
                + flow.connections.size() + " connections, " + (flow.context == null || flow.context.getParameters() == null ? 0
                : flow.context.getParameters().size()) + " parameters", "empty");
        return flow.context == null ? null : flow;
    }
}
