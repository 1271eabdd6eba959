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
 * The Kafka message values of one FlowFile's records, as NiFi 2.6.0's AvroRecordSetWriter writes
 * them when PublishKafka sends one message per record: one writer per FlowFile writing into one
 * buffer, the buffer taken and cleared after each record.
 *
 * <ul>
 *   <li>EMBEDDED ("Embed Avro Schema", WriteAvroResultWithSchema, null codec): the first message
 *       is an object container file (header with the schema, one block); every following record
 *       of the FlowFile is a container block without the header (count, size, datum, sync).
 *   <li>NONE ("Do Not Write Schema", WriteAvroResultWithExternalSchema with NiFi's
 *       NopSchemaAccessWriter): the bare binary datum.
 *   <li>REFERENCE ("Schema Reference Writer", NiFi's SchemaReferenceWriterSchemaAccessWriter over
 *       a Confluent-encoded reference writer): 0x00, the 4-byte big-endian schema id, the datum.
 * </ul>
 */
final class FlowFileWriter {
    /** AvroRecordSetWriter's schema write strategies. */
    enum Strategy { EMBEDDED, NONE, REFERENCE }

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
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        List<byte[]> out = new ArrayList<>();
        try (RecordSetWriter w = writer(strategy, avro, nifi, schemaId, buf)) {
            for (Map<String, Object> r : records) {
                w.write(Records.of(nifi, r));
                w.flush();
                out.add(buf.toByteArray());
                buf.reset();
            }
        }
        return out;
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
