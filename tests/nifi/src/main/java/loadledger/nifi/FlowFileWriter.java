package loadledger.nifi;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.Proxy;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;

import org.apache.avro.Schema;
import org.apache.avro.file.CodecFactory;
import org.apache.avro.io.BinaryEncoder;
import org.apache.nifi.avro.AvroTypeUtil;
import org.apache.nifi.avro.WriteAvroResultWithExternalSchema;
import org.apache.nifi.avro.WriteAvroResultWithSchema;
import org.apache.nifi.logging.ComponentLog;
import org.apache.nifi.schema.access.NopSchemaAccessWriter;
import org.apache.nifi.schema.access.SchemaAccessWriter;
import org.apache.nifi.schema.access.SchemaField;
import org.apache.nifi.schema.access.SchemaReferenceWriterSchemaAccessWriter;
import org.apache.nifi.schemaregistry.services.SchemaReferenceWriter;
import org.apache.nifi.serialization.RecordSetWriter;
import org.apache.nifi.serialization.record.RecordSchema;

/**
 * The Kafka message values of one FlowFile's records, as NiFi 2.6.0 makes them with its
 * AvroRecordSetWriter writers.
 *
 * <p>EMBEDDED, NONE and REFERENCE are PublishKafka's record path ("Use Content as Record Value"
 * with a Record Reader and this Record Writer): RecordStreamKafkaRecordConverter creates one writer
 * per FlowFile over one buffer, and for each record RecordValueFactory.getValue (nifi-kafka-processors,
 * org.apache.nifi.kafka.processors.producer.value, tag rel/nifi-2.6.0) does {@code os.reset();
 * writer.write(record); writer.flush(); return os.toByteArray();}: the buffer is cleared BEFORE each
 * record, so whatever the writer wrote when it was created is never sent.
 *
 * <ul>
 *   <li>EMBEDDED ("Embed Avro Schema", WriteAvroResultWithSchema, null codec): the writer writes the
 *       container header into the buffer when created, and the reset before the first record
 *       discards it: every message, the first one too, is a container block without the header
 *       (count 1, size, datum, 16-byte sync marker) and carries no schema (framing block).
 *   <li>NONE ("Do Not Write Schema", WriteAvroResultWithExternalSchema with NiFi's
 *       NopSchemaAccessWriter): the bare binary datum.
 *   <li>REFERENCE ("Schema Reference Writer", NiFi's SchemaReferenceWriterSchemaAccessWriter over
 *       a Confluent-encoded reference writer): 0x00, the 4-byte big-endian schema id, the datum
 *       (WriteAvroResultWithExternalSchema.writeRecord writes the header with every record outside
 *       a record set).
 * </ul>
 *
 * <p>EMBEDDED_FILE is what nifi/loadledger-flow-embedded.json does instead: a ConvertRecord with the
 * "Embed Avro Schema" writer makes the FlowFile one Avro container file (AbstractRecordProcessor:
 * createWriter, beginRecordSet, write each record, finishRecordSet, close), and PublishKafka without
 * a Record Reader sends the content whole as one message (FlowFileStreamKafkaRecordConverter). The
 * shipped flow makes one FlowFile per event, so each record is its own FlowFile here: one container
 * file (header with the schema, one block of one record) per message (framing container).
 */
final class FlowFileWriter {
    /** AvroRecordSetWriter's schema write strategies through PublishKafka's record path, and EMBEDDED_FILE. */
    enum Strategy { EMBEDDED, NONE, REFERENCE, EMBEDDED_FILE }

    /** A NiFi ComponentLog that drops everything (the writers log at debug level only). */
    private static final ComponentLog QUIET = (ComponentLog) Proxy.newProxyInstance(
        FlowFileWriter.class.getClassLoader(), new Class<?>[] {ComponentLog.class},
        (p, m, a) -> m.getReturnType() == boolean.class ? Boolean.FALSE
                     : m.getName().equals("getName") ? "loadledger-nifi-harness" : null);

