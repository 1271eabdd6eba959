#!/usr/bin/env bash
# check_deb.sh SOURCE_DIR BUILD_DIR - the Debian package as an operator meets it (ctest label
# package; docs/operations.md "Installed as a Debian service"):
#   builds loadledger without sanitizers for the prefix /usr in BUILD_DIR and runs cpack -G DEB;
#   unpacks the .deb with dpkg-deb -x into a throwaway root; checks the control fields (package
#   loadledger, the runtime libraries as dependencies, conffiles, maintainer scripts), runs
#   every binary's --help from that root with the system's libraries only, checks that the Avro
#   and SQL schemas are where the binaries look for them, that each /etc/loadledger/<service>.conf
#   holds every key of the service's own table, and that systemd-analyze verify accepts the
#   units (skipped with a message when systemd-analyze is missing).
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

# --- systemd units
for svc in "${services[@]}"; do
  u=$root/usr/lib/systemd/system/loadledger-$svc.service
  [[ -f $u ]] || { bad "unit loadledger-$svc.service missing"; continue; }
  grep -qx "ExecStart=/usr/bin/ll-$svc --config /etc/loadledger/$svc.conf" "$u" || bad "$svc: ExecStart"
  grep -qx 'Restart=on-failure' "$u" || bad "$svc: Restart=on-failure"
  grep -qx 'User=loadledger' "$u" || bad "$svc: User=loadledger"
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
else
  say "SKIP systemd-analyze verify: systemd-analyze not installed"
fi

((fail == 0)) && say "ok: $(basename "$deb")"
exit $fail
