"""A real Confluent-compatible schema registry for the tests: Apicurio Registry 2.0.2.Final (in-memory
storage) in one Quarkus 1.12.2.Final jar, built from tests/registry/apicurio (its README says why
this version) and run on a free loopback port.

The build is cached in $LL_CACHE_DIR/apicurio-registry/<key> ($HOME/.cache/loadledger by default,
the folder scripts/env.sh keeps the Kafka jars in), where <key> is the SHA-256 of the build's inputs
(the pom and every file under src/): a change to them builds again. One build at a time per key (a
lock file beside it); the jar is renamed into place only once whole. Maven runs offline first (every
artifact already in ~/.m2), then online (Maven Central: 204 MB into an empty ~/.m2).

    python3 -m llsim.apicurio build      (from tools/nifisim) builds it now and prints the jar's path
"""
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

from .avroframe import REPO
from .nifijava import java_major

SOURCE_DIR = os.path.join(REPO, "tests", "registry", "apicurio")
JAR = "apicurio-registry-runner.jar"
CCOMPAT = "/apis/ccompat/v6"  # the Confluent API (no v7 in 2.0.2)
# Quarkus 1.12 runs on Java 11 to 17 (Debian 12's default-jdk-headless is 17)
JAVA_MIN, JAVA_MAX = 11, 17


class RegistryError(Exception):
    """The registry cannot be built or started (no suitable Java, Maven failed, no answer)."""


def find_java():
    """The Java home the registry is built and run with: $LL_REGISTRY_JAVA_HOME, else $JAVA_HOME, else
    the newest under /usr/lib/jvm, else the one `java` on PATH belongs to; each only if its version is
    JAVA_MIN..JAVA_MAX. RegistryError when there is none."""
    homes = [os.environ.get("LL_REGISTRY_JAVA_HOME"), os.environ.get("JAVA_HOME")]
    homes += sorted((h for h in glob.glob("/usr/lib/jvm/*") if not os.path.islink(h)),
                    key=lambda h: java_major(h, "java"), reverse=True)
    java = shutil.which("java")
    if java:
        homes.append(os.path.dirname(os.path.dirname(os.path.realpath(java))))
    for home in homes:
        if home and JAVA_MIN <= java_major(home, "java") <= JAVA_MAX:
            return home
    raise RegistryError("no Java %d..%d for Apicurio Registry 2.0.2 (Quarkus 1.12): install default-jdk-headless "
                        "(scripts/env.sh install) or set LL_REGISTRY_JAVA_HOME" % (JAVA_MIN, JAVA_MAX))


def build_key():
    """SHA-256 over the build's inputs: each file's path (relative to SOURCE_DIR) and content, README.md
    left out."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(SOURCE_DIR):
        dirs[:] = sorted(d for d in dirs if d != "target")
        for name in sorted(files):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, SOURCE_DIR)
            if rel == "README.md":
                continue
            h.update(rel.encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read() + b"\0")
    return h.hexdigest()


def cache_root():
    """$LL_CACHE_DIR/apicurio-registry (default $HOME/.cache/loadledger/apicurio-registry)."""
    base = os.environ.get("LL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "loadledger")
    return os.path.join(base, "apicurio-registry")


def build(say=print, timeout=780):
    """The registry's jar, built when not cached. Returns (jar path, seconds the build took: 0 when
    cached). RegistryError with the log's tail when Maven fails offline and online."""
    home = find_java()
    root = os.path.join(cache_root(), build_key()[:16])
    jar = os.path.join(root, JAR)
    os.makedirs(cache_root(), exist_ok=True)
    with open(root + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(jar):
            say("apicurio registry: cached in %s" % jar)
            return jar, 0.0
        t0 = time.time()
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        out, log_path = os.path.join(root, "target"), os.path.join(root, "mvn.log")
        say("apicurio registry: building %s into %s (Maven, log %s)" % (SOURCE_DIR, root, log_path))
        # -Duser.home: Maven takes ~/.m2 from the passwd entry, not from $HOME
        base = ["mvn", "-B", "-Duser.home=" + os.path.expanduser("~"), "-f", os.path.join(SOURCE_DIR, "pom.xml"),
                "-Dregistry.build.dir=" + out, "package", "-DskipTests", "-Dquarkus.package.type=uber-jar"]
        env = dict(os.environ, JAVA_HOME=home)
        ok = False
        with open(log_path, "w") as log:
            for cmd in (base[:2] + ["-o"] + base[2:], base):
                log.write("$ %s\n" % " ".join(cmd))
                log.flush()
                try:
                    r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                       cwd=root, timeout=timeout)
                except FileNotFoundError:
                    raise RegistryError("mvn not found (Debian package maven; scripts/env.sh install)") from None
                runners = glob.glob(os.path.join(out, "*-runner.jar"))
                if r.returncode == 0 and len(runners) == 1:
                    ok = True
                    break
        if not ok:
            with open(log_path) as f:
                tail = f.read()[-3000:]
            raise RegistryError("building the Apicurio registry failed (log %s):\n%s" % (log_path, tail))
        os.replace(runners[0], jar + ".tmp")
        shutil.rmtree(out, ignore_errors=True)
        os.replace(jar + ".tmp", jar)
        secs = time.time() - t0
        say("apicurio registry: built in %.0f s: %s" % (secs, jar))
        return jar, secs


