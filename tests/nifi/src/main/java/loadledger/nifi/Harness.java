package loadledger.nifi;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.Future;
import java.util.function.Predicate;

import org.apache.avro.Schema;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * NiFi's side of the reference scenario written with NiFi's own record code: every event goes
 * through NiFi 2.6.0's AvroRecordSetWriter writers (FlowFileWriter) in the schema write strategy
 * configured for its topic (embedded, none, reference: PublishKafka's record path, one message per
 * record; embedded-file: ConvertRecord then PublishKafka sending the content, one FlowFile and one
 * container file per record, as the shipped embedded flow), is published in a Kafka transaction
 * per FlowFile with the run id as key, and every reply and command is read read_committed and
 * decoded with Avro Java (Replies).
 * Each reply is matched to its request by sourceTopic/sourcePartition/sourceOffset and checked.
 *
 * <p>Usage: Harness --bootstrap HOST:PORT --prefix PREFIX --schemas DIR --business-key KEY
 * [--strategy LOGICAL=embedded|embedded-file|none|reference:ID]... [--reply LOGICAL=bare|container|confluent:ID]...
 * [--timeout-ms N] [--dump DIR]. Prints one line per step and "RESULT nifi-java reference: OK
 * run=RUN_ID"; exits 1 with the reason on the first unexpected reply, 2 on bad arguments. --dump
 * writes every produced value to DIR/NN-LOGICAL.bin (the bytes a test keeps as a fixture).
 */
public final class Harness {
    private static final String[][] TOPICS = {
        {"run-requests", "RunRequest", "run-decisions", "RunDecision"},
        {"manifests", "Manifest", "manifest-decisions", "ManifestDecision"},
        {"partition-claims", "PartitionClaim", "claim-decisions", "ClaimDecision"},
        {"chunks", "ChunkWritten", "chunk-outcomes", "ChunkOutcome"},
        {"validation-starts", "ValidationStart", "validation-start-decisions", "ValidationStartDecision"},
        {"validation-metrics", "ValidationMetrics", "validation-metrics-outcomes", "ValidationMetricsOutcome"},
        {"stage-validations", "StageValidated", "stage-validation-outcomes", "StageValidatedOutcome"},
        {"publish-claims", "PublishClaim", "publish-claim-decisions", "PublishClaimDecision"},
        {"publish-results", "PublishResult", "publish-result-outcomes", "PublishResultOutcome"},
        {"run-successes", "RunSuccess", "run-success-outcomes", "RunSuccessOutcome"},
    };

    /** One produced message and where the broker put it. */
    record Sent(String logical, String topic, int partition, long offset) {}

    private final Map<String, String> opt = new HashMap<>();
    private final Map<String, String> strategy = new HashMap<>();
    private final Map<String, String> replyFraming = new HashMap<>();
    private final Map<String, Integer> replyIds = new HashMap<>();
    private final Map<String, Schema> schemas = new HashMap<>();
    private final Map<String, String> replyOf = new HashMap<>();
    private final List<Sent> sent = new ArrayList<>();
    private final List<String> journey = new ArrayList<>();
    private KafkaProducer<byte[], byte[]> producer;
    private Replies replies;
    private long timeoutMs;
    private int dumped;

    private Harness() {}

    public static void main(String[] args) {
        Harness h = new Harness();
        try {
            h.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("nifi harness: " + e.getMessage());
            System.exit(2);
        }
        try {
            h.run();
        } catch (Exception | AssertionError e) {
            System.out.println("RESULT nifi-java reference: FAILED " + e);
            e.printStackTrace(System.err);
            System.exit(1);
        }
        System.exit(0);
    }

    private void parse(String[] args) {
        for (int i = 0; i + 1 < args.length; i += 2) {
            String k = args[i];
            String v = args[i + 1];
            if (k.equals("--strategy") || k.equals("--reply")) {
                String[] kv = v.split("=", 2);
                if (kv.length != 2) {
                    throw new IllegalArgumentException(k + " wants LOGICAL=VALUE, got " + v);
                }
                (k.equals("--strategy") ? strategy : replyFraming).put(kv[0], kv[1]);
            } else if (k.startsWith("--")) {
                opt.put(k.substring(2), v);
            } else {
                throw new IllegalArgumentException("unexpected argument " + k);
            }
        }
        if (args.length % 2 != 0) {
            throw new IllegalArgumentException("option without value: " + args[args.length - 1]);
        }
        for (String need : new String[] {"bootstrap", "prefix", "schemas", "business-key"}) {
            if (!opt.containsKey(need)) {
                throw new IllegalArgumentException("missing --" + need);
            }
        }
        for (Map.Entry<String, String> e : new HashMap<>(replyFraming).entrySet()) {
            if (e.getValue().startsWith("confluent:")) {
                replyIds.put(e.getKey(), Integer.parseInt(e.getValue().substring("confluent:".length())));
                replyFraming.put(e.getKey(), "confluent");
            }
        }
        timeoutMs = Long.parseLong(opt.getOrDefault("timeout-ms", "60000"));
    }

