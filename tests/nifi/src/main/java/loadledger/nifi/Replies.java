package loadledger.nifi;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.Predicate;

import org.apache.avro.Schema;
import org.apache.avro.file.DataFileStream;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Every reply and command of the scenario, read with isolation.level=read_committed (no group:
 * every partition of each topic assigned, starting at its end when opened) and decoded with Avro
 * Java's GenericDatumReader against the project's schema of the topic, in the topic's framing
 * (bare datum, Confluent with the expected schema id, or an object container with exactly one
 * record). A value that does not decode, or leaves bytes after the datum, fails the harness.
 */
final class Replies implements AutoCloseable {
    /** One decoded reply or command. */
    record Reply(String logical, int partition, long offset, String key, Map<String, String> headers,
                 GenericRecord value) {
        /** A field as a string (null stays null). */
        String s(String field) {
            Object v = value.get(field);
            return v == null ? null : v.toString();
        }
    }

    private final KafkaConsumer<byte[], byte[]> consumer;
    private final Map<String, String> logicalOf = new HashMap<>();
    private final Map<String, Schema> schemas;
    private final Map<String, String> framing;
    private final Map<String, Integer> schemaIds;
    private final List<Reply> seen = new ArrayList<>();

    /**
     * Opens the reader. topics: logical name to full topic name; schemas: logical name to its
     * reader schema; framing: logical name to bare|confluent|container (bare when absent);
     * schemaIds: logical name to the schema id a Confluent-framed reply must carry.
     */
    Replies(String bootstrap, Map<String, String> topics, Map<String, Schema> schemas, Map<String, String> framing,
            Map<String, Integer> schemaIds) {
        this.schemas = schemas;
        this.framing = framing;
        this.schemaIds = schemaIds;
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        consumer = new KafkaConsumer<>(p);
        List<TopicPartition> tps = new ArrayList<>();
        for (Map.Entry<String, String> t : topics.entrySet()) {
            logicalOf.put(t.getValue(), t.getKey());
            List<PartitionInfo> parts = consumer.partitionsFor(t.getValue(), Duration.ofSeconds(30));
            if (parts == null || parts.isEmpty()) {
                throw new IllegalStateException("topic " + t.getValue() + " does not exist");
            }
            for (PartitionInfo pi : parts) {
                tps.add(new TopicPartition(pi.topic(), pi.partition()));
            }
        }
        consumer.assign(tps);
        consumer.seekToEnd(tps);
        for (TopicPartition tp : tps) {
            consumer.position(tp, Duration.ofSeconds(30)); // resolve the end now, before anything is sent
        }
    }

    /** Every reply read so far (in the order read). */
    List<Reply> all() {
        return seen;
    }

    /**
     * Waits up to timeoutMs for the first reply of a topic matching pred (among those already read
     * too); throws AssertionError naming the topic when none comes.
     */
    Reply await(String logical, Predicate<Reply> pred, long timeoutMs) throws IOException {
        long end = System.currentTimeMillis() + timeoutMs;
        while (true) {
            for (Reply r : seen) {
                if (r.logical().equals(logical) && pred.test(r)) {
                    return r;
                }
            }
            long left = end - System.currentTimeMillis();
            if (left <= 0) {
                throw new AssertionError("no matching " + logical + " within " + timeoutMs + " ms");
            }
            poll(Math.min(left, 500));
        }
    }

    /** Reads what has arrived within ms milliseconds. */
    void poll(long ms) throws IOException {
        for (ConsumerRecord<byte[], byte[]> m : consumer.poll(Duration.ofMillis(ms))) {
            String logical = logicalOf.get(m.topic());
            Map<String, String> headers = new HashMap<>();
            for (Header h : m.headers()) {
                headers.put(h.key(), h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8));
            }
            String key = m.key() == null ? null : new String(m.key(), StandardCharsets.UTF_8);
            seen.add(new Reply(logical, m.partition(), m.offset(), key, headers, decode(logical, m.value())));
        }
    }

    /** One value of a topic in its framing, read with Avro Java against the project's schema. */
    GenericRecord decode(String logical, byte[] v) throws IOException {
        Schema schema = schemas.get(logical);
        String f = framing.getOrDefault(logical, "bare");
        if (f.equals("container")) {
            try (DataFileStream<GenericRecord> in =
                     new DataFileStream<>(new ByteArrayInputStream(v), new GenericDatumReader<>(null, schema))) {
                if (!in.hasNext()) {
                    throw new IOException(logical + ": container without a record");
                }
                GenericRecord r = in.next();
                if (in.hasNext()) {
                    throw new IOException(logical + ": container with more than one record");
                }
                return r;
            }
        }
        int off = 0;
        if (f.equals("confluent")) {
            ByteBuffer b = ByteBuffer.wrap(v);
            if (v.length < 5 || b.get() != 0) {
                throw new IOException(logical + ": not Confluent-framed");
            }
            int id = b.getInt();
            Integer want = schemaIds.get(logical);
            if (want != null && id != want) {
                throw new IOException(logical + ": schema id " + id + ", expected " + want);
            }
            off = 5;
        }
        BinaryDecoder d = DecoderFactory.get().binaryDecoder(v, off, v.length - off, null);
        GenericRecord r = new GenericDatumReader<GenericRecord>(schema).read(null, d);
        if (!d.isEnd()) {
            throw new IOException(logical + ": bytes left after the datum");
        }
        return r;
    }

    @Override
    public void close() {
        consumer.close();
    }
}
