#!/usr/bin/env bash
# check_deb.sh SOURCE_DIR BUILD_DIR - the Debian package as an operator meets it (ctest label
# package; docs/operations.md "Installed as a Debian service"):
#   builds loadledger without sanitizers for the prefix /usr in BUILD_DIR and runs cpack -G DEB;
#   unpacks the .deb with dpkg-deb -x into a throwaway root; checks the control fields (package
#   loadledger, the runtime libraries as dependencies, conffiles, maintainer scripts), runs
#   every binary's --help from that root with the system's libraries only, checks that the Avro
#   and SQL schemas are where the binaries look for them, that each /etc/loadledger/<service>.conf
#   holds every key of the service's own table, that systemd-analyze verify accepts the units and
#   `systemd-analyze security --offline=yes` rates each 2.5 ("OK") or better (both fail, naming
#   the Debian package systemd, when systemd-analyze is missing), that a bad configuration
#   (exit 1) is not restarted, that /usr/share/doc/loadledger/copyright is DEP-5 with the
#   Apache-2.0 LICENSE beside it, and that postinst restarts the running services on an upgrade
#   only (run with stub commands under a DPKG_ROOT that looks like a systemd machine).
set -euo pipefail
src=$(cd "$1" && pwd -P)
build=$2
services=(registrar claimer completion dispatcher sweeper)
fail=0
bad() { printf 'check_deb: FAIL: %s\n' "$*" >&2; fail=1; }
say() { printf 'check_deb: %s\n' "$*" >&2; }

cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLL_SANITIZE=OFF -DLL_BUILD_TESTS=OFF \
  -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
rm -f "$build"/loadledger_*.deb
(cd "$build" && cpack -G DEB >/dev/null 2>&1) || { bad "cpack -G DEB failed"; exit 1; }
debs=("$build"/loadledger_*.deb)
[[ -f ${debs[0]} ]] || { bad "cpack made no loadledger_*.deb in $build"; exit 1; }
deb=${debs[0]}
say "package: $deb"

root=$(mktemp -d /tmp/ll-deb-root.XXXXXX)
units=$(mktemp -d /tmp/ll-deb-units.XXXXXX)
trap 'rm -rf "$root" "$units"' EXIT
dpkg-deb -x "$deb" "$root"

# --- control fields
[[ $(dpkg-deb -f "$deb" Package) == loadledger ]] || bad "package name is not loadledger"
depends=$(dpkg-deb -f "$deb" Depends)
for p in librdkafka1 libpq5 libjansson4 libuuid1 libcurl4 libssl3 libncursesw6 libmicrohttpd12 libc6 adduser; do
  [[ ", $depends," == *", $p"[\ ,]* ]] || bad "Depends lacks $p: $depends"
done
# no binary links avro-c (the codec is our own; avro-c is the tests' oracle, docs/design.md §9)
[[ ", $depends," != *", libavro"* ]] || bad "Depends has avro-c, which no binary should link: $depends"
ctl=$(mktemp -d /tmp/ll-deb-ctl.XXXXXX)
dpkg-deb -e "$deb" "$ctl"
for s in postinst prerm postrm; do
  [[ -x $ctl/$s ]] || bad "no executable maintainer script $s"
  sh -n "$ctl/$s" || bad "$s: shell syntax"
done
grep -q 'adduser --system' "$ctl/postinst" || bad "postinst does not create the system user"
# postinst under stubs: what it asks systemctl / deb-systemd-invoke, on an install and an upgrade
fake=$(mktemp -d /tmp/ll-deb-fake.XXXXXX)
mkdir -p "$fake/bin" "$fake/root/run/systemd/system"
for c in systemctl deb-systemd-invoke getent adduser; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/calls"\n' "$c" "$fake" >"$fake/bin/$c"
  chmod +x "$fake/bin/$c"
