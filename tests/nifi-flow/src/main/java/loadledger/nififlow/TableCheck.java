package loadledger.nififlow;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.nifi.annotation.behavior.DynamicProperties;
import org.apache.nifi.annotation.behavior.DynamicProperty;
import org.apache.nifi.components.AllowableValue;
import org.apache.nifi.components.ConfigurableComponent;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.controller.ControllerService;
import org.apache.nifi.processor.Processor;
import org.apache.nifi.processor.Relationship;
import org.apache.nifi.util.NoOpProcessor;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;

/**
 * Check 2: tools/nififlow/components-2.6.0.json against NiFi's classes. For every entry marked
 * checkedAgainstClass, the class is instantiated and initialized (in a TestRunner) and its property
 * descriptors (name, display name, sensitive, required, EL scope, the controller-service API,
 * allowable values, default), its static relationships (processors), whether it takes dynamic
 * properties, and the controller-service APIs it implements (services) must be the table's.
 */
final class TableCheck {
    private TableCheck() {
    }

    static void run(final File table, final Report report) throws IOException {
        final JsonNode components = new ObjectMapper().readTree(table).path("components");
        int checked = 0;
        int skipped = 0;
        for (final Map.Entry<String, JsonNode> e : components.properties()) {
            final String type = e.getKey();
            final JsonNode entry = e.getValue();
            if (!entry.path("checkedAgainstClass").asBoolean(false)) {
                skipped++;
                report.note("table " + Flow.simple(type) + ": not on the class path (" + entry.path("artifact").asText()
                        + " is not served); its descriptors were read from NiFi's source, checked only by tests/style/check_nifi_flow.py");
                continue;
            }
            checked++;
            final List<String> diffs = new ArrayList<>();
            try {
                compare(type, entry, diffs);
            } catch (final Throwable t) {
                diffs.add("cannot instantiate: " + t);
            }
            report.check(diffs.isEmpty(), "table " + Flow.simple(type) + " = NiFi's class " + type, String.join("; ", diffs));
        }
        report.note("table: " + checked + " entries compared with NiFi's classes, " + skipped + " left to the Python check");
    }

    private static void compare(final String type, final JsonNode entry, final List<String> diffs) throws Exception {
        final Class<?> cls = Class.forName(type);
        final Object o = cls.getDeclaredConstructor().newInstance();
        final List<PropertyDescriptor> descriptors;
        if (o instanceof Processor p) {
            TestRunners.newTestRunner(p);
            descriptors = p.getPropertyDescriptors();
            final Set<String> rels = new TreeSet<>();
            for (final Relationship r : p.getRelationships()) {
                rels.add(r.getName());
            }
            final Set<String> want = new TreeSet<>(strings(entry.path("relationships")));
            if (!rels.equals(want)) {
                diffs.add("relationships: class " + rels + ", table " + want);
            }
        } else if (o instanceof ControllerService s) {
            final TestRunner r = TestRunners.newTestRunner(NoOpProcessor.class);
            r.addControllerService("table-" + cls.getSimpleName(), s);
            descriptors = s.getPropertyDescriptors();
            final Set<String> apis = new TreeSet<>();
            collectApis(cls, apis);
            final Set<String> want = new TreeSet<>(strings(entry.path("apis")));
            if (!apis.equals(want)) {
                diffs.add("controller-service APIs: class " + apis + ", table " + want);
            }
        } else {
            descriptors = ((ConfigurableComponent) o).getPropertyDescriptors();
        }
        final boolean dynamic = cls.isAnnotationPresent(DynamicProperty.class) || cls.isAnnotationPresent(DynamicProperties.class);
        if (dynamic != entry.path("dynamicProperties").asBoolean(false)) {
            diffs.add("dynamic properties: class " + dynamic + ", table " + entry.path("dynamicProperties").asBoolean(false));
        }
        final JsonNode props = entry.path("properties");
        final Set<String> seen = new LinkedHashSet<>();
        for (final PropertyDescriptor d : descriptors) {
            seen.add(d.getName());
            final JsonNode t = props.get(d.getName());
            if (t == null) {
                diffs.add("property '" + d.getName() + "' (" + d.getDisplayName() + ") is missing from the table");
                continue;
            }
            final String where = "property '" + d.getName() + "' ";
            same(diffs, where + "displayName", d.getDisplayName(), text(t, "displayName"));
            same(diffs, where + "sensitive", d.isSensitive(), t.path("sensitive").asBoolean(false));
            same(diffs, where + "required", d.isRequired(), t.path("required").asBoolean(false));
            same(diffs, where + "el", d.getExpressionLanguageScope().name(), text(t, "el"));
            same(diffs, where + "service", d.getControllerServiceDefinition() == null ? null
                    : d.getControllerServiceDefinition().getName(), text(t, "service"));
            // as sets: some classes build them from Map.of(...).keySet(), whose order changes from
            // one JVM run to the next (EvaluateJsonPath's and SplitJson's Null Value Representation)
            final Set<String> av = d.getAllowableValues() == null ? null
                    : new TreeSet<>(d.getAllowableValues().stream().map(AllowableValue::getValue).toList());
            same(diffs, where + "allowableValues", av, t.has("allowableValues") ? new TreeSet<>(strings(t.get("allowableValues"))) : null);
            same(diffs, where + "default", d.getDefaultValue(), text(t, "default"));
        }
        for (final Map.Entry<String, JsonNode> pe : props.properties()) {
            final String n = pe.getKey();
            if (!seen.contains(n)) {
                diffs.add("property '" + n + "' is in the table, the class has no such property");
            }
        }
    }

    /** Every interface of cls (its superclasses' too, and their super-interfaces) that is a controller-service API. */
    static void collectApis(final Class<?> cls, final Set<String> out) {
        for (Class<?> c = cls; c != null; c = c.getSuperclass()) {
            for (final Class<?> i : c.getInterfaces()) {
                addApi(i, out);
            }
        }
    }

    private static void addApi(final Class<?> i, final Set<String> out) {
        if (i != ControllerService.class && ControllerService.class.isAssignableFrom(i)) {
            out.add(i.getName());
        }
        for (final Class<?> s : i.getInterfaces()) {
            addApi(s, out);
        }
    }

    private static void same(final List<String> diffs, final String what, final Object cls, final Object table) {
        if (!Objects.equals(cls, table)) {
            diffs.add(what + ": class " + cls + ", table " + table);
        }
    }

    private static String text(final JsonNode n, final String field) {
        final JsonNode v = n.get(field);
        return v == null || v.isNull() ? null : v.asText();
    }

    private static List<String> strings(final JsonNode arr) {
        final List<String> out = new ArrayList<>();
        if (arr != null) {
            arr.forEach(x -> out.add(x.asText()));
        }
        return out;
    }
}
