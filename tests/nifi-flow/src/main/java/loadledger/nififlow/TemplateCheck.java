package loadledger.nififlow;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.avro.Schema;
import org.apache.avro.file.DataFileStream;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.nifi.controller.ControllerService;
import org.apache.nifi.flow.VersionedConnection;
import org.apache.nifi.flow.VersionedControllerService;
import org.apache.nifi.flow.VersionedProcessor;
import org.apache.nifi.processor.Processor;
import org.apache.nifi.serialization.RecordReader;
import org.apache.nifi.serialization.RecordReaderFactory;
import org.apache.nifi.serialization.RecordSetWriter;
import org.apache.nifi.serialization.RecordSetWriterFactory;
import org.apache.nifi.serialization.record.Record;
import org.apache.nifi.serialization.record.RecordSchema;
import org.apache.nifi.serialization.record.RecordSet;
import org.apache.nifi.util.MockFlowFile;
import org.apache.nifi.util.MockPropertyValue;
import org.apache.nifi.util.NoOpProcessor;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * Check 4 (and 5): every message the flow publishes, produced by NiFi's own classes along the
 * flow's own path: the "Prepare &lt;Schema&gt;" UpdateAttribute (sets schema.name or avro.schema), the
 * ReplaceText template (or, for the Manifest, the SITE's JSON as-is), then what PublishKafka 2.6.0
 * makes of the FlowFile (getKafkaRecordConverter):
 * <ul>
 * <li>a PublishKafka with a Record Reader: its reader and writer as RecordStreamKafkaRecordConverter
 * and RecordValueFactory use them (one writer per FlowFile, the buffer reset before each record, one
 * message per record, the key from "Message Key Field");</li>
 * <li>a PublishKafka without one (the embedded flow): the ConvertRecord before it run in a TestRunner
 * with the flow's reader and writer, its output content whole as the message
 * (FlowFileStreamKafkaRecordConverter, no Message Demarcator), the key "Kafka Key" evaluated against
 * the FlowFile.</li>
 * </ul>
 * The key must be the record's runId. The bytes are decoded with Avro Java against the topic's
 * schemas/avro/&lt;Schema&gt;.avsc in the framing the writer's strategy gives (a container's own schema
 * must be the .avsc), every field of the JSON must come back with its value, a schema field the JSON
 * lacked must have a default and come back as it, and the framing must be one nifi/conf/&lt;variant&gt;
 * gives the topic. After the Manifest's publisher, the FlowFile is followed to the SplitJson that
 * hands PG-20 its partitions (through a ConvertRecord back to JSON in the embedded flow), both run.
 */
final class TemplateCheck {
    static final String REPLACE_TEXT = "org.apache.nifi.processors.standard.ReplaceText";
    static final String UPDATE_ATTRIBUTE = "org.apache.nifi.processors.attributes.UpdateAttribute";
    static final String PUBLISH_KAFKA = "org.apache.nifi.kafka.processors.PublishKafka";
    static final String CONVERT_RECORD = "org.apache.nifi.processors.standard.ConvertRecord";
    static final String SPLIT_JSON = "org.apache.nifi.processors.standard.SplitJson";
    static final String AVRO_WRITER = "org.apache.nifi.avro.AvroRecordSetWriter";
    /** Processors of the flow that read and write attributes only: the content goes through them as it came. */
    static final Set<String> CONTENT_UNTOUCHED = Set.of(
            "org.apache.nifi.processors.standard.Wait", "org.apache.nifi.processors.standard.Notify",
            "org.apache.nifi.processors.standard.RouteOnAttribute", "org.apache.nifi.processors.standard.DetectDuplicate",
            "org.apache.nifi.processors.standard.LogAttribute", UPDATE_ATTRIBUTE);

    private static final ObjectMapper JSON = new ObjectMapper();

    private final Flow flow;
    private final Schemas schemas;
    private final Report report;
    private final File dump;
    private final ArrayNode index;
    private final String manifest;
    private final Map<String, Integer> dumpCount = new HashMap<>();
    private boolean blockNoted;
    private boolean containerNoted;
    private final String variant;
    private final Map<String, Set<String>> confFramings;

    /** topic -> the framings nifi/conf/&lt;variant&gt;/*.conf give it (topic.&lt;name&gt;.framing, every service's file). */
    private static Map<String, Set<String>> confFramings(final File dir) throws IOException {
        final Map<String, Set<String>> out = new HashMap<>();
        final File[] files = dir.listFiles((d, n) -> n.endsWith(".conf"));
        if (files == null) {
            return out;
        }
        for (final File f : files) {
            for (final String line : Files.readAllLines(f.toPath())) {
                final String l = line.strip();
                final int eq = l.indexOf('=');
                if (l.startsWith("topic.") && eq > 0 && l.substring(0, eq).strip().endsWith(".framing")) {
                    final String key = l.substring(0, eq).strip();
                    out.computeIfAbsent(key.substring("topic.".length(), key.length() - ".framing".length()), k -> new TreeSet<>())
                            .add(l.substring(eq + 1).strip());
                }
            }
        }
        return out;
    }