done
DPKG_ROOT=$fake/root PATH=$fake/bin:$PATH sh "$ctl/postinst" configure || bad "postinst configure: exit $?"
grep -q 'try-restart' "$fake/calls" && bad "postinst restarts services on a first installation: $(cat "$fake/calls")"
grep -qx 'systemctl daemon-reload' "$fake/calls" || bad "postinst configure: no daemon-reload"
: >"$fake/calls"
DPKG_ROOT=$fake/root PATH=$fake/bin:$PATH sh "$ctl/postinst" configure 0.0.9 || bad "postinst upgrade: exit $?"
for svc in "${services[@]}"; do
  grep -qx "deb-systemd-invoke try-restart loadledger-$svc.service" "$fake/calls" ||
    bad "postinst configure 0.0.9 (upgrade) does not try-restart loadledger-$svc: $(tr '\n' ';' <"$fake/calls")"
done
[[ $(head -n1 "$fake/calls") == 'getent passwd loadledger' && $(sed -n 2p "$fake/calls") == 'systemctl daemon-reload' ]] ||
  bad "postinst upgrade: daemon-reload is not before the restarts: $(tr '\n' ';' <"$fake/calls")"
rm -rf "$fake"
for svc in "${services[@]}"; do
  grep -qx "/etc/loadledger/$svc.conf" "$ctl/conffiles" || bad "/etc/loadledger/$svc.conf is not a conffile"
done
rm -rf "$ctl"

# --- binaries: --help from the unpacked root, system libraries only
for b in "${services[@]/#/ll-}" loadctl; do
  exe=$root/usr/bin/$b
  [[ -x $exe ]] || { bad "/usr/bin/$b missing"; continue; }
  if env -u LD_LIBRARY_PATH ldd "$exe" | grep -q 'not found'; then bad "$b: a library is not found"; fi
  env -u LD_LIBRARY_PATH "$exe" --help >"$units/$b.help" 2>&1 || bad "$b --help exit $?"
  [[ -s $units/$b.help ]] || bad "$b --help printed nothing"
  # --version names the package's version (both from project(VERSION) in CMakeLists.txt)
  ver=$(env -u LD_LIBRARY_PATH "$exe" --version 2>&1) || bad "$b --version exit $?"
  [[ $ver =~ ^$b\ $(dpkg-deb -f "$deb" Version)\ \([A-Za-z0-9._+-]+\)$ ]] ||
    bad "$b --version: '$ver' is not '$b $(dpkg-deb -f "$deb" Version) (<commit>)'"
done