    private FlowFileWriter() {}

    /** One message value per record, in order. schemaId is used by REFERENCE only. */
    static List<byte[]> write(Strategy strategy, Schema avro, int schemaId, List<Map<String, Object>> records)
            throws IOException {
        RecordSchema nifi = AvroTypeUtil.createSchema(avro);
        List<byte[]> out = new ArrayList<>();
        if (strategy == Strategy.EMBEDDED_FILE) {
            for (Map<String, Object> r : records) {
                out.add(containerFile(avro, nifi, r));
            }
            return out;
        }
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        try (RecordSetWriter w = writer(strategy, avro, nifi, schemaId, buf)) {
            for (Map<String, Object> r : records) {
                // RecordValueFactory.getValue: reset, write, flush, take the buffer
                buf.reset();
                w.write(Records.of(nifi, r));
                w.flush();
                out.add(buf.toByteArray());
            }
        }
        return out;
    }

    /**
     * A FlowFile of one record through ConvertRecord with the "Embed Avro Schema" writer
     * (AbstractRecordProcessor.onTrigger at rel/nifi-2.6.0): its whole content, one container file.
     */
    private static byte[] containerFile(Schema avro, RecordSchema nifi, Map<String, Object> record) throws IOException {
        ByteArrayOutputStream content = new ByteArrayOutputStream();
        try (RecordSetWriter w = new WriteAvroResultWithSchema(avro, content, CodecFactory.nullCodec())) {
            w.beginRecordSet();
            w.write(Records.of(nifi, record));
            w.finishRecordSet();
        }
        return content.toByteArray();
    }

    private static RecordSetWriter writer(Strategy s, Schema avro, RecordSchema nifi, int schemaId, OutputStream buf)
            throws IOException {
        switch (s) {
        case EMBEDDED:
            return new WriteAvroResultWithSchema(avro, buf, CodecFactory.nullCodec());
        case NONE:
            return new WriteAvroResultWithExternalSchema(avro, nifi, new NopSchemaAccessWriter(), buf,
                                                         new LinkedBlockingQueue<BinaryEncoder>(1), QUIET);
        case REFERENCE:
            SchemaAccessWriter ref = new SchemaReferenceWriterSchemaAccessWriter(confluentReference(schemaId));
            return new WriteAvroResultWithExternalSchema(avro, nifi, ref, buf,
                                                         new LinkedBlockingQueue<BinaryEncoder>(1), QUIET);
        default:
            throw new IllegalArgumentException(s.toString());
        }
    }

    /**
     * A SchemaReferenceWriter (a NiFi controller service interface) writing the Confluent wire
     * header as NiFi's ConfluentEncodedSchemaReferenceWriter does: magic byte 0, then the schema
     * id as a 4-byte big-endian int. The id comes from the topic's entry of the schema id table.
     */
    private static SchemaReferenceWriter confluentReference(int schemaId) {
        return (SchemaReferenceWriter) Proxy.newProxyInstance(
            FlowFileWriter.class.getClassLoader(), new Class<?>[] {SchemaReferenceWriter.class}, (p, m, a) -> {
                switch (m.getName()) {
                case "writeHeader":
                    ((OutputStream) a[1]).write(ByteBuffer.allocate(5).put((byte) 0).putInt(schemaId).array());
                    return null;
                case "getAttributes":
                    return Collections.emptyMap();
                case "validateSchema":
                    return null;
                case "getRequiredSchemaFields":
                    return EnumSet.noneOf(SchemaField.class);
                case "getIdentifier":
                    return "confluent-reference";
                case "toString":
                    return "ConfluentReference(" + schemaId + ")";
                case "hashCode":
                    return System.identityHashCode(p);
                case "equals":
                    return p == a[0];
                default:
                    throw new UnsupportedOperationException(m.getName());
                }
            });
    }
}
