// LlKafkaAcls - creates the ACLs of the secure environment in one JVM (scripts/env_secure.sh).
//
//   java -cp <classes>:<kafka libs>/* LlKafkaAcls ADMIN.properties ACLS.txt BOOTSTRAP
//
// ADMIN.properties: the admin client's settings (SASL_SSL, the admin SCRAM user). ACLS.txt: one
// ACL a line, "principal operation resource-type pattern-type name" (e.g. "User:ll-registrar READ
// TOPIC LITERAL loadledger.run-requests"); every ACL allows, from any host. '#' starts a comment.
// Creating an ACL that exists already is a no-op (the broker keeps one). Waits at most 60 s.
// Exit 0 when every ACL was created, 1 otherwise (the broker's error on stderr), 2 on usage.
import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

public final class LlKafkaAcls {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: LlKafkaAcls ADMIN.properties ACLS.txt BOOTSTRAP");
            System.exit(2);
        }
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        props.put("bootstrap.servers", args[2]);
        List<AclBinding> acls = new ArrayList<>();
        for (String raw : Files.readAllLines(Paths.get(args[1]))) {
            String line = raw.replaceAll("#.*", "").trim();
            if (line.isEmpty())
                continue;
            String[] f = line.split("\\s+");
            if (f.length != 5) {
                System.err.println("LlKafkaAcls: bad line: " + raw);
                System.exit(2);
            }
            acls.add(new AclBinding(
                new ResourcePattern(ResourceType.fromString(f[2]), f[4], PatternType.fromString(f[3])),
                new AccessControlEntry(f[0], "*", AclOperation.fromString(f[1]), AclPermissionType.ALLOW)));
        }
        try (Admin admin = Admin.create(props)) {
            admin.createAcls(acls).all().get(60, TimeUnit.SECONDS);
        } catch (Exception e) {
            System.err.println("LlKafkaAcls: " + e);
            System.exit(1);
        }
        System.err.println("LlKafkaAcls: " + acls.size() + " ACLs in place");
    }
}
