package loadledger.nififlow;

import org.apache.avro.file.DataFileStream;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.nifi.avro.AvroRecordSetWriter;
import org.apache.nifi.json.JsonTreeReader;
import org.apache.nifi.serialization.RecordReader;
import org.apache.nifi.serialization.RecordSetWriter;
import org.apache.nifi.serialization.record.Record;
import org.apache.nifi.serialization.record.RecordSchema;
import org.apache.nifi.serialization.record.RecordSet;
import org.apache.nifi.util.NoOpProcessor;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

/**
 * The finding that shaped the embedded flow, kept true: an AvroRecordSetWriter with "Embed Avro
 * Schema" (WriteAvroResultWithSchema) driven the way PublishKafka 2.6.0's record path drives it
 * (RecordStreamKafkaRecordConverter: one writer per FlowFile, created on an empty buffer;
 * RecordValueFactory.getValue: {@code os.reset(); writer.write(record); writer.flush();
 * os.toByteArray()}) gives messages without the container header, the first one too: the header
 * the writer wrote when it was created is cleared before the first record. Checked on a FlowFile of
 * two Manifest records: the bytes written at creation are the header, no message starts with
 * {@code Obj 0x01}, and header + messages read back as one container file of the two records (so
 * the messages are exactly that file's blocks). If NiFi changes this, the check fails and says so.
 */
final class FindingCheck {
    static final String WHERE = "PublishKafka 2.6.0 record path";

    private FindingCheck() {
    }

    static void run(final Schemas schemas, final String manifest, final Report report) {
        report.flow(WHERE);
        final String what = "\"Embed Avro Schema\" through RecordValueFactory (reset, write, flush per record)";
        try {
            final String schemaText = schemas.textOfName.get("Manifest");
            final TestRunner r = TestRunners.newTestRunner(NoOpProcessor.class);
            final JsonTreeReader readerFactory = new JsonTreeReader();
            r.addControllerService("reader", readerFactory);
            r.setProperty(readerFactory, "schema-access-strategy", "schema-text-property");
            r.setProperty(readerFactory, "schema-text", schemaText);
            r.enableControllerService(readerFactory);
            final AvroRecordSetWriter writerFactory = new AvroRecordSetWriter();
            r.addControllerService("writer", writerFactory);
            r.setProperty(writerFactory, "Schema Write Strategy", "avro-embedded");
            r.setProperty(writerFactory, "schema-access-strategy", "schema-text-property");
            r.setProperty(writerFactory, "schema-text", schemaText);
            r.setProperty(writerFactory, "compression-format", "NONE");
            r.enableControllerService(writerFactory);

            // one FlowFile of two records, as RecordStreamKafkaRecordConverter.convert reads it
            final byte[] content = ("[" + manifest + "," + manifest + "]").getBytes(StandardCharsets.UTF_8);
            final Map<String, String> attrs = Map.of();
            final List<byte[]> messages = new ArrayList<>();
            final byte[] atCreation;
            try (RecordReader reader = readerFactory.createRecordReader(attrs, new ByteArrayInputStream(content), content.length,
                    r.getLogger())) {
                final RecordSet recordSet = reader.createRecordSet();
                final RecordSchema schema = writerFactory.getSchema(attrs, recordSet.getSchema());
                final ByteArrayOutputStream os = new ByteArrayOutputStream();
                final RecordSetWriter writer = writerFactory.createWriter(r.getLogger(), schema, os, attrs);
                atCreation = os.toByteArray();
                Record record;
                while ((record = recordSet.next()) != null) {
                    // RecordValueFactory.getValue
                    os.reset();
                    writer.write(record);
                    writer.flush();
                    messages.add(os.toByteArray());
                }
            }
            final List<String> problems = new ArrayList<>();
            if (!TemplateCheck.isContainer(atCreation)) {
                problems.add("the writer wrote no container header when created (" + atCreation.length + " bytes)");
            }
            if (messages.size() != 2) {
                problems.add(messages.size() + " messages from a FlowFile of 2 records");
            }
            for (int i = 0; i < messages.size(); i++) {
                if (TemplateCheck.isContainer(messages.get(i))) {
                    problems.add("message " + (i + 1) + " starts with the container header 'Obj' 0x01: NiFi no longer discards it;"
                            + " the finding (README \"Plugging in a NiFi flow\", nifi/README.md, tests/nifi-flow/README.md,"
                            + " tests/nifi/README.md) and the framings of the Embed Avro Schema topics need revisiting");
                }
            }
            // header + messages = one container file of both records: the messages are its blocks
            final ByteArrayOutputStream whole = new ByteArrayOutputStream();
            whole.write(atCreation);
            for (final byte[] m : messages) {
                whole.write(m);
            }
            int read = 0;
            try (DataFileStream<GenericRecord> in = new DataFileStream<>(new ByteArrayInputStream(whole.toByteArray()),
                    new GenericDatumReader<>())) {
                for (final GenericRecord rec : in) {
                    read++;
                    if (!String.valueOf(rec.get("partitions")).contains("partitionId")) {
                        problems.add("record " + read + " read back without its partitions: " + rec);
                    }
                }
            } catch (final Exception e) {
                problems.add("the header written at creation + the messages are not one container file: " + e);
            }
            if (read != messages.size()) {
                problems.add("header + messages read back as " + read + " records, expected " + messages.size());
            }
            final String first = messages.isEmpty() ? "none" : HexFormat.of().formatHex(messages.get(0), 0,
                    Math.min(4, messages.get(0).length));
            report.check(problems.isEmpty(), what + ": the " + atCreation.length + "-byte container header is written at"
                    + " creation and cleared before the first record; every message is a headerless block (first message"
                    + " starts " + first + ", sizes " + messages.stream().map(m -> String.valueOf(m.length)).toList()
                    + "); header + messages read back as one container file of " + read + " records", String.join("; ", problems));
        } catch (final Throwable t) {
            report.fail(what + ": " + TemplateCheck.describe(t));
        }
    }
}