class Apicurio:
    """One registry process on a free loopback port (Quarkus's port 0; the port is read from its log
    line "Listening on: http://127.0.0.1:N"), its in-memory storage empty. tls=(cert PEM, key PEM):
    HTTPS only. url is the Confluent API's base (…/apis/ccompat/v6)."""

    def __init__(self, run_dir, jar=None, tls=None, say=print, start_timeout=90):
        os.makedirs(run_dir, exist_ok=True)
        self.jar = jar or build(say)[0]
        java = os.path.join(find_java(), "bin", "java")
        self.log_path = os.path.join(run_dir, "apicurio.log")
        args = [java, "-Xmx256m",
                # Narayana's default process id binds a loopback ServerSocket on a random port
                # (never accepted on) to make itself unique: a uuid needs no port
                "-DCoreEnvironmentBean.processImplementationClassName="
                "com.arjuna.ats.internal.arjuna.utils.UuidProcessId",
                "-Dvertx.cacheDirBase=" + os.path.join(run_dir, "vertx-cache"),
                "-Dquarkus.package.type=uber-jar",  # as built: no "build time property changed" warning
                "-Dquarkus.http.host=127.0.0.1", "-Dquarkus.http.port=0"]
        if tls:
            args += ["-Dquarkus.http.ssl-port=0", "-Dquarkus.http.ssl.certificate.file=" + tls[0],
                     "-Dquarkus.http.ssl.certificate.key-file=" + tls[1], "-Dquarkus.http.insecure-requests=disabled"]
        self.ca = tls[0] if tls else None
        self.t0 = time.time()
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(args + ["-jar", self.jar], stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=run_dir)
        try:
            self.root = self._wait_listening(start_timeout)
            self.url = self.root + CCOMPAT
            self._wait_ready(start_timeout)
        except Exception:
            self.stop()
            raise
        self.start_secs = time.time() - self.t0

    def _log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def _wait_listening(self, timeout):
        deadline = time.time() + timeout
        while True:
            m = re.search(r"Listening on: (https?)://127\.0\.0\.1:(\d+)", self._log())
            if m:
                return "%s://127.0.0.1:%s" % m.groups()
            if self.proc.poll() is not None or time.time() > deadline:
                raise RegistryError("apicurio registry did not start (rc %s); %s:\n%s" % (
                    self.proc.poll(), self.log_path, self._log()[-3000:]))
            time.sleep(0.1)

    def _wait_ready(self, timeout):
        deadline = time.time() + timeout
        while True:
            st, body = self.call("GET", "/health/ready", base=self.root)
            if st == 200 and body.get("status") == "UP":
                return
            if self.proc.poll() is not None or time.time() > deadline:
                raise RegistryError("apicurio registry not ready (%s %s); %s" % (st, body, self.log_path))
            time.sleep(0.2)

    def call(self, method, path, body=None, base=None):
        """(status, decoded JSON body or None) of one request to the Confluent API (or base + path)."""
        data = json.dumps(body).encode() if body is not None else None
        ctype = "application/json" if base else "application/vnd.schemaregistry.v1+json"
        headers = {"Content-Type": ctype, "Accept": "application/json"}
        req = urllib.request.Request((base or self.url) + path, data=data, method=method, headers=headers)
        ctx = ssl.create_default_context(cafile=self.ca) if self.ca else None
        try:
            with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
                raw = r.read()
                status = r.status
        except urllib.error.HTTPError as e:
            raw, status = e.read(), e.code
        except (urllib.error.URLError, ConnectionError):
            return 0, None
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def enforce_rules(self):
        """The rules of schemas/README.md on every subject: compatibility FULL_TRANSITIVE (the
        Confluent API's global /config) and validity FULL (Apicurio's own API: a text that is no
        Avro schema is refused, 422). Asserts both were taken."""
        st, body = self.call("PUT", "/config", {"compatibility": "FULL_TRANSITIVE"})
        assert st == 200, (st, body)
        st, body = self.call("POST", "/admin/rules", {"type": "VALIDITY", "config": "FULL"},
                             base=self.root + "/apis/registry/v2")
        assert st == 204, (st, body)

    def rss_kib(self):
        """The process's resident set (VmRSS, KiB), or 0."""
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                return int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1))
        except (OSError, AttributeError):
            return 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def main(argv):
    if argv[1:] != ["build"]:
        print("usage: python3 -m llsim.apicurio build", file=sys.stderr)
        return 1
    try:
        jar, _ = build()
    except RegistryError as e:
        print(e, file=sys.stderr)
        return 1
    print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
