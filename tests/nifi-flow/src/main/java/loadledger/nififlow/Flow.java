package loadledger.nififlow;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.module.jakarta.xmlbind.JakartaXmlBindAnnotationIntrospector;
import org.apache.nifi.flow.ConnectableComponentType;
import org.apache.nifi.flow.VersionedComponent;
import org.apache.nifi.flow.VersionedConnection;
import org.apache.nifi.flow.VersionedControllerService;
import org.apache.nifi.flow.VersionedParameter;
import org.apache.nifi.flow.VersionedParameterContext;
import org.apache.nifi.flow.VersionedProcessGroup;
import org.apache.nifi.flow.VersionedProcessor;
import org.apache.nifi.parameter.ExpressionLanguageAgnosticParameterParser;
import org.apache.nifi.parameter.ParameterReference;
import org.apache.nifi.parameter.ParameterTokenList;
import org.apache.nifi.registry.flow.RegisteredFlowSnapshot;
import org.apache.nifi.util.MockParameterLookup;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * A flow definition as NiFi 2.6.0 reads it (its own model classes, read the way its upload
 * endpoint reads them), with the lookups the checks need: every processor and controller service
 * by id with the path of its group, the connections, and the parameter context's values.
 */
final class Flow {
    /** What a sensitive parameter (exported without its value) is replaced with. */
    static final String SENSITIVE_PLACEHOLDER = "placeholder-for-a-sensitive-parameter";

    final String file;
    final RegisteredFlowSnapshot snapshot;
    final VersionedParameterContext context;
    final Map<String, VersionedProcessor> processors = new LinkedHashMap<>();
    final Map<String, VersionedControllerService> services = new LinkedHashMap<>();
    final Map<String, String> groupOf = new HashMap<>();
    final List<VersionedConnection> connections = new ArrayList<>();
    final List<String> groupNames = new ArrayList<>();
    private final Map<String, String> paramValues = new HashMap<>();
    private final Map<String, Boolean> paramSensitive = new HashMap<>();
    final TreeSet<String> placeholdersUsed = new TreeSet<>();

    private Flow(final String file, final RegisteredFlowSnapshot snapshot) {
        this.file = file;
        this.snapshot = snapshot;
        final VersionedProcessGroup root = snapshot.getFlowContents();
        final String ctxName = root == null ? null : root.getParameterContextName();
        final Map<String, VersionedParameterContext> contexts = snapshot.getParameterContexts();
        this.context = ctxName == null || contexts == null ? null : contexts.get(ctxName);
        if (context != null && context.getParameters() != null) {
            for (final VersionedParameter p : context.getParameters()) {
                paramValues.put(p.getName(), p.getValue());
                paramSensitive.put(p.getName(), p.isSensitive());
            }
        }
        if (root != null) {
            index(root, "");
        }
    }