    TemplateCheck(final Flow flow, final Schemas schemas, final Report report, final File dump, final ArrayNode index,
                  final String manifest, final File repo) throws IOException {
        this.flow = flow;
        this.variant = flow.file.contains("embedded") ? "embedded" : "registry";
        this.confFramings = confFramings(new File(repo, "nifi/conf/" + variant));
        this.schemas = schemas;
        this.report = report;
        this.dump = dump;
        this.index = index;
        this.manifest = manifest;
    }

    void run() {
        final List<VersionedProcessor> templates = flow.processorsOfType(REPLACE_TEXT);
        for (final VersionedProcessor rt : templates) {
            final String what = "template '" + flow.path(rt.getIdentifier()) + "'";
            final VersionedProcessor prepare = single(flow.upstream(rt.getIdentifier()), UPDATE_ATTRIBUTE, what, "an UpdateAttribute before it");
            final Hop hop = publisherAfter(rt, what);
            if (prepare != null && hop != null) {
                path(what, prepare, rt, hop);
            }
        }
        // the publishers fed without a template: their content is the SITE's JSON, as-is
        final List<VersionedProcessor> publishers = flow.processorsOfType(PUBLISH_KAFKA);
        for (final VersionedProcessor pk : publishers) {
            List<VersionedProcessor> ups = flow.upstream(pk.getIdentifier());
            final List<VersionedProcessor> converts = ups.stream().filter(p -> CONVERT_RECORD.equals(p.getType())).toList();
            VersionedProcessor convert = null;
            if (converts.size() == 1) {
                convert = converts.get(0);
                ups = flow.upstream(convert.getIdentifier());
            }
            if (ups.stream().anyMatch(p -> REPLACE_TEXT.equals(p.getType()))) {
                continue;
            }
            final String what = "as-is '" + flow.path(pk.getIdentifier()) + "'";
            final VersionedProcessor prepare = single(ups, UPDATE_ATTRIBUTE, what, "an UpdateAttribute before it");
            if (prepare != null) {
                path(what, prepare, null, new Hop(convert, pk));
            }
        }
        report.note(templates.size() + " ReplaceText templates, " + publishers.size() + " PublishKafka in the flow");
    }

    /** Between a template (or a prepared FlowFile) and Kafka: an optional ConvertRecord, then the PublishKafka. */
    private record Hop(VersionedProcessor convert, VersionedProcessor publish) {
    }

    /** What from's success goes to: a PublishKafka, or a ConvertRecord whose success goes to one. */
    private Hop publisherAfter(final VersionedProcessor from, final String what) {
        final List<VersionedProcessor> next = flow.downstream(from.getIdentifier(), "success").stream()
                .filter(p -> PUBLISH_KAFKA.equals(p.getType()) || CONVERT_RECORD.equals(p.getType())).toList();
        if (next.size() != 1) {
            report.fail(what + ": needs exactly one PublishKafka, or ConvertRecord then PublishKafka, on its success, the flow has "
                    + next.stream().map(VersionedProcessor::getName).toList());
            return null;
        }
        final VersionedProcessor n = next.get(0);
        if (PUBLISH_KAFKA.equals(n.getType())) {
            return new Hop(null, n);
        }
        final VersionedProcessor pk = single(flow.downstream(n.getIdentifier(), "success"), PUBLISH_KAFKA, what,
                "a PublishKafka on the success of '" + n.getName() + "'");
        return pk == null ? null : new Hop(n, pk);
    }

    private VersionedProcessor single(final List<VersionedProcessor> ps, final String type, final String what, final String needs) {
        final List<VersionedProcessor> of = ps.stream().filter(p -> type.equals(p.getType())).toList();
        if (of.size() != 1) {
            report.fail(what + ": needs exactly one " + needs + ", the flow has " + of.size());
            return null;
        }
        return of.get(0);
    }

