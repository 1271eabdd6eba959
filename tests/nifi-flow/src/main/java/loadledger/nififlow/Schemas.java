package loadledger.nififlow;

import org.apache.avro.Schema;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * schemas/avro: every .avsc by name, the topic each one is for (its doc says "Topic &lt;name&gt; ..."),
 * and the ids the stand-in registry gives them (1.. in the order of their names).
 */
final class Schemas {
    private static final Pattern TOPIC_DOC = Pattern.compile("^Topic ([a-z-]+) ");

    final File dir;
    final Map<String, Schema> byName = new LinkedHashMap<>();
    final Map<String, String> schemaOfTopic = new HashMap<>();
    final Map<String, String> topicOfSchema = new HashMap<>();
    final Map<String, Integer> idOfName = new HashMap<>();
    final Map<Integer, String> nameOfId = new HashMap<>();
    final Map<String, String> textOfName = new HashMap<>();

    Schemas(final File dir) throws IOException {
        this.dir = dir;
        final File[] files = dir.listFiles((d, n) -> n.endsWith(".avsc"));
        if (files == null || files.length == 0) {
            throw new IOException("no .avsc in " + dir);
        }
        Arrays.sort(files);
        int id = 0;
        for (final File f : files) {
            final String text = Files.readString(f.toPath());
            final Schema s = new Schema.Parser().parse(text);
            byName.put(s.getName(), s);
            textOfName.put(s.getName(), text);
            id++;
            idOfName.put(s.getName(), id);
            nameOfId.put(id, s.getName());
            final Matcher m = TOPIC_DOC.matcher(s.getDoc() == null ? "" : s.getDoc());
            if (m.find()) {
                schemaOfTopic.put(m.group(1), s.getName());
                topicOfSchema.put(s.getName(), m.group(1));
            }
        }
    }

    File file(final String name) {
        return new File(dir, name + ".avsc");
    }
}
