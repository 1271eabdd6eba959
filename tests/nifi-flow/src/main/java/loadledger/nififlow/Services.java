package loadledger.nififlow;

import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.components.ValidationResult;
import org.apache.nifi.controller.ControllerService;
import org.apache.nifi.flow.VersionedConfigurableExtension;
import org.apache.nifi.flow.VersionedControllerService;
import org.apache.nifi.processor.Processor;
import org.apache.nifi.util.TestRunner;

import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;

/**
 * Puts a flow's components into a nifi-mock TestRunner configured as the flow has them: each
 * property with its parameter references replaced (Flow.resolve), each referenced controller
 * service added under the flow's identifier first (the real class configured the same way and
 * enabled, or a stand-in of StandIns when the class is not on the class path), every validation
 * message NiFi gives collected.
 */
final class Services {
    private final Flow flow;
    private final TestRunner runner;
    private final Schemas schemas;
    private final Map<String, ControllerService> added = new LinkedHashMap<>();
    /** "Schema registry = STAND-IN for ConfluentSchemaRegistry (SchemaRegistry)", one per stand-in added. */
    final List<String> standIns = new ArrayList<>();

    Services(final Flow flow, final TestRunner runner, final Schemas schemas) {
        this.flow = flow;
        this.runner = runner;
        this.schemas = schemas;
    }

    static Class<?> load(final String type) {
        try {
            return Class.forName(type, false, Services.class.getClassLoader());
        } catch (final ClassNotFoundException | LinkageError e) {
            return null;
        }
    }

    ControllerService get(final String id) {
        return added.get(id);
    }

    /**
     * Adds the flow's service id (and what it references) to the runner, configured, validated and
     * enabled. Problems go to problems, each naming the service; returns null when it could not be
     * added at all.
     */
    ControllerService add(final String id, final List<String> problems) {
        if (added.containsKey(id)) {
            return added.get(id);
        }
        final VersionedControllerService v = flow.services.get(id);
        if (v == null) {
            problems.add("references controller service " + id + ", which is not in the flow");
            return null;
        }
        final String name = "'" + v.getName() + "' (" + Flow.simple(v.getType()) + ")";
        final Class<?> cls = load(v.getType());
        try {
            if (cls == null) {
                final ControllerService standIn = StandIns.forType(v.getType(), schemas, flow.parameter("topic.prefix"));
                if (standIn == null) {
                    problems.add(name + " is not on the class path and has no stand-in");
                    return null;
                }
                runner.addControllerService(id, standIn);
                runner.enableControllerService(standIn);
                added.put(id, standIn);
                standIns.add("'" + v.getName() + "' = STAND-IN for " + Flow.simple(v.getType()) + " (" + StandIns.api(standIn) + ")");
                return standIn;
            }
            final ControllerService s = (ControllerService) cls.getDeclaredConstructor().newInstance();
            runner.addControllerService(id, s);
            added.put(id, s);
            final List<String> own = new ArrayList<>();
            configure(v, s, own);
            for (final ValidationResult r : runner.validate(s)) {
                if (!r.isValid()) {
                    own.add(r.toString());
                }
            }
            if (own.isEmpty()) {
                try {
                    runner.enableControllerService(s);
                } catch (final Throwable t) {
                    own.add("cannot be enabled: " + t);
                }
            }
            for (final String p : new LinkedHashSet<>(own)) {
                problems.add(name + ": " + p);
            }
            return s;
        } catch (final Exception e) {
            problems.add(name + ": " + e);
            return null;
        }
    }

    /**
     * Sets the flow's properties on a service (component is a ControllerService) or on the runner's
     * processor (component is the Processor), adding the services they reference first.
     */
    void configure(final VersionedConfigurableExtension v, final Object component, final List<String> problems) {
        final Map<String, String> props = v.getProperties() == null ? Map.of() : v.getProperties();
        for (final Map.Entry<String, String> e : props.entrySet()) {
            if (e.getValue() == null) {
                continue;
            }
            final String value;
            try {
                value = flow.resolve(e.getValue());
            } catch (final IllegalArgumentException ex) {
                problems.add("property '" + e.getKey() + "': " + ex.getMessage());
                continue;
            }
            final PropertyDescriptor d = component instanceof Processor p ? p.getPropertyDescriptor(e.getKey())
                    : ((ControllerService) component).getPropertyDescriptor(e.getKey());
            if (d != null && d.getControllerServiceDefinition() != null && value != null) {
                final ControllerService ref = add(value, problems);
                if (ref != null && !d.getControllerServiceDefinition().isInstance(ref)) {
                    problems.add("property '" + e.getKey() + "' needs a " + d.getControllerServiceDefinition().getName()
                            + ", the service it names is not one");
                }
            }
            final ValidationResult r = component instanceof Processor ? runner.setProperty(e.getKey(), value)
                    : runner.setProperty((ControllerService) component, e.getKey(), value);
            if (!r.isValid()) {
                problems.add(r.toString());
            }
        }
    }

    static List<String> invalid(final Collection<ValidationResult> results) {
        final List<String> out = new ArrayList<>();
        for (final ValidationResult r : results) {
            if (!r.isValid()) {
                out.add(r.toString());
            }
        }
        return out;
    }
}