    /**
     * One path: prepare (UpdateAttribute), template (ReplaceText, or null: content as-is), then the hop to
     * Kafka (an optional ConvertRecord, the PublishKafka).
     */
    private void path(final String what, final VersionedProcessor prepare, final VersionedProcessor template, final Hop hop) {
        final VersionedProcessor publish = hop.publish();
        final String topic = flow.resolve(publish.getProperties().get("Topic Name"));
        final String prefix = flow.parameter("topic.prefix");
        final String logical = topic != null && prefix != null && topic.startsWith(prefix) ? topic.substring(prefix.length()) : topic;
        final String schemaName = schemas.schemaOfTopic.get(logical);
        if (schemaName == null) {
            report.fail(what + ": publishes to '" + topic + "', which no schema in schemas/avro is for");
            return;
        }
        final Schema schema = schemas.byName.get(schemaName);
        final String content;
        if (template == null) {
            if (!"manifests".equals(logical)) {
                report.fail(what + ": publishes the SITE's content as-is to " + topic + "; this check has no sample content for it");
                return;
            }
            content = manifest;
        } else if ("Always Replace".equals(template.getProperties().get("Replacement Strategy"))) {
            content = "";
        } else if ("validation-metrics".equals(logical)) {
            content = Samples.METRICS;
        } else {
            report.fail(what + ": wraps its incoming content (" + template.getProperties().get("Replacement Strategy")
                    + ") for " + topic + "; this check has no sample content for it");
            return;
        }
        // the attributes read: the UpdateAttribute's, and the template's that the UpdateAttribute does not set
        final Set<String> sets = dynamicNames(prepare);
        final Set<String> needed = new TreeSet<>();
        for (final String v : prepare.getProperties().values()) {
            needed.addAll(Samples.attributesIn(v));
        }
        if (template != null) {
            for (final String v : template.getProperties().values()) {
                for (final String a : Samples.attributesIn(v)) {
                    if (!sets.contains(a)) {
                        needed.add(a);
                    }
                }
            }
        }
        // the attributes PublishKafka reads itself: "Kafka Key" (an expression, when the content is sent whole)
        for (final String a : Samples.attributesIn(publish.getProperties().get("Kafka Key"))) {
            if (!sets.contains(a)) {
                needed.add(a);
            }
        }
        needed.removeAll(Samples.CORE);
        final Set<String> missing = new TreeSet<>(needed);
        missing.removeAll(Samples.ATTRIBUTES.keySet());
        if (!missing.isEmpty()) {
            report.fail(what + ": no sample for attribute(s) " + missing + " (add them to Samples.ATTRIBUTES)");
            return;
        }
        final int runs = Samples.runs(needed);
        for (int run = 0; run < runs; run++) {
            final String label = what + (runs > 1 ? " [" + (run + 1) + "/" + runs + "]" : "");
            final Map<String, String> sample = Samples.forRun(needed, run);
            if (template == null && sample.containsKey("ll.run.id")) {
                // the SITE hands on the run's FlowFile: its ll.run.id is the runId it wrote into the content
                sample.put("ll.run.id", runIdOf(content));
            }
            try {
                one(label, prepare, template, hop, topic, logical, schemaName, schema, content, sample);
            } catch (final Throwable t) {
                report.fail(label + ": " + topic + ": " + describe(t));
            }
        }
    }

    private static String runIdOf(final String json) {
        try {
            return JSON.readTree(json).path("runId").asText(null);
        } catch (final IOException e) {
            return null;
        }
    }