# --- schemas where the binaries look: the installed path each --help names, inside the root
expected_avro=$(cd "$src/schemas/avro" && ls ./*.avsc | sort)
expected_sql=$(cd "$src/schemas/sql" && ls ./*.sql | sort)
for svc in "${services[@]}"; do
  dir=$(sed -n 's/.*else \(\/[^ ]*\) if present.*/\1/p' "$units/ll-$svc.help")
  [[ $dir == /usr/share/loadledger/schemas/avro ]] || bad "ll-$svc looks for installed schemas in '$dir'"
  [[ -f $root$dir/RunRequest.avsc ]] || bad "ll-$svc: $dir/RunRequest.avsc (its lookup file) not in the package"
  [[ $(cd "$root$dir" 2>/dev/null && ls ./*.avsc | sort) == "$expected_avro" ]] ||
    bad "ll-$svc: the package's $dir differs from schemas/avro"
done
grep -aq '/usr/share/loadledger/schemas/sql' "$root/usr/bin/loadctl" ||
  bad "loadctl migrate does not look in /usr/share/loadledger/schemas/sql"
[[ $(cd "$root/usr/share/loadledger/schemas/sql" && ls ./*.sql | sort) == "$expected_sql" ]] ||
  bad "the package's schemas/sql differs from schemas/sql"

# --- configuration: every key of the service's table, in the example and in /etc
for svc in "${services[@]}"; do
  keys=$(env -u LD_LIBRARY_PATH "$root/usr/bin/ll-$svc" --config-keys | sed -n 's/^#\([a-z_.]*\) =.*/\1/p')
  [[ -n $keys ]] || bad "ll-$svc --config-keys lists no key"
  for k in $keys; do
    grep -qF -- "$k" "$units/ll-$svc.help" || bad "key $k of --config-keys is not in ll-$svc --help"
  done
  for f in "$root/etc/loadledger/$svc.conf" "$root/usr/share/loadledger/examples/$svc.conf"; do
    [[ -f $f ]] || { bad "$f missing"; continue; }
    for k in $keys; do
      grep -q "^#\?$k =" "$f" || bad "${f#"$root"} lacks key $k"
    done
  done
  grep -q "^db.conninfo = .*user=ll_$svc\$" "$root/etc/loadledger/$svc.conf" ||
    bad "/etc/loadledger/$svc.conf does not set db.conninfo for ll_$svc"
done

# --- copyright and licence (Debian policy §12.5; DEP-5)
doc=$root/usr/share/doc/loadledger
if [[ -f $doc/copyright ]]; then
  [[ $(head -n1 "$doc/copyright") == 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ]] ||
    bad "/usr/share/doc/loadledger/copyright is not DEP-5 (no Format: line first)"
  grep -qx 'License: Apache-2.0' "$doc/copyright" || bad "copyright names no Apache-2.0 licence"
  grep -qx 'Files: \*' "$doc/copyright" || bad "copyright has no 'Files: *' stanza"
else
  bad "/usr/share/doc/loadledger/copyright missing"
fi
cmp -s "$doc/LICENSE" "$src/LICENSE" || bad "/usr/share/doc/loadledger/LICENSE missing or not the source's LICENSE"
grep -q 'Apache License' "$src/LICENSE" && grep -q 'APPENDIX: How to apply the Apache License' "$src/LICENSE" ||
  bad "LICENSE is not the whole Apache License 2.0 text"

# --- systemd units
for svc in "${services[@]}"; do
  u=$root/usr/lib/systemd/system/loadledger-$svc.service
  [[ -f $u ]] || { bad "unit loadledger-$svc.service missing"; continue; }
  grep -qx "ExecStart=/usr/bin/ll-$svc --config /etc/loadledger/$svc.conf" "$u" || bad "$svc: ExecStart"
  grep -qx 'Restart=on-failure' "$u" || bad "$svc: Restart=on-failure"
  grep -qx 'User=loadledger' "$u" || bad "$svc: User=loadledger"
  grep -qx 'RestartPreventExitStatus=1' "$u" || bad "$svc: a bad configuration (exit 1) is restarted"
  # verify checks that ExecStart's binary is executable: point it into the unpacked root
  sed "s|^ExecStart=/|ExecStart=$root/|" "$u" >"$units/loadledger-$svc.service"
done
if command -v systemd-analyze >/dev/null 2>&1; then
  # it exits 0 on a line it ignores (a misspelt value): any output is a failure too
  if ! out=$(systemd-analyze verify --man=no "$units"/loadledger-*.service 2>&1) || [[ -n $out ]]; then
    bad "systemd-analyze verify: $out"
  else
    say "systemd-analyze verify: ${#services[@]} units accepted"
  fi
  # the exposure score of each unit (0 best, 10 worst): 2.5 or less is systemd's "OK"
  for svc in "${services[@]}"; do
    u=$units/loadledger-$svc.service
    [[ -f $u ]] || continue
    out=$(systemd-analyze security --offline=yes --no-pager "$u" 2>&1) || true
    score=$(sed -n 's/^.*Overall exposure level for [^:]*: \([0-9.]*\) .*$/\1/p' <<<"$out")
    if [[ -z $score ]]; then
      bad "systemd-analyze security $svc: no score: $out"
    elif awk -v s="$score" 'BEGIN { exit !(s > 2.5) }'; then
      bad "loadledger-$svc.service: systemd-analyze security rates it $score (above 2.5, OK): $(grep '✗' <<<"$out" | tr -s ' ' | head -n 20)"
    else
      say "loadledger-$svc.service: exposure $score (≤ 2.5, OK)"
    fi
  done
else
  bad "systemd-analyze not installed: install the Debian package systemd (scripts/env.sh install does)"
fi

((fail == 0)) && say "ok: $(basename "$deb")"
exit $fail
