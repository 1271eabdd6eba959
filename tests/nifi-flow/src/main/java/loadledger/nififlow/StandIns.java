package loadledger.nififlow;

import org.apache.avro.Schema;
import org.apache.nifi.avro.AvroTypeUtil;
import org.apache.nifi.controller.AbstractControllerService;
import org.apache.nifi.controller.ControllerService;
import org.apache.nifi.distributed.cache.client.AtomicCacheEntry;
import org.apache.nifi.distributed.cache.client.AtomicDistributedMapCacheClient;
import org.apache.nifi.distributed.cache.client.Deserializer;
import org.apache.nifi.distributed.cache.client.Serializer;
import org.apache.nifi.schema.access.SchemaField;
import org.apache.nifi.schema.access.SchemaNotFoundException;
import org.apache.nifi.schemaregistry.services.SchemaReferenceReader;
import org.apache.nifi.schemaregistry.services.SchemaReferenceWriter;
import org.apache.nifi.schemaregistry.services.SchemaRegistry;
import org.apache.nifi.serialization.record.RecordSchema;
import org.apache.nifi.serialization.record.SchemaIdentifier;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;

/**
 * Stand-ins for the controller services the flow references whose classes are not on this class
 * path (their bundles are not served by the project's Maven repository): each implements the
 * controller-service API the referencing property asks for, with the behaviour of NiFi 2.6.0's
 * class as read from its source (tag rel/nifi-2.6.0). The real classes are checked only from
 * tools/nififlow/components-2.6.0.json by tests/style/check_nifi_flow.py.
 */
final class StandIns {
    private StandIns() {
    }

    /** The stand-in for a flow service of that type, or null when there is none. */
    static ControllerService forType(final String type, final Schemas schemas, final String topicPrefix) {
        return switch (type) {
            case "org.apache.nifi.confluent.schemaregistry.ConfluentSchemaRegistry" -> new Registry(schemas, topicPrefix);
            case "org.apache.nifi.confluent.schemaregistry.ConfluentEncodedSchemaReferenceWriter" -> new ConfluentReferenceWriter();
            case "org.apache.nifi.confluent.schemaregistry.ConfluentEncodedSchemaReferenceReader" -> new ConfluentReferenceReader();
            case "org.apache.nifi.distributed.cache.client.MapCacheClientService" -> new MapCacheClient();
            default -> null;
        };
    }

    /** The API a stand-in implements, for the output. */
    static String api(final ControllerService s) {
        if (s instanceof Registry) {
            return "SchemaRegistry";
        } else if (s instanceof ConfluentReferenceWriter) {
            return "SchemaReferenceWriter";
        } else if (s instanceof ConfluentReferenceReader) {
            return "SchemaReferenceReader";
        } else if (s instanceof MapCacheClient) {
            return "AtomicDistributedMapCacheClient";
        }
        return s.getClass().getSimpleName();
    }

    /**
     * ConfluentSchemaRegistry's part the readers and writers use: a schema by name (the subject,
     * latest version) or by id, as a RecordSchema built by AvroTypeUtil with the identifier the
     * Confluent client gives it (subject, id, version). Serves schemas/avro: the subject
     * "&lt;topic.prefix&gt;&lt;topic&gt;-value" is the .avsc whose doc names that topic, ids as Schemas gives them,
     * version 1.
     */
    static final class Registry extends AbstractControllerService implements SchemaRegistry {
        // the fields ConfluentSchemaRegistry supplies (its schemaFields)
        private static final Set<SchemaField> SUPPLIED = EnumSet.of(SchemaField.SCHEMA_NAME, SchemaField.SCHEMA_TEXT,
                SchemaField.SCHEMA_TEXT_FORMAT, SchemaField.SCHEMA_IDENTIFIER, SchemaField.SCHEMA_VERSION);
        private final Schemas schemas;
        private final String prefix;

        Registry(final Schemas schemas, final String prefix) {
            this.schemas = schemas;
            this.prefix = prefix;
        }

        String subject(final String schemaName) {
            final String topic = schemas.topicOfSchema.get(schemaName);
            return topic == null ? null : prefix + topic + "-value";
        }

        @Override
        public RecordSchema retrieveSchema(final SchemaIdentifier id) throws IOException, SchemaNotFoundException {
            if (id.getName().isPresent()) {
                final String subject = id.getName().get();
                for (final String name : schemas.byName.keySet()) {
                    if (subject.equals(subject(name))) {
                        if (id.getVersion().isPresent() && id.getVersion().getAsInt() != 1) {
                            throw new SchemaNotFoundException("stand-in registry: subject " + subject + " has version 1 only");
                        }
                        return recordSchema(subject, schemas.idOfName.get(name), 1, name);
                    }
                }
                throw new SchemaNotFoundException("stand-in registry: no subject " + subject);
            }
            final OptionalLong versionId = id.getSchemaVersionId();
            if (versionId.isEmpty()) {
                throw new SchemaNotFoundException("stand-in registry: neither a schema name nor an id");
            }
            final String name = schemas.nameOfId.get((int) versionId.getAsLong());
            if (name == null) {
                throw new SchemaNotFoundException("stand-in registry: no schema with id " + versionId.getAsLong());
            }
            // by id the Confluent client knows neither subject nor version
            return recordSchema(null, (int) versionId.getAsLong(), null, name);
        }

        private RecordSchema recordSchema(final String subject, final int id, final Integer version, final String name) {
            final String text = schemas.textOfName.get(name);
            final Schema avro = new Schema.Parser().parse(text);
            final SchemaIdentifier ident = SchemaIdentifier.builder().name(subject).id((long) id).version(version).build();
            return AvroTypeUtil.createSchema(avro, text, ident);
        }