    /**
     * The ObjectMapper of NiFi 2.6.0's flow upload (ProcessGroupResource, tag rel/nifi-2.6.0):
     * NON_NULL inclusion, the Jakarta XML Binding annotation introspector in place of Jackson's own,
     * unknown properties ignored. strict=true turns unknown properties into errors, so that a key
     * NiFi would silently drop (a misspelt one) fails.
     */
    static ObjectMapper nifiUploadMapper(final boolean strict) {
        final ObjectMapper m = new ObjectMapper();
        m.setDefaultPropertyInclusion(JsonInclude.Include.NON_NULL);
        m.setAnnotationIntrospector(new JakartaXmlBindAnnotationIntrospector(m.getTypeFactory()));
        m.configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, strict);
        return m;
    }

    static Flow read(final File f, final boolean strict) throws IOException {
        return new Flow(f.getName(), nifiUploadMapper(strict).readValue(f, RegisteredFlowSnapshot.class));
    }

    private void index(final VersionedProcessGroup g, final String path) {
        groupNames.add(path.isEmpty() ? "(root)" : path);
        for (final VersionedProcessor p : sorted(g.getProcessors())) {
            processors.put(p.getIdentifier(), p);
            groupOf.put(p.getIdentifier(), path);
        }
        for (final VersionedControllerService s : sorted(g.getControllerServices())) {
            services.put(s.getIdentifier(), s);
            groupOf.put(s.getIdentifier(), path);
        }
        if (g.getConnections() != null) {
            connections.addAll(g.getConnections());
        }
        for (final VersionedProcessGroup c : sorted(g.getProcessGroups())) {
            index(c, path.isEmpty() ? c.getName() : path + "/" + c.getName());
        }
    }

    private static <T extends VersionedComponent> List<T> sorted(final Set<T> set) {
        final List<T> out = new ArrayList<>(set == null ? List.of() : set);
        out.sort(Comparator.comparing(VersionedComponent::getName,
                Comparator.nullsFirst(Comparator.naturalOrder())));
        return out;
    }

    /** "PG-20 Partition worker/PartitionClaim as JSON", or the service's name with its group. */
    String path(final String id) {
        final String g = groupOf.getOrDefault(id, "");
        final String name = processors.containsKey(id) ? processors.get(id).getName()
                : services.containsKey(id) ? services.get(id).getName() : id;
        return g.isEmpty() ? name : g + "/" + name;
    }

    static String simple(final String type) {
        return type.substring(type.lastIndexOf('.') + 1);
    }

    Set<String> sensitiveParameters() {
        final Set<String> out = new TreeSet<>();
        paramSensitive.forEach((k, v) -> {
            if (v) {
                out.add(k);
            }
        });
        return out;
    }

    boolean hasParameter(final String name) {
        return paramValues.containsKey(name);
    }

    String parameter(final String name) {
        return paramValues.get(name);
    }

    /**
     * A property value with its parameter references replaced by the context's values, with NiFi's
     * own parameter parser (nifi-parameter; the EL-agnostic parser the framework uses to find every
     * reference). A sensitive parameter has no value in an exported flow: it becomes
     * SENSITIVE_PLACEHOLDER (remembered in placeholdersUsed). A reference to a parameter the context
     * does not have throws (NiFi makes the component invalid).
     */
    String resolve(final String raw) {
        if (raw == null) {
            return null;
        }
        final ParameterTokenList tokens = new ExpressionLanguageAgnosticParameterParser().parseTokens(raw);
        final Map<String, String> values = new HashMap<>();
        for (final ParameterReference ref : tokens.toReferenceList()) {
            final String name = ref.getParameterName();
            if (!paramValues.containsKey(name)) {
                throw new IllegalArgumentException("parameter #{" + name + "} is not in the parameter context");
            }
            String v = paramValues.get(name);
            if (v == null && Boolean.TRUE.equals(paramSensitive.get(name))) {
                v = SENSITIVE_PLACEHOLDER;
                placeholdersUsed.add(name);
            }
            values.put(name, v);
        }
        return tokens.substitute(new MockParameterLookup(values));
    }

    /** Processors of a type, in the flow's (group, name) order. */
    List<VersionedProcessor> processorsOfType(final String type) {
        final List<VersionedProcessor> out = new ArrayList<>();
        for (final VersionedProcessor p : processors.values()) {
            if (type.equals(p.getType())) {
                out.add(p);
            }
        }
        return out;
    }

    List<VersionedConnection> into(final String id) {
        final List<VersionedConnection> out = new ArrayList<>();
        for (final VersionedConnection c : connections) {
            if (c.getDestination() != null && id.equals(c.getDestination().getId())) {
                out.add(c);
            }
        }
        return out;
    }

    List<VersionedConnection> outOf(final String id) {
        final List<VersionedConnection> out = new ArrayList<>();
        for (final VersionedConnection c : connections) {
            if (c.getSource() != null && id.equals(c.getSource().getId())) {
                out.add(c);
            }
        }
        return out;
    }

    /** The processors feeding id directly (connections from a processor). */
    List<VersionedProcessor> upstream(final String id) {
        final List<VersionedProcessor> out = new ArrayList<>();
        for (final VersionedConnection c : into(id)) {
            if (c.getSource().getType() == ConnectableComponentType.PROCESSOR && processors.containsKey(c.getSource().getId())) {
                out.add(processors.get(c.getSource().getId()));
            }
        }
        return out;
    }

    /** The processors id sends relationship rel to directly. */
    List<VersionedProcessor> downstream(final String id, final String rel) {
        final List<VersionedProcessor> out = new ArrayList<>();
        for (final VersionedConnection c : outOf(id)) {
            if (c.getSelectedRelationships() != null && c.getSelectedRelationships().contains(rel)
                    && c.getDestination().getType() == ConnectableComponentType.PROCESSOR
                    && processors.containsKey(c.getDestination().getId())) {
                out.add(processors.get(c.getDestination().getId()));
            }
        }
        return out;
    }
}
