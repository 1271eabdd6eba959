package loadledger.nififlow;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.nifi.components.ConfigurableComponent;
import org.apache.nifi.components.PropertyDescriptor;
import org.apache.nifi.controller.ControllerService;
import org.apache.nifi.flow.ControllerServiceAPI;
import org.apache.nifi.flow.VersionedConfigurableExtension;
import org.apache.nifi.flow.VersionedConnection;
import org.apache.nifi.flow.VersionedControllerService;
import org.apache.nifi.flow.VersionedProcessor;
import org.apache.nifi.flow.VersionedPropertyDescriptor;
import org.apache.nifi.processor.Processor;
import org.apache.nifi.processor.Relationship;
import org.apache.nifi.util.NoOpProcessor;
import org.apache.nifi.util.TestRunner;
import org.apache.nifi.util.TestRunners;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Check 3: every component of the flow whose class is on the class path, configured as the flow
 * has it in a nifi-mock TestRunner, must be valid (every validation message NiFi gives is printed
 * when it is not); a service must be enabled, a processor's every connected and auto-terminated
 * relationship must exist once configured (RouteOnAttribute's come from its dynamic properties),
 * and every relationship it has must be connected or auto-terminated (NiFi's own rule). The
 * flow's recorded property descriptors (display name, sensitive, identifies a service, dynamic) and
 * a service's recorded APIs must be the class's.
 */
final class ComponentCheck {
    private ComponentCheck() {
    }

    static void run(final Flow flow, final Schemas schemas, final JsonNode table, final Report report) {
        final Map<String, Integer> absent = new TreeMap<>();
        for (final VersionedControllerService v : flow.services.values()) {
            final String what = "service '" + flow.path(v.getIdentifier()) + "' (" + Flow.simple(v.getType()) + ")";
            final Class<?> cls = Services.load(v.getType());
            if (cls == null) {
                absentType(v.getType(), what, table, absent, report);
                continue;
            }
            final TestRunner runner = TestRunners.newTestRunner(NoOpProcessor.class);
            final Services svc = new Services(flow, runner, schemas);
            final List<String> problems = new ArrayList<>();
            final ControllerService s = svc.add(v.getIdentifier(), problems);
            if (s != null) {
                recorded(v, s, problems);
                final Set<String> apis = new TreeSet<>();
                TableCheck.collectApis(s.getClass(), apis);
                final Set<String> recordedApis = new TreeSet<>();
                for (final ControllerServiceAPI api : v.getControllerServiceApis() == null ? List.<ControllerServiceAPI>of()
                        : v.getControllerServiceApis()) {
                    recordedApis.add(api.getType());
                }
                if (!apis.equals(recordedApis)) {
                    problems.add("controllerServiceApis " + recordedApis + ", the class implements " + apis);
                }
            }
            final String with = svc.standIns.isEmpty() ? "" : " [" + String.join("; ", svc.standIns) + "]";
            report.check(problems.isEmpty() && s != null && runner.isControllerServiceEnabled(s),
                    what + ": valid and enabled with the flow's properties" + with, String.join("; ", problems));
        }
        for (final VersionedProcessor v : flow.processors.values()) {
            final String what = "processor '" + flow.path(v.getIdentifier()) + "' (" + Flow.simple(v.getType()) + ")";
            final Class<?> cls = Services.load(v.getType());
            if (cls == null) {
                absentType(v.getType(), what, table, absent, report);
                continue;
            }
            final List<String> problems = new ArrayList<>();
            String with = "";
            String rels = "";
            try {
                final Processor p = (Processor) cls.getDeclaredConstructor().newInstance();
                final TestRunner runner = TestRunners.newTestRunner(p);
                final Services svc = new Services(flow, runner, schemas);
                svc.configure(v, p, problems);
                problems.addAll(Services.invalid(runner.validate()));
                recorded(v, p, problems);
                final Set<String> has = new TreeSet<>();
                for (final Relationship r : p.getRelationships()) {
                    has.add(r.getName());
                }
                final Set<String> used = new TreeSet<>();
                for (final VersionedConnection c : flow.outOf(v.getIdentifier())) {
                    used.addAll(c.getSelectedRelationships());
                }
                final Set<String> auto = v.getAutoTerminatedRelationships() == null ? Set.of() : v.getAutoTerminatedRelationships();
                for (final String r : used) {
                    if (!has.contains(r)) {
                        problems.add("the flow connects relationship '" + r + "', the configured processor has " + has);
                    }
                }
                for (final String r : auto) {
                    if (!has.contains(r)) {
                        problems.add("the flow auto-terminates relationship '" + r + "', the configured processor has " + has);
                    }
                }
                for (final String r : has) {
                    if (!used.contains(r) && !auto.contains(r)) {
                        problems.add("relationship '" + r + "' is neither connected nor auto-terminated (NiFi: invalid)");
                    }
                }
                with = svc.standIns.isEmpty() ? "" : " [" + String.join("; ", svc.standIns) + "]";
                rels = "; relationships " + has;
            } catch (final Throwable t) {
                problems.add(t.toString());
            }
            report.check(problems.isEmpty(), what + ": valid with the flow's properties" + rels + with,
                    String.join("; ", new LinkedHashSet<>(problems)));
        }
        for (final Map.Entry<String, Integer> e : absent.entrySet()) {
            report.note(e.getValue() + " x " + Flow.simple(e.getKey()) + ": not on the class path (bundle not served);"
                    + " checked from tools/nififlow/components-2.6.0.json by tests/style/check_nifi_flow.py");
        }
        if (!flow.placeholdersUsed.isEmpty()) {
            report.note("sensitive parameters " + flow.placeholdersUsed + " have no value in an export: '"
                    + Flow.SENSITIVE_PLACEHOLDER + "' used in their place");
        } else {
            report.note("sensitive parameters " + flow.sensitiveParameters() + " (no value in an export) are referenced by no"
                    + " component on the class path");
        }
    }

    /** A class that is not on the class path: expected only for the table's entries not checked against a class. */
    private static void absentType(final String type, final String what, final JsonNode table, final Map<String, Integer> absent,
                                   final Report report) {
        final JsonNode entry = table.path("components").get(type);
        if (entry == null) {
            report.fail(what + ": type not in tools/nififlow/components-2.6.0.json and not on the class path");
        } else if (entry.path("checkedAgainstClass").asBoolean(false)) {
            report.fail(what + ": the table says NiFi's class was checked, but it is not on the class path");
        } else {
            absent.merge(type, 1, Integer::sum);
        }
    }

    /** The flow's recorded propertyDescriptors against the class's. */
    private static void recorded(final VersionedConfigurableExtension v, final ConfigurableComponent c, final List<String> problems) {
        if (v.getPropertyDescriptors() == null) {
            return;
        }
        final Set<String> supported = new TreeSet<>();
        for (final PropertyDescriptor d : c.getPropertyDescriptors()) {
            supported.add(d.getName());
        }
        for (final Map.Entry<String, VersionedPropertyDescriptor> e : v.getPropertyDescriptors().entrySet()) {
            final VersionedPropertyDescriptor r = e.getValue();
            final PropertyDescriptor d = c.getPropertyDescriptor(e.getKey());
            final String where = "recorded descriptor '" + e.getKey() + "'";
            if (r.isDynamic()) {
                if (supported.contains(e.getKey()) || d == null || !d.isDynamic()) {
                    problems.add(where + " says dynamic, the class " + (supported.contains(e.getKey()) ? "has it as a property"
                            : "takes no such dynamic property"));
                }
                continue;
            }
            if (!supported.contains(e.getKey())) {
                problems.add(where + ": the class has no such property");
                continue;
            }
            if (!d.getDisplayName().equals(r.getDisplayName())) {
                problems.add(where + " displayName '" + r.getDisplayName() + "', class '" + d.getDisplayName() + "'");
            }
            if (d.isSensitive() != r.isSensitive()) {
                problems.add(where + " sensitive " + r.isSensitive() + ", class " + d.isSensitive());
            }
            if ((d.getControllerServiceDefinition() != null) != r.getIdentifiesControllerService()) {
                problems.add(where + " identifiesControllerService " + r.getIdentifiesControllerService() + ", class "
                        + (d.getControllerServiceDefinition() != null));
            }
        }
    }
}
