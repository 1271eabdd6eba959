"""The Java projects that run NiFi's own classes: tests/nifi (NiFi 2.6.0's record writers, Avro Java,
kafka-clients with transactions) and tests/nifi-flow (the shipped flow definitions checked with
NiFi's classes): finding a JDK that runs NiFi 2.x classes (21 or later), building a project with
Maven (offline once the local repository has every artifact) and running its main class."""
import glob
import os
import re
import subprocess

from .avroframe import REPO

HARNESS_DIR = os.path.join(REPO, "tests", "nifi")
FLOWCHECK_DIR = os.path.join(REPO, "tests", "nifi-flow")
MIN_JAVA = 21  # NiFi 2.x class files are version 65 (Java 21)


def java_major(home, tool="javac"):
    """The feature version of the Java at home (from its release file) when home/bin/<tool> is
    there (javac: a JDK; java: a JRE will do), or 0."""
    try:
        with open(os.path.join(home, "release")) as f:
            m = re.search(r'^JAVA_VERSION="(\d+)', f.read(), re.M)
    except OSError:
        return 0
    return int(m.group(1)) if m and os.access(os.path.join(home, "bin", tool), os.X_OK) else 0


def find_jdk():
    """A JDK of version 21 or later: $LL_NIFI_JAVA_HOME, $JAVA_HOME, else the newest under
    /usr/lib/jvm. None when there is none."""
    for home in (os.environ.get("LL_NIFI_JAVA_HOME"), os.environ.get("JAVA_HOME")):
        if home and java_major(home) >= MIN_JAVA:
            return home
    found = sorted(((java_major(h), h) for h in glob.glob("/usr/lib/jvm/*") if not os.path.islink(h)), reverse=True)
    return found[0][1] if found and found[0][0] >= MIN_JAVA else None


def build(jdk, out_dir, log_path, project=HARNESS_DIR):
    """Compiles the Maven project (tests/nifi unless told) into out_dir and returns its class
    path (classes first). Its pom takes the build directory as harness.build.dir. Tries Maven
    offline first (every artifact already in ~/.m2), then online. Raises with the log's tail when
    both fail."""
    env = dict(os.environ, JAVA_HOME=jdk)
    cp_file = os.path.join(out_dir, "classpath.txt")
    base = ["mvn", "-B", "-q", "-Duser.home=" + os.path.expanduser("~"), "-f", os.path.join(project, "pom.xml"),
            "-Dharness.build.dir=" + out_dir, "compile", "dependency:build-classpath",
            "-Dmdep.outputFile=" + cp_file]
    os.makedirs(out_dir, exist_ok=True)
    with open(log_path, "w") as log:
        for cmd in (base[:3] + ["-o"] + base[3:], base):
            log.write("$ %s\n" % " ".join(cmd))
            log.flush()
            r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                               timeout=600)
            if r.returncode == 0:
                with open(cp_file) as f:
                    return os.path.join(out_dir, "classes") + os.pathsep + f.read().strip()
    with open(log_path) as f:
        tail = f.read()[-3000:]
    raise AssertionError("building %s failed (log %s):\n%s" % (os.path.relpath(project, REPO), log_path, tail))


def run(jdk, classpath, args, timeout=300, main="loadledger.nifi.Harness"):
    """Runs main (the harness unless told) with args; returns the CompletedProcess (text output)."""
    cmd = [os.path.join(jdk, "bin", "java"), "-cp", classpath, main] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout)
