#!/bin/sh
# make-conf.sh BINARY SERVICE EXAMPLE ETC: writes the two configuration files of one service from
# its own key table (BINARY --config-keys): EXAMPLE, every key commented out with its default
# and meaning (share/loadledger/examples/SERVICE.conf), and ETC, the same below the keys a fresh
# install must set (/etc/loadledger/SERVICE.conf, a conffile of the Debian package).
set -eu
bin=$1 svc=$2 example=$3 etc=$4
# --config-keys exits before any connection; sanitizer builds must not fail on its exit.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$bin" --config-keys >"$example.new"
mv -f "$example.new" "$example"
{
  echo "# /etc/loadledger/$svc.conf - configuration of ll-$svc (systemd: loadledger-$svc.service)."
  echo "# Set the addresses below, then: systemctl enable --now loadledger-$svc"
  echo "# The role ll_$svc is created by: loadctl --db <migration conninfo> migrate"
  echo "db.conninfo = host=localhost port=5432 dbname=loadledger user=ll_$svc"
  if [ "$svc" != sweeper ]; then
    echo "kafka.bootstrap.servers = localhost:9092"
  fi
  echo
  cat "$example"
} >"$etc.new"
mv -f "$etc.new" "$etc"
