"""Versions (docs/operations.md, "Versions and logs"): every service binary and loadctl answer
`--version` with one line `<binary> <version> (<commit>)` and exit 0 without reading any
configuration; every running service shows the same version and commit in the gauge
loadledger_build_info{version, commit} 1 of its /metrics and in its first log line
(service_starting).

The version is project(VERSION ...) of CMakeLists.txt (read here from the file); the commit is a
commit of this repository when the tree is a git checkout (`git describe --always --dirty` at
build time), else "unknown".
"""
import os
import re
import subprocess
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from llsim.avroframe import REPO
from llsim.drills import Isolated, events, log_lines, wait_until

SERVICES = ("registrar", "claimer", "completion", "dispatcher", "sweeper")
BUILD = os.environ.get("LL_BUILD_DIR", os.path.join(REPO, "build"))


def binaries():
    """(name it prints, path) of every binary."""
    out = [("ll-" + s, os.path.join(BUILD, "services", "ll-" + s)) for s in SERVICES]
    return out + [("loadctl", os.path.join(BUILD, "tools", "loadctl"))]


def project_version():
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        m = re.search(r"^project\(loadledger VERSION ([0-9]+\.[0-9]+\.[0-9]+)\b", f.read(), re.M)
    assert m, "no project(loadledger VERSION x.y.z) in CMakeLists.txt"
    return m.group(1)


def version_of(path, env=None):
    p = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, env=env)
    return p


def build_commit():
    """The commit the binaries name (the same for all: checked in the first test)."""
    p = version_of(binaries()[0][1])
    return re.fullmatch(r"\S+ \S+ \((\S+)\)\n", p.stdout).group(1)


@pytest.mark.parametrize("name,path", binaries(), ids=[b[0] for b in binaries()])
def test_version_line_and_exit_code_without_configuration(name, path):
    # a configuration that cannot be read: --version must not look at it
    env = dict(os.environ, LOADLEDGER_CONFIG="/nonexistent/loadledger.conf")
    p = version_of(path, env)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    m = re.fullmatch(r"(\S+) (\S+) \(([A-Za-z0-9._+-]+)\)\n", p.stdout)
    assert m, "not one line '<binary> <version> (<commit>)': %r" % p.stdout
    assert m.group(1) == name
    assert m.group(2) == project_version()
    commit = m.group(3)
    if os.path.exists(os.path.join(REPO, ".git")):
        # a commit of this repository (abbreviated hash, -dirty when built from a changed tree)
        sha = re.fullmatch(r"(?:.*-g)?([0-9a-f]{7,40})(-dirty)?", commit)
        assert sha, commit
        assert subprocess.run(["git", "-C", REPO, "cat-file", "-e", sha.group(1) + "^{commit}"]).returncode == 0
    else:
        assert commit == "unknown"
    # --config before --version: still not read
    p2 = subprocess.run([path, "--config", "/nonexistent/x.conf", "--version"] if name != "loadctl"
                        else [path, "--db", "host=/nonexistent", "--version"],
                        capture_output=True, text=True, timeout=30)
    assert (p2.returncode, p2.stdout, p2.stderr) == (0, p.stdout, "")


def test_every_binary_names_the_same_build():
    lines = {version_of(path).stdout.split(" ", 1)[1] for _, path in binaries()}
    assert len(lines) == 1, lines


@pytest.fixture(scope="module")
def iso():
    i = Isolated("versions")
    yield i
    codes = i.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly: %s; logs in %s" % (bad, i.stack.log_dir)


def test_build_info_metric_and_first_log_line(iso):
    version, commit = project_version(), build_commit()
    for s in SERVICES:
        iso.stack.start(s, s + "-v", settings={"http.listen": "127.0.0.1:0"})
    for s in SERVICES:
        path = iso.stack.log_path(s + "-v")
        [listening] = wait_until(lambda: events(path, "http_listening"), 60, s + " http_listening")
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % listening["port"], timeout=10) as r:
            text = r.read().decode()
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        assert fams["loadledger_build_info"].type == "gauge"
        samples = [(x.labels, x.value) for x in fams["loadledger_build_info"].samples]
        assert samples == [({"version": version, "commit": commit}, 1.0)], (s, samples)
        # the first line the service wrote names its version and commit
        with open(path) as f:
            first = f.readline()
        first_json = log_lines(path)[0]
        assert first.startswith("{") and first_json["event"] == "service_starting", first
        assert (first_json["level"], first_json["service"]) == ("info", s)
        assert (first_json["version"], first_json["commit"]) == (version, commit)
        assert first_json["msg"] == "ll-%s %s (%s) starting" % (s, version, commit)
    for s in SERVICES:
        assert iso.stack.stop(s + "-v") == 0