        @Override
        public Set<SchemaField> getSuppliedSchemaFields() {
            return SUPPLIED;
        }
    }

    /** ConfluentEncodedSchemaReferenceWriter: 0x00 and the schema id as a 4-byte big-endian int. */
    static final class ConfluentReferenceWriter extends AbstractControllerService implements SchemaReferenceWriter {
        @Override
        public void writeHeader(final RecordSchema schema, final OutputStream out) throws IOException {
            final OptionalLong id = schema.getIdentifier().getIdentifier();
            if (id.isEmpty()) {
                throw new IOException("stand-in Confluent reference writer: the schema has no identifier");
            }
            out.write(ByteBuffer.allocate(5).put((byte) 0).putInt(Math.toIntExact(id.getAsLong())).array());
        }

        @Override
        public Map<String, String> getAttributes(final RecordSchema schema) {
            return Collections.emptyMap();
        }

        @Override
        public void validateSchema(final RecordSchema schema) throws SchemaNotFoundException {
            final SchemaIdentifier id = schema.getIdentifier();
            if (id.getIdentifier().isEmpty()) {
                throw new SchemaNotFoundException("stand-in Confluent reference writer: the schema identifier is not known");
            }
            if (id.getVersion().isEmpty()) {
                throw new SchemaNotFoundException("stand-in Confluent reference writer: the schema version is not known");
            }
        }

        @Override
        public Set<SchemaField> getRequiredSchemaFields() {
            return EnumSet.of(SchemaField.SCHEMA_IDENTIFIER, SchemaField.SCHEMA_VERSION);
        }
    }

    /** ConfluentEncodedSchemaReferenceReader: 0x00 and a 4-byte id, given as the schema version id. */
    static final class ConfluentReferenceReader extends AbstractControllerService implements SchemaReferenceReader {
        @Override
        public SchemaIdentifier getSchemaIdentifier(final Map<String, String> variables, final InputStream in)
                throws IOException, SchemaNotFoundException {
            final byte[] header = in.readNBytes(5);
            if (header.length < 5 || header[0] != 0) {
                throw new SchemaNotFoundException("stand-in Confluent reference reader: no 0x00 + 4-byte id header");
            }
            return SchemaIdentifier.builder().schemaVersionId((long) ByteBuffer.wrap(header, 1, 4).getInt()).build();
        }

        @Override
        public Set<SchemaField> getSuppliedSchemaFields() {
            return EnumSet.of(SchemaField.SCHEMA_IDENTIFIER, SchemaField.SCHEMA_VERSION);
        }
    }

    /** MapCacheClientService's API, in memory (Wait and Notify are configured here, not run). */
    static final class MapCacheClient extends AbstractControllerService implements AtomicDistributedMapCacheClient<Long> {
        private final Map<String, byte[]> values = new HashMap<>();
        private final Map<String, Long> revisions = new HashMap<>();

        private static <T> byte[] bytes(final T v, final Serializer<T> s) throws IOException {
            final ByteArrayOutputStream out = new ByteArrayOutputStream();
            s.serialize(v, out);
            return out.toByteArray();
        }

        private static String key(final byte[] b) {
            return HexFormat.of().formatHex(b);
        }

        @Override
        public synchronized <K, V> AtomicCacheEntry<K, V, Long> fetch(final K k, final Serializer<K> ks, final Deserializer<V> vd)
                throws IOException {
            final String key = key(bytes(k, ks));
            final byte[] v = values.get(key);
            return v == null ? null : new AtomicCacheEntry<>(k, vd.deserialize(v), revisions.get(key));
        }

        @Override
        public synchronized <K, V> boolean replace(final AtomicCacheEntry<K, V, Long> e, final Serializer<K> ks, final Serializer<V> vs)
                throws IOException {
            final String key = key(bytes(e.getKey(), ks));
            final Long current = revisions.get(key);
            final Long expected = e.getRevision().orElse(null);
            if (current != null && !current.equals(expected) || current == null && expected != null) {
                return false;
            }
            values.put(key, bytes(e.getValue(), vs));
            revisions.put(key, current == null ? 0L : current + 1);
            return true;
        }

        @Override
        public synchronized <K, V> boolean putIfAbsent(final K k, final V v, final Serializer<K> ks, final Serializer<V> vs) throws IOException {
            final String key = key(bytes(k, ks));
            if (values.containsKey(key)) {
                return false;
            }
            put(k, v, ks, vs);
            return true;
        }

        @Override
        public synchronized <K, V> V getAndPutIfAbsent(final K k, final V v, final Serializer<K> ks, final Serializer<V> vs,
                                                       final Deserializer<V> vd) throws IOException {
            final V old = get(k, ks, vd);
            if (old == null) {
                put(k, v, ks, vs);
            }
            return old;
        }

        @Override
        public synchronized <K> boolean containsKey(final K k, final Serializer<K> ks) throws IOException {
            return values.containsKey(key(bytes(k, ks)));
        }

        @Override
        public synchronized <K, V> void put(final K k, final V v, final Serializer<K> ks, final Serializer<V> vs) throws IOException {
            final String key = key(bytes(k, ks));
            values.put(key, bytes(v, vs));
            revisions.merge(key, 0L, (a, b) -> a + 1);
        }

        @Override
        public synchronized <K, V> V get(final K k, final Serializer<K> ks, final Deserializer<V> vd) throws IOException {
            final byte[] v = values.get(key(bytes(k, ks)));
            return v == null ? null : vd.deserialize(v);
        }

        @Override
        public void close() {
        }

        @Override
        public synchronized <K> boolean remove(final K k, final Serializer<K> ks) throws IOException {
            final String key = key(bytes(k, ks));
            revisions.remove(key);
            return values.remove(key) != null;
        }
    }
}