    /** A throwable with its causes (nifi-mock wraps what a processor throws). */
    static String describe(final Throwable t) {
        final StringBuilder b = new StringBuilder(String.valueOf(t));
        for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            b.append(" <- ").append(c);
        }
        return b.toString();
    }

    private static Set<String> dynamicNames(final VersionedProcessor ua) {
        final Set<String> out = new TreeSet<>();
        final Class<?> cls = Services.load(ua.getType());
        if (cls == null) {
            return out;
        }
        try {
            final Processor p = (Processor) cls.getDeclaredConstructor().newInstance();
            TestRunners.newTestRunner(p);
            final Set<String> own = new TreeSet<>();
            p.getPropertyDescriptors().forEach(d -> own.add(d.getName()));
            for (final String n : ua.getProperties().keySet()) {
                if (!own.contains(n)) {
                    out.add(n);
                }
            }
        } catch (final ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
        return out;
    }

    /**
     * Runs a processor of the flow, configured and validated as the flow has it (its services the
     * flow's, Services), on one FlowFile; returns the runner after the run.
     */
    private TestRunner runFlowProcessor(final VersionedProcessor v, final byte[] content, final Map<String, String> attrs)
            throws ReflectiveOperationException {
        final Processor p = (Processor) Services.load(v.getType()).getDeclaredConstructor().newInstance();
        final TestRunner r = TestRunners.newTestRunner(p);
        final Services svc = new Services(flow, r, schemas);
        final List<String> problems = new ArrayList<>();
        svc.configure(v, p, problems);
        problems.addAll(Services.invalid(r.validate()));
        if (!problems.isEmpty()) {
            throw new IllegalStateException("'" + v.getName() + "' is invalid: " + String.join("; ", problems));
        }
        // validated above with nifi-mock's expression-usage guard on; it is a test-only guard that
        // also refuses reading an EL property's raw value, which NiFi allows and ReplaceText's
        // @OnScheduled does (Search Value, for Regex Replace): off for the run
        r.setValidateExpressionUsage(false);
        r.enqueue(content, attrs);
        r.run();
        return r;
    }

    /** Runs a processor of the flow on one FlowFile; returns the FlowFile it sends to success (exactly one). */
    private MockFlowFile runProcessor(final VersionedProcessor v, final byte[] content, final Map<String, String> attrs)
            throws ReflectiveOperationException {
        final TestRunner r = runFlowProcessor(v, content, attrs);
        final List<MockFlowFile> ok = r.getFlowFilesForRelationship("success");
        if (ok.size() != 1) {
            throw new IllegalStateException("'" + v.getName() + "' sent " + ok.size() + " FlowFile(s) to success; failure: "
                    + r.getFlowFilesForRelationship("failure").size() + "; log: " + r.getLogger().getErrorMessages());
        }
        return ok.get(0);
    }

    /** One message as PublishKafka would send it: its value and key, and the FlowFile as it leaves PublishKafka. */
    private record Message(byte[] value, Object key, String keyFrom, byte[] contentAfter, Map<String, String> attrsAfter) {
    }

    private void one(final String label, final VersionedProcessor prepare, final VersionedProcessor template, final Hop hop,
                     final String topic, final String logical, final String schemaName, final Schema schema, final String content,
                     final Map<String, String> sample) throws Exception {
        final VersionedProcessor publish = hop.publish();
        final byte[] in = content.getBytes(StandardCharsets.UTF_8);
        final MockFlowFile prepared = runProcessor(prepare, in, sample);
        final MockFlowFile out = template == null ? prepared : runProcessor(template, in, prepared.getAttributes());
        final String json = out.getContent();
        final JsonNode tree;
        try {
            tree = JSON.readTree(json);
        } catch (final IOException e) {
            report.fail(label + ": the template's output is not JSON (" + e.getMessage() + "): " + json);
            return;
        }
        final Map<String, String> attrs = out.getAttributes();

        // PublishKafka 2.6.0 (getKafkaRecordConverter): with a Record Reader (and Writer) it reads the
        // content's records and writes each one as a message; without one it sends the content whole
        final boolean recordPath = publish.getProperties().get("Record Reader") != null;
        if (recordPath && hop.convert() != null) {
            report.fail(label + ": '" + hop.convert().getName() + "' (ConvertRecord) feeds a PublishKafka with a Record Reader:"
                    + " not a path this check follows");
            return;
        }
        if (!recordPath && hop.convert() == null) {
            report.fail(label + ": '" + publish.getName() + "' has no Record Reader and nothing converts the JSON before it:"
                    + " the JSON itself would be the message, which no framing reads");
            return;
        }
        final VersionedProcessor writing = recordPath ? publish : hop.convert();
        final String writerId = flow.resolve(writing.getProperties().get("Record Writer"));
        final VersionedControllerService writerV = writerId == null ? null : flow.services.get(writerId);
        if (writerV == null) {
            report.fail(label + ": the Record Writer of '" + writing.getName() + "' names no service of the flow: " + writerId);
            return;
        }
        final List<String> pre = new ArrayList<>();
        // the attribute the UpdateAttribute set is the one for this topic
        final String access = flow.resolve(writerV.getProperties().get("schema-access-strategy"));
        if ("schema-name".equals(access)) {
            final String subject = flow.parameter("topic.prefix") + logical + "-value";
            if (!subject.equals(attrs.get("schema.name"))) {
                pre.add("schema.name is '" + attrs.get("schema.name") + "', the topic's subject is '" + subject + "'");
            }
        } else if ("schema-text-property".equals(access)) {
            try {
                if (!schema.equals(new Schema.Parser().parse(String.valueOf(attrs.get("avro.schema"))))) {
                    pre.add("avro.schema is not schemas/avro/" + schemaName + ".avsc");
                }
            } catch (final RuntimeException e) {
                pre.add("avro.schema is not an Avro schema: " + e.getMessage());
            }
        }
        if (!pre.isEmpty()) {
            report.fail(label + ": " + topic + ": " + String.join("; ", pre));
            return;
        }

        final Message message = recordPath ? viaRecordWriter(label, publish, writerId, json, attrs)
                : viaContent(label, hop, json, attrs);
        if (message == null) {
            return;
        }
        final byte[] value = message.value();
        final List<String> diffs = new ArrayList<>();
        final Object key = message.key();
        if (!(key instanceof String) || !key.equals(tree.path("runId").asText(null))) {
            diffs.add("Kafka key (" + message.keyFrom() + ") is " + key + ", expected the runId");
        }
        final String strategy = flow.resolve(writerV.getProperties().get("Schema Write Strategy"));
        final String framing;
        final GenericRecord decoded;
        Integer schemaId = null;
        if (!AVRO_WRITER.equals(writerV.getType())) {
            report.fail(label + ": the Record Writer of '" + writing.getName() + "' is '" + writerV.getName() + "' ("
                    + Flow.simple(writerV.getType()) + "), not an AvroRecordSetWriter; it wrote "
                    + new String(value, 0, Math.min(80, value.length), StandardCharsets.UTF_8));
            return;
        }
        switch (strategy == null ? "avro-embedded" : strategy) {
            case "schema-reference-writer" -> {
                framing = "confluent";
                if (value.length < 5 || value[0] != 0) {
                    report.fail(label + ": not 0x00 + 4-byte id: " + HexFormat.of().formatHex(value, 0, Math.min(8, value.length)));
                    return;
                }
                schemaId = ByteBuffer.wrap(value, 1, 4).getInt();
                final int want = schemas.idOfName.get(schemaName);
                if (schemaId != want) {
                    diffs.add("schema id " + schemaId + " (" + schemas.nameOfId.get(schemaId) + "), the topic's schema " + schemaName
                            + " has id " + want + " (schema.name was '" + attrs.get("schema.name") + "')");
                }
                decoded = bare(value, 5, schema, diffs);
            }
            case "no-schema" -> {
                framing = "bare";
                decoded = bare(value, 0, schema, diffs);
            }
            case "avro-embedded" -> {
                if (isContainer(value)) {
                    // ConvertRecord's content: the header (with the writer's schema) and one block
                    framing = "container";
                    decoded = container(value, schema, diffs);
                    if (!containerNoted && !recordPath) {
                        containerNoted = true;
                        report.note("ConvertRecord (\"Embed Avro Schema\") then PublishKafka without a Record Reader:"
                                + " each message is the FlowFile's content, one Avro container file (header with the schema,"
                                + " one block), sent whole (FlowFileStreamKafkaRecordConverter); the services read these"
                                + " topics with framing = container");
                    }
                } else if (!recordPath) {
                    report.fail(label + ": the content '" + hop.convert().getName() + "' wrote is not an Avro container file: "
                            + HexFormat.of().formatHex(value, 0, Math.min(8, value.length)));
                    return;
                } else {
                    // PublishKafka 2.6.0 clears its buffer before each record (RecordValueFactory), after
                    // WriteAvroResultWithSchema wrote the container header into it: a headerless block
                    framing = "block";
                    decoded = block(value, schema, diffs);
                    if (!blockNoted) {
                        blockNoted = true;
                        report.note("\"Embed Avro Schema\" through PublishKafka 2.6.0: each message is a container block without"
                                + " the file header (RecordValueFactory clears the buffer before each record, after"
                                + " WriteAvroResultWithSchema wrote the header into it); the services must read these topics"
                                + " with framing = block");
                    }
                }
            }
            default -> {
                report.fail(label + ": Schema Write Strategy '" + strategy + "' is not one this check decodes");
                return;
            }
        }
        if (decoded != null) {
            compare("", tree, decoded, schema, diffs);
        }
        // what nifi/conf/<variant>/*.conf tells the services to read this topic as
        final Set<String> conf = confFramings.getOrDefault(logical, Set.of());
        final Set<String> readable = switch (framing) {
            case "container" -> Set.of("container", "block");
            default -> Set.of(framing);
        };
        if (conf.isEmpty() || !readable.containsAll(conf)) {
            diffs.add("nifi/conf/" + variant + " has topic." + logical + ".framing " + conf + ", a " + framing + " message needs "
                    + readable);
        }
        final String file = dump(logical, framing, value, json, label, topic, schemaName, schemaId, key);
        report.check(diffs.isEmpty(), label + ": topic " + topic + ", schema " + schemaName + ", " + framing
                + (schemaId != null ? " id " + schemaId : "") + ", " + value.length + " bytes, key from " + message.keyFrom()
                + (file == null ? "" : ", " + file), String.join("; ", diffs) + "; JSON " + json);
        if ("manifests".equals(logical)) {
            partitions(label, publish, message.contentAfter(), message.attrsAfter(), tree);
        }
    }

    static boolean isContainer(final byte[] value) {
        return value.length >= 4 && value[0] == 'O' && value[1] == 'b' && value[2] == 'j' && value[3] == 1;
    }

    /**
     * PublishKafka's record path (RecordStreamKafkaRecordConverter, RecordValueFactory at
     * rel/nifi-2.6.0): the Record Reader over the FlowFile, one writer per FlowFile, and for each
     * record: reset the buffer, write, flush, the buffer is the message; the key from "Message Key
     * Field". The FlowFile leaves PublishKafka as it came.
     */
    private Message viaRecordWriter(final String label, final VersionedProcessor publish, final String writerId, final String json,
                                    final Map<String, String> attrs) throws Exception {
        final TestRunner r = TestRunners.newTestRunner(NoOpProcessor.class);
        final Services svc = new Services(flow, r, schemas);
        final List<String> problems = new ArrayList<>();
        final ControllerService readerService = svc.add(flow.resolve(publish.getProperties().get("Record Reader")), problems);
        final ControllerService writerService = svc.add(writerId, problems);
        if (!problems.isEmpty() || !(readerService instanceof RecordReaderFactory reader)
                || !(writerService instanceof RecordSetWriterFactory writer)) {
            report.fail(label + ": the publisher's reader/writer: " + String.join("; ", problems));
            return null;
        }
        final String keyField = flow.resolve(publish.getProperties().get("Message Key Field"));
        final List<byte[]> messages = new ArrayList<>();
        final List<Object> keys = new ArrayList<>();
        final byte[] jsonBytes = json.getBytes(StandardCharsets.UTF_8);
        try (RecordReader rr = reader.createRecordReader(attrs, new ByteArrayInputStream(jsonBytes),
                jsonBytes.length, r.getLogger())) {
            final RecordSet rs = rr.createRecordSet();
            final RecordSchema ws = writer.getSchema(attrs, rs.getSchema());
            final ByteArrayOutputStream os = new ByteArrayOutputStream();
            try (RecordSetWriter w = writer.createWriter(r.getLogger(), ws, os, attrs)) {
                Record rec;
                while ((rec = rs.next()) != null) {
                    keys.add(keyField == null ? null : rec.getValue(keyField));
                    os.reset();
                    w.write(rec);
                    w.flush();
                    messages.add(os.toByteArray());
                }
            }
        }
        if (messages.size() != 1) {
            report.fail(label + ": " + messages.size() + " records from one FlowFile, expected 1");
            return null;
        }
        return new Message(messages.get(0), keys.get(0), "Message Key Field '" + keyField + "'", jsonBytes, attrs);
    }

    /**
     * The ConvertRecord before the PublishKafka, run in a TestRunner with the flow's reader and
     * writer; then PublishKafka without a Record Reader and without a Message Demarcator
     * (FlowFileStreamKafkaRecordConverter at rel/nifi-2.6.0): the FlowFile's content whole is the
     * message, the key is "Kafka Key" evaluated against the FlowFile (AttributeKeyFactory; the
     * attribute kafka.key when the property is not set).
     */
    private Message viaContent(final String label, final Hop hop, final String json, final Map<String, String> attrs)
            throws Exception {
        final VersionedProcessor publish = hop.publish();
        if (publish.getProperties().get("Message Demarcator") != null) {
            report.fail(label + ": '" + publish.getName() + "' has a Message Demarcator: the content would be split at it,"
                    + " not a path this check follows");
            return null;
        }
        final MockFlowFile converted = runProcessor(hop.convert(), json.getBytes(StandardCharsets.UTF_8), attrs);
        final byte[] value = converted.toByteArray();
        final String rawKey = publish.getProperties().get("Kafka Key");
        final String key;
        final String keyFrom;
        if (rawKey == null) {
            key = converted.getAttribute("kafka.key");
            keyFrom = "attribute kafka.key";
        } else {
            key = new MockPropertyValue(flow.resolve(rawKey)).evaluateAttributeExpressions(converted).getValue();
            keyFrom = "Kafka Key '" + rawKey + "'";
        }
        return new Message(value, key, keyFrom, value, converted.getAttributes());
    }

    /**
     * The Manifest's FlowFile after PublishKafka: through the processors that leave the content
     * alone (Wait, RouteOnAttribute, ...) to the first that reads it; a ConvertRecord there (the
     * embedded flow: the content is Avro) is run, then the SplitJson, both in TestRunners as the
     * flow configures them. Its splits must be the manifest's partitions, one each, in order: what
     * PG-20 is handed.
     */
    private void partitions(final String label, final VersionedProcessor publish, final byte[] content,
                            final Map<String, String> attrs, final JsonNode manifest) {
        final String what = label + ": the partitions after '" + publish.getName() + "'";
        try {
            final List<VersionedProcessor> readers = contentReadersAfter(publish);
            if (readers.size() != 1) {
                report.fail(what + ": needs exactly one processor reading the content after it, the flow has "
                        + readers.stream().map(VersionedProcessor::getName).toList());
                return;
            }
            final List<String> chain = new ArrayList<>();
            VersionedProcessor next = readers.get(0);
            byte[] in = content;
            Map<String, String> at = attrs;
            if (CONVERT_RECORD.equals(next.getType())) {
                final MockFlowFile json = runProcessor(next, in, at);
                chain.add("'" + next.getName() + "' (ConvertRecord) " + json.getContent().length() + " chars of JSON");
                in = json.toByteArray();
                at = json.getAttributes();
                final VersionedProcessor convert = next;
                next = single(flow.downstream(next.getIdentifier(), "success"), SPLIT_JSON, what,
                        "a SplitJson on the success of '" + convert.getName() + "'");
                if (next == null) {
                    return;
                }
            }
            if (!SPLIT_JSON.equals(next.getType())) {
                report.fail(what + ": '" + next.getName() + "' (" + Flow.simple(next.getType()) + ") reads the content,"
                        + " expected a SplitJson (or a ConvertRecord, then one)");
                return;
            }
            final String jsonPath = flow.resolve(next.getProperties().get("JsonPath Expression"));
            final TestRunner r = runFlowProcessor(next, in, at);
            final List<MockFlowFile> splits = r.getFlowFilesForRelationship("split");
            chain.add("'" + next.getName() + "' (SplitJson " + jsonPath + ") " + splits.size() + " split(s)");
            final JsonNode want = manifest.path("partitions");
            final List<String> diffs = new ArrayList<>();
            if (!r.getFlowFilesForRelationship("failure").isEmpty()) {
                diffs.add("SplitJson sent the FlowFile to failure (" + r.getLogger().getErrorMessages()
                        + r.getLogger().getWarnMessages() + ")");
            }
            if (splits.size() != want.size()) {
                diffs.add(splits.size() + " split(s), the manifest has " + want.size() + " partitions");
            }
            for (int i = 0; i < Math.min(splits.size(), want.size()); i++) {
                final JsonNode got = JSON.readTree(splits.get(i).getContent());
                for (final Map.Entry<String, JsonNode> f : want.get(i).properties()) {
                    if (!sameValue(f.getValue(), got.get(f.getKey()))) {
                        diffs.add("split " + i + " ." + f.getKey() + ": " + got.get(f.getKey()) + ", the manifest's " + f.getValue());
                    }
                }
            }
            report.check(diffs.isEmpty(), what + ": " + String.join(" -> ", chain) + ", each the manifest's partition",
                    String.join("; ", diffs));
        } catch (final Throwable t) {
            report.fail(what + ": " + describe(t));
        }
    }

    /** JSON values equal, numbers by value (an int and a long of the same value are one). */
    private static boolean sameValue(final JsonNode a, final JsonNode b) {
        if (a == null || b == null) {
            return a == b;
        }
        if (a.isNumber() && b.isNumber()) {
            return a.decimalValue().compareTo(b.decimalValue()) == 0;
        }
        return a.equals(b);
    }

    /**
     * The processors that first read the content of what p sends to success, past the ones that
     * leave it alone (CONTENT_UNTOUCHED), following every relationship but failure and expired.
     */
    private List<VersionedProcessor> contentReadersAfter(final VersionedProcessor p) {
        final List<VersionedProcessor> out = new ArrayList<>();
        final Set<String> seen = new TreeSet<>();
        final List<VersionedProcessor> todo = new ArrayList<>(flow.downstream(p.getIdentifier(), "success"));
        while (!todo.isEmpty()) {
            final VersionedProcessor n = todo.remove(0);
            if (!seen.add(n.getIdentifier())) {
                continue;
            }
            if (!CONTENT_UNTOUCHED.contains(n.getType())) {
                out.add(n);
                continue;
            }
            for (final VersionedConnection c : flow.outOf(n.getIdentifier())) {
                final Set<String> rels = new TreeSet<>(c.getSelectedRelationships());
                rels.removeAll(Set.of("failure", "expired"));
                if (!rels.isEmpty() && flow.processors.containsKey(c.getDestination().getId())) {
                    todo.add(flow.processors.get(c.getDestination().getId()));
                }
            }
        }
        return out;
    }

    private static GenericRecord bare(final byte[] value, final int offset, final Schema schema, final List<String> diffs) {
        try {
            final BinaryDecoder d = DecoderFactory.get().binaryDecoder(value, offset, value.length - offset, null);
            final GenericRecord rec = new GenericDatumReader<GenericRecord>(schema).read(null, d);
            if (!d.isEnd()) {
                diffs.add("bytes left after the datum");
            }
            return rec;
        } catch (final IOException | RuntimeException e) {
            diffs.add("Avro Java cannot decode it with " + schema.getName() + ".avsc: " + e);
            return null;
        }
    }

    /**
     * A container block without the file header: record count (1), byte size, the datum, the
     * 16-byte sync marker (which cannot be checked against a header it does not have).
     */
    private static GenericRecord block(final byte[] value, final Schema schema, final List<String> diffs) {
        final int[] pos = {0};
        final long count = varLong(value, pos);
        final long size = varLong(value, pos);
        if (count != 1) {
            diffs.add("a block of " + count + " records, expected 1");
            return null;
        }
        if (size < 0 || pos[0] + size + 16 != value.length) {
            diffs.add("block of " + size + " bytes + 16-byte sync does not fill the " + value.length + "-byte message");
            return null;
        }
        return bare(Arrays.copyOfRange(value, 0, pos[0] + (int) size), pos[0], schema, diffs);
    }

    /** Avro's zig-zag varint at pos[0] (advanced past it), or -1 when it is cut short. */
    private static long varLong(final byte[] b, final int[] pos) {
        long raw = 0;
        for (int shift = 0; pos[0] < b.length && shift < 64; shift += 7) {
            final int x = b[pos[0]++] & 0xff;
            raw |= (long) (x & 0x7f) << shift;
            if ((x & 0x80) == 0) {
                return (raw >>> 1) ^ -(raw & 1);
            }
        }
        return -1;
    }

    private static GenericRecord container(final byte[] value, final Schema schema, final List<String> diffs) {
        try (DataFileStream<GenericRecord> in = new DataFileStream<>(new ByteArrayInputStream(value),
                new GenericDatumReader<GenericRecord>(null, schema))) {
            if (!schema.equals(in.getSchema())) {
                diffs.add("the container's schema is not " + schema.getName() + ".avsc: " + in.getSchema());
            }
            final String codec = in.getMetaString("avro.codec");
            if (codec != null && !"null".equals(codec)) {
                diffs.add("container codec " + codec + " (the services read uncompressed Avro only)");
            }
            final List<GenericRecord> recs = new ArrayList<>();
            in.forEach(recs::add);
            if (recs.size() != 1) {
                diffs.add(recs.size() + " records in the container, expected 1");
            }
            return recs.isEmpty() ? null : recs.get(0);
        } catch (final IOException | RuntimeException e) {
            diffs.add("Avro Java cannot read it as a container: " + e);
            return null;
        }
    }

    /** The JSON's value j against the decoded value v of schema s, differences to diffs with their path. */
    static void compare(final String path, final JsonNode j, final Object v, final Schema s, final List<String> diffs) {
        final String at = path.isEmpty() ? "(record)" : path;
        Schema t = s;
        if (s.getType() == Schema.Type.UNION) {
            if (v == null) {
                if (!j.isNull()) {
                    diffs.add(at + ": JSON " + j + ", decoded null");
                }
                return;
            }
            t = s.getTypes().get(GenericData.get().resolveUnion(s, v));
        }
        switch (t.getType()) {
            case NULL -> {
                if (!j.isNull() || v != null) {
                    diffs.add(at + ": JSON " + j + ", decoded " + v);
                }
            }
            case STRING, ENUM -> {
                if (!j.isTextual() || !j.asText().equals(String.valueOf(v))) {
                    diffs.add(at + ": JSON " + j + ", decoded \"" + v + "\"");
                }
            }
            case INT, LONG -> {
                if (!j.isIntegralNumber() || j.asLong() != ((Number) v).longValue()) {
                    diffs.add(at + ": JSON " + j + ", decoded " + v);
                }
            }
            case FLOAT, DOUBLE -> {
                if (!j.isNumber() || j.asDouble() != ((Number) v).doubleValue()) {
                    diffs.add(at + ": JSON " + j + ", decoded " + v);
                }
            }
            case BOOLEAN -> {
                if (!j.isBoolean() || j.asBoolean() != (Boolean) v) {
                    diffs.add(at + ": JSON " + j + ", decoded " + v);
                }
            }
            case RECORD -> {
                if (!j.isObject()) {
                    diffs.add(at + ": JSON " + j + ", decoded a " + t.getName() + " record");
                    return;
                }
                final GenericRecord rec = (GenericRecord) v;
                for (final Map.Entry<String, JsonNode> f : j.properties()) {
                    final Schema.Field sf = t.getField(f.getKey());
                    if (sf == null) {
                        diffs.add(path + "." + f.getKey() + ": in the JSON, not a field of " + t.getName() + " (dropped)");
                        continue;
                    }
                    compare(path + "." + f.getKey(), f.getValue(), rec.get(sf.pos()), sf.schema(), diffs);
                }
                for (final Schema.Field sf : t.getFields()) {
                    if (j.has(sf.name())) {
                        continue;
                    }
                    if (!sf.hasDefaultValue()) {
                        diffs.add(path + "." + sf.name() + ": lacking in the JSON and has no default");
                        continue;
                    }
                    final Object dflt = GenericData.get().getDefaultValue(sf);
                    if (!GenericData.get().toString(dflt).equals(GenericData.get().toString(rec.get(sf.pos())))) {
                        diffs.add(path + "." + sf.name() + ": lacking in the JSON, decoded " + rec.get(sf.pos()) + ", not its default " + dflt);
                    }
                }
            }
            case MAP -> {
                final Map<?, ?> m = (Map<?, ?>) v;
                if (!j.isObject() || j.size() != m.size()) {
                    diffs.add(at + ": JSON " + j + ", decoded " + m);
                    return;
                }
                for (final Map.Entry<?, ?> e : m.entrySet()) {
                    final JsonNode jv = j.get(e.getKey().toString());
                    if (jv == null) {
                        diffs.add(at + ": decoded key " + e.getKey() + " not in the JSON");
                    } else {
                        compare(path + "{" + e.getKey() + "}", jv, e.getValue(), t.getValueType(), diffs);
                    }
                }
            }
            case ARRAY -> {
                final List<?> l = (List<?>) v;
                if (!j.isArray() || j.size() != l.size()) {
                    diffs.add(at + ": JSON " + j + ", decoded " + l);
                    return;
                }
                for (int i = 0; i < l.size(); i++) {
                    compare(path + "[" + i + "]", j.get(i), l.get(i), t.getElementType(), diffs);
                }
            }
            default -> diffs.add(at + ": type " + t.getType() + " is not one this check compares");
        }
    }

    /** --dump: DIR/&lt;topic&gt;.&lt;n&gt;.&lt;framing&gt; (the message value) and .json (the JSON it came from), listed in index.json. */
    private String dump(final String logical, final String framing, final byte[] value, final String json, final String label,
                        final String topic, final String schemaName, final Integer schemaId, final Object key) throws IOException {
        if (dump == null) {
            return null;
        }
        final String base = logical + "." + dumpCount.merge(logical + "." + framing, 1, Integer::sum) + "." + framing;
        Files.write(new File(dump, base).toPath(), value);
        Files.writeString(new File(dump, base + ".json").toPath(), json);
        final ObjectNode e = index.addObject();
        e.put("file", base);
        e.put("flow", flow.file);
        e.put("path", label);
        e.put("topic", topic);
        e.put("logicalTopic", logical);
        e.put("schema", schemaName);
        e.put("framing", framing);
        if (schemaId != null) {
            e.put("schemaId", schemaId);
        }
        e.put("key", key == null ? null : key.toString());
        e.put("json", json);
        return base;
    }
}