    private Schema schema(String name) throws IOException {
        return new Schema.Parser().parse(new File(opt.get("schemas"), name + ".avsc"));
    }

    private String topic(String logical) {
        return opt.get("prefix") + logical;
    }

    private void run() throws Exception {
        Map<String, String> replyTopics = new LinkedHashMap<>();
        for (String[] t : TOPICS) {
            schemas.put(t[0], schema(t[1]));
            schemas.put(t[2], schema(t[3]));
            replyOf.put(t[0], t[2]);
            replyTopics.put(t[2], topic(t[2]));
        }
        schemas.put("validate-run-commands", schema("ValidateRunCommand"));
        replyTopics.put("validate-run-commands", topic("validate-run-commands"));
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, opt.get("bootstrap"));
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "loadledger.nifi-harness." + UUID.randomUUID());
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (Replies r = new Replies(opt.get("bootstrap"), replyTopics, schemas, replyFraming, replyIds);
             KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p)) {
            replies = r;
            producer = prod;
            producer.initTransactions();
            scenario(new Scenario(opt.get("business-key")));
        }
    }

    /**
     * Publishes one FlowFile's records in one transaction; returns where each landed. With
     * embedded-file each record is a FlowFile of its own (the shipped embedded flow makes one per
     * event), published in a transaction of its own.
     */
    private List<Sent> publish(String logical, String runId, List<Map<String, Object>> records) throws Exception {
        String[] s = strategy.getOrDefault(logical, "none").split(":", 2);
        FlowFileWriter.Strategy st = switch (s[0]) {
        case "embedded" -> FlowFileWriter.Strategy.EMBEDDED;
        case "embedded-file" -> FlowFileWriter.Strategy.EMBEDDED_FILE;
        case "none" -> FlowFileWriter.Strategy.NONE;
        case "reference" -> FlowFileWriter.Strategy.REFERENCE;
        default -> throw new IllegalArgumentException("strategy " + s[0]);
        };
        if (st == FlowFileWriter.Strategy.EMBEDDED_FILE && records.size() > 1) {
            List<Sent> out = new ArrayList<>();
            for (Map<String, Object> r : records) {
                out.addAll(publish(logical, runId, List.of(r)));
            }
            return out;
        }
        int id = s.length > 1 ? Integer.parseInt(s[1]) : 0;
        List<byte[]> values = FlowFileWriter.write(st, schemas.get(logical), id, records);
        producer.beginTransaction();
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (byte[] v : values) {
            futures.add(producer.send(new ProducerRecord<>(topic(logical), runId.getBytes(StandardCharsets.UTF_8), v)));
            dump(logical, v);
        }
        producer.commitTransaction();
        List<Sent> out = new ArrayList<>();
        for (Future<RecordMetadata> f : futures) {
            RecordMetadata md = f.get();
            out.add(new Sent(logical, md.topic(), md.partition(), md.offset()));
        }
        sent.addAll(out);
        return out;
    }

    private void dump(String logical, byte[] v) throws IOException {
        if (opt.containsKey("dump")) {
            Path dir = Path.of(opt.get("dump"));
            Files.createDirectories(dir);
            Files.write(dir.resolve(String.format("%02d-%s.bin", dumped++, logical)), v);
        }
    }

    /** The reply to exactly this message. */
    private Replies.Reply answer(Sent s) throws IOException {
        return replies.await(replyOf.get(s.logical()), r -> s.topic().equals(r.s("sourceTopic")) &&
                                 Objects.equals(r.value().get("sourcePartition"), s.partition()) &&
                                 Objects.equals(r.value().get("sourceOffset"), s.offset()), timeoutMs);
    }

    /** Publishes a FlowFile, waits for the reply of each record, checks each against want. */
    private List<Replies.Reply> step(String logical, String runId, List<Map<String, Object>> records,
                                     Predicate<Replies.Reply> want) throws Exception {
        List<Replies.Reply> out = new ArrayList<>();
        for (Sent s : publish(logical, runId, records)) {
            Replies.Reply r = answer(s);
            check(r.s("outcome").equals("ACCEPTED") && runId.equals(r.s("runId")) && runId.equals(r.key()) &&
                      want.test(r), logical, r);
            out.add(r);
        }
        Replies.Reply last = out.get(out.size() - 1);
        journey.add(last.s("runStatus"));
        System.out.printf("STEP %-18s %2d record(s) [%s] -> %s %s%n", logical, out.size(),
                          strategy.getOrDefault(logical, "none"), last.s("outcome"), last.s("runStatus"));
        return out;
    }

    private static void check(boolean ok, String what, Replies.Reply r) {
        if (!ok) {
            throw new AssertionError("unexpected reply to " + what + ": " + r.value());
        }
    }

    private void scenario(Scenario sc) throws Exception {
        String run = sc.runId;
        step("run-requests", run, List.of(sc.runRequest()), r -> r.s("runStatus").equals("CREATED") &&
                 sc.hdfsRunPath.equals(r.s("hdfsRunPath")));
        step("manifests", run, List.of(sc.manifest()), r -> r.s("runStatus").equals("EXTRACTING") &&
                 Objects.equals(r.value().get("emptyPartitionCount"), 1));
        List<Map<String, Object>> claims = new ArrayList<>();
        for (String pid : sc.nonEmpty()) {
            claims.add(sc.claim(pid));
        }
        // one FlowFile: the claims of every partition the coordinator dispatched
        step("partition-claims", run, claims, r -> Boolean.TRUE.equals(r.value().get("claimed")) &&
                 Objects.equals(r.value().get("attempt"), 1) && Scenario.SCN.equals(r.s("snapshotScn")));
        int scheduled = 0;
        for (String pid : sc.nonEmpty()) { // one FlowFile per partition: its three chunk reports
            for (Replies.Reply r : step("chunks", run, sc.chunks(pid), x -> Boolean.TRUE.equals(x.value().get("recorded")))) {
                if (Boolean.TRUE.equals(r.value().get("validationScheduled"))) {
                    check(r.s("runStatus").equals("EXTRACTED_VALIDATED"), "chunks", r);
                    scheduled++;
                }
            }
        }
        if (scheduled != 1) {
            throw new AssertionError("validationScheduled in " + scheduled + " chunk outcomes, expected 1");
        }
        Replies.Reply cmd = replies.await("validate-run-commands", r -> run.equals(r.s("runId")), timeoutMs);
        String dispatchId = cmd.s("dispatchId");
        check(cmd.s("dispatchType").equals("VALIDATE_RUN") && run.equals(cmd.key()) &&
                  run.equals(cmd.headers().get("runId")) && dispatchId.equals(cmd.headers().get("dispatchId")) &&
                  Scenario.JOB.equals(cmd.headers().get("jobKey")), "validate-run-commands", cmd);
        System.out.println("STEP validate-run-command read: dispatchId " + dispatchId);
        step("validation-starts", run, List.of(Scenario.map("runId", run, "dispatchId", dispatchId, "node", "nifi-node-2")),
             r -> Boolean.TRUE.equals(r.value().get("started")) && r.s("runStatus").equals("STAGE_VALIDATING") &&
                 Scenario.SCN.equals(r.s("snapshotScn")) && sc.hdfsRunPath.equals(r.s("hdfsRunPath")));
        step("validation-metrics", run, List.of(sc.metrics("STAGING")), Harness::twoPassed);
        step("stage-validations", run, List.of(Scenario.map("runId", run)),
             r -> Boolean.TRUE.equals(r.value().get("stageValidated")));
        String token = UUID.randomUUID().toString();
        step("publish-claims", run, List.of(Scenario.map("runId", run, "publishToken", token)),
             r -> Boolean.TRUE.equals(r.value().get("claimed")) && token.equals(r.s("publishToken")));
        step("publish-results", run,
             List.of(Scenario.map("runId", run, "publishToken", token, "outcome", "PUBLISHED", "errorCode", null,
                                  "message", "")),
             r -> Boolean.TRUE.equals(r.value().get("changed")));
        step("validation-metrics", run, List.of(sc.metrics("TARGET")), Harness::twoPassed);
        step("run-successes", run, List.of(Scenario.map("runId", run, "targetCount", Scenario.SOURCE_COUNT)),
             r -> Boolean.TRUE.equals(r.value().get("success")) && r.s("runStatus").equals("SUCCESS"));
        // nothing more for this run: exactly one reply per message, one validate-run command
        replies.poll(1500);
        long forRun = replies.all().stream().filter(r -> run.equals(r.s("runId"))).count();
        if (forRun != sent.size() + 1) {
            throw new AssertionError(forRun + " replies and commands for the run, expected " + (sent.size() + 1));
        }
        System.out.println("RESULT nifi-java reference: OK run=" + run + " messages=" + sent.size() + " journey=" +
                           String.join(",", journey));
    }

    private static boolean twoPassed(Replies.Reply r) {
        return Objects.equals(r.value().get("recorded"), 2) && Objects.equals(r.value().get("failCount"), 0);
    }
}
