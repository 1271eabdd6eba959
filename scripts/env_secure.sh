# scripts/env_secure.sh — the secure mode of scripts/env.sh (LL_SECURE=1): PostgreSQL with TLS and
# scram-sha-256 for every role, Kafka with a SASL_SSL listener (SCRAM-SHA-512) and ACLs, one
# user per service. Sourced by env.sh, not run on its own: it uses env.sh's helpers (log, die,
# as_pg, java_bin) and variables (LL_RUN_DIR, PG_DIR, K_DIR, KAFKA_LIBS, LL_CACHE_DIR, PY,
# REPO_ROOT, LL_TOPIC_PREFIX). See docs/operations.md, "Secure mode".
#
# Everything is made by `env.sh up` in $LL_RUN_DIR/secure and thrown away by `down`: a CA
# (openssl, EC P-256, 30 days), PostgreSQL's server certificate, the broker's certificate in a
# PKCS12 keystore (openssl) and the CA in a PKCS12 truststore (keytool), one random password per
# PostgreSQL role and per Kafka user (files of mode 0600 in secure/passwords/). The servers only
# ever see SCRAM verifiers (scripts/secure/ll_scram.py), never a cleartext password. A run dir is
# secure for its whole life: the mode is taken from the presence of $LL_RUN_DIR/secure.
#
# PostgreSQL: pg_hba has one line, hostssl + scram-sha-256 from 127.0.0.1 for every role (no
# socket, no plain TCP, no trust); clients use sslmode=verify-full with the CA and a passfile.
# Kafka 3.9: SASL_SSL on the client port (SCRAM-SHA-512 only; PLAIN too with a 4.x broker, see
# LL_SECURE_KAFKA_MECHANISM; users admin, ll-registrar, ll-claimer, ll-completion, ll-dispatcher, nifi), the controller listener SSL with client certificates (the broker's own
# certificate, principal CN=broker), StandardAuthorizer, super users admin and CN=broker only,
# the ACLs of config/kafka-acls.conf.

LL_SECURE=${LL_SECURE:-0}
# The SASL mechanism of the librdkafka clients (services, simulator, env.sh's helper). The secure
# mode's broker is Kafka 3.9 (env.sh's LL_KAFKA_VERSION default when secure), so the clients use
# SCRAM-SHA-512 and the listener offers nothing else: librdkafka before 2.6.1 (Debian 12 has
# 2.0.2, also under python3-confluent-kafka) sends a SCRAM client-final-message with a doubled
# nonce (librdkafka #4895), which Kafka 4.x brokers refuse ("invalid credentials") and 3.9 takes.
# With a 4.x broker (LL_KAFKA_VERSION=4.x) the fallback is PLAIN over TLS: the listener then
# offers SCRAM-SHA-512 and PLAIN and the librdkafka clients use PLAIN (the Java ones SCRAM).
if [[ $LL_KAFKA_VERSION == 3.* ]]; then
  LL_SECURE_KAFKA_MECHANISM=${LL_SECURE_KAFKA_MECHANISM:-SCRAM-SHA-512}
else
  LL_SECURE_KAFKA_MECHANISM=${LL_SECURE_KAFKA_MECHANISM:-PLAIN}
fi
SEC_DIR=$LL_RUN_DIR/secure
SEC_PW_DIR=$SEC_DIR/passwords
SEC_PG_ROLES=(postgres ll_registrar ll_claimer ll_completion ll_dispatcher ll_sweeper ll_operator ll_retention)
SEC_KAFKA_USERS=(admin ll-registrar ll-claimer ll-completion ll-dispatcher nifi)
SEC_ACLS_CONF=$REPO_ROOT/config/kafka-acls.conf
[[ -d $SEC_DIR ]] && LL_SECURE=1

# libpq of env.sh's own psql and pg_isready (and of whoever sources the env file): TLS, verified.
if [[ $LL_SECURE == 1 ]]; then
  export PGSSLMODE=verify-full PGSSLROOTCERT=$SEC_DIR/ca.crt PGPASSFILE=$SEC_DIR/pgpass
  export LL_KAFKA_CLIENT_CONFIG=$SEC_DIR/kafka/admin.librdkafka.properties
else
  unset LL_KAFKA_CLIENT_CONFIG  # a secure env file sourced earlier: not for this run dir
fi

sec_pw() { cat "$SEC_PW_DIR/$1"; }

# A run dir keeps the mode it was made with; PgBouncer is not part of the secure mode.
sec_check_mode() {
  if [[ $LL_SECURE == 1 && -f $PG_DATA/PG_VERSION && ! -d $SEC_DIR ]]; then
    die "LL_SECURE=1 but $LL_RUN_DIR was made without it: scripts/env.sh down first"
  fi
  if [[ $LL_SECURE == 1 && $LL_SECURE_KAFKA_MECHANISM != SCRAM-SHA-512 && $LL_SECURE_KAFKA_MECHANISM != PLAIN ]]; then
    die "LL_SECURE_KAFKA_MECHANISM=$LL_SECURE_KAFKA_MECHANISM: SCRAM-SHA-512 or PLAIN"
  fi
  if [[ $LL_SECURE == 1 && $LL_PGBOUNCER == 1 ]]; then
    die "LL_SECURE=1 and LL_PGBOUNCER=1 together are not supported"
  fi
}

# sec_cert NAME CN: an EC key and a certificate signed by the CA, for 127.0.0.1 and localhost.
sec_cert() {
  local d=$SEC_DIR/tls
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$d/$1.key" \
    -out "$d/$1.csr" -subj "/CN=$2" 2>/dev/null
  openssl x509 -req -in "$d/$1.csr" -CA "$SEC_DIR/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 30 -out "$d/$1.crt" -extfile <(printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost' \
      'extendedKeyUsage=serverAuth,clientAuth' 'basicConstraints=CA:FALSE') 2>/dev/null
}

# The CA, the certificates, the stores, the passwords, the pgpass file. Once per run dir.
sec_prepare() {
  [[ -f $SEC_DIR/.complete ]] && return 0
  have openssl || die "openssl not found (scripts/env.sh install)"
  have keytool || die "keytool not found (install default-jdk-headless: scripts/env.sh install)"
  log "secure mode: a throwaway CA, certificates and passwords in $SEC_DIR ..."
  rm -rf "$SEC_DIR"
  mkdir -p "$SEC_DIR/tls" "$SEC_PW_DIR" "$SEC_DIR/kafka"
  chmod 755 "$SEC_DIR"
  chmod 700 "$SEC_DIR/tls" "$SEC_PW_DIR" "$SEC_DIR/kafka"
  local u
  (umask 077; for u in "${SEC_PG_ROLES[@]}" "${SEC_KAFKA_USERS[@]}" keystore; do
    openssl rand -hex 24 >"$SEC_PW_DIR/$u"; done)
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -keyout "$SEC_DIR/tls/ca.key" -out "$SEC_DIR/ca.crt" -subj "/CN=loadledger throwaway CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  chmod 644 "$SEC_DIR/ca.crt"
  sec_cert pg 127.0.0.1
  sec_cert broker broker
  openssl pkcs12 -export -in "$SEC_DIR/tls/broker.crt" -inkey "$SEC_DIR/tls/broker.key" \
    -certfile "$SEC_DIR/ca.crt" -name broker -out "$SEC_DIR/kafka/broker.p12" \
    -passout "file:$SEC_PW_DIR/keystore"
  keytool -importcert -noprompt -alias ca -file "$SEC_DIR/ca.crt" -storetype PKCS12 \
    -keystore "$SEC_DIR/kafka/truststore.p12" -storepass:file "$SEC_PW_DIR/keystore" >/dev/null 2>&1 ||
    die "keytool -importcert failed"
  (umask 077
    for u in "${SEC_PG_ROLES[@]}"; do printf '127.0.0.1:*:*:%s:%s\n' "$u" "$(sec_pw "$u")"; done \
      >"$SEC_DIR/pgpass"
    for u in "${SEC_KAFKA_USERS[@]}"; do sec_librdkafka_props "$u" >"$SEC_DIR/kafka/$u.librdkafka.properties"; done
    sec_java_admin_props >"$SEC_DIR/kafka/admin.java.properties")
  touch "$SEC_DIR/.complete"
}

# The librdkafka settings of Kafka user $1 (Python clients; the services take them as kafka.*).
sec_librdkafka_props() {
  cat <<EOF
security.protocol=SASL_SSL
sasl.mechanisms=$LL_SECURE_KAFKA_MECHANISM
sasl.username=$1
sasl.password=$(sec_pw "$1")
ssl.ca.location=$SEC_DIR/ca.crt
EOF
}

sec_java_admin_props() {
  cat <<EOF
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(sec_pw admin)";
ssl.truststore.type=PKCS12
ssl.truststore.location=$SEC_DIR/kafka/truststore.p12
ssl.truststore.password=$(sec_pw keystore)
EOF
}

# ---------------------------------------------------------------------------------------------
# PostgreSQL

# initdb's extra arguments: the superuser's password (a SCRAM verifier: pwfile is stored as is).
sec_initdb_args() {
  [[ $LL_SECURE == 1 ]] || return 0
  "$PY" "$SCRIPT_DIR/secure/ll_scram.py" pg "$SEC_PW_DIR/postgres" | as_pg tee "$PG_DIR/pwfile" >/dev/null
  printf '%s\n' "--pwfile=$PG_DIR/pwfile"
}

# Lines appended to loadledger.conf: TLS on, the key and certificate, the one-line pg_hba.
sec_pg_conf() {
  [[ $LL_SECURE == 1 ]] || return 0
  local t=$PG_DIR/tls
  as_pg mkdir -p "$t"
  local f
  for f in pg.crt pg.key; do as_pg tee "$t/$f" <"$SEC_DIR/tls/$f" >/dev/null; done
  as_pg chmod 600 "$t/pg.key"
  printf '%s\n' '# the secure mode of scripts/env.sh (env_secure.sh): TLS and SCRAM for every role' \
    'hostssl all all 127.0.0.1/32 scram-sha-256' | as_pg tee "$t/pg_hba.conf" >/dev/null
  cat <<EOF
# secure mode (scripts/env_secure.sh): TLS only, SCRAM only (pg_hba: hostssl + scram-sha-256)
ssl = on
ssl_cert_file = '$t/pg.crt'
ssl_key_file = '$t/pg.key'
ssl_min_protocol_version = 'TLSv1.2'
password_encryption = 'scram-sha-256'
hba_file = '$t/pg_hba.conf'
log_connections = on
EOF
}

# The service roles with their passwords (verifiers), before `loadctl migrate` grants their
# rights (migration 0004 keeps an existing role). ALTER for a role that exists.
sec_pg_roles() {
  [[ $LL_SECURE == 1 ]] || return 0
  local r v sql=""
  for r in "${SEC_PG_ROLES[@]}"; do
    [[ $r == postgres ]] && continue
    v=$("$PY" "$SCRIPT_DIR/secure/ll_scram.py" pg "$SEC_PW_DIR/$r")
    sql+="DO \$\$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$r') THEN
      CREATE ROLE $r LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION; END IF; END \$\$;
      ALTER ROLE $r LOGIN PASSWORD '$v';
"
  done
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(pg_port)" -U postgres -d postgres \
    <<<"$sql" >/dev/null || die "secure mode: setting the roles' passwords failed"
  log "secure mode: PostgreSQL roles ${SEC_PG_ROLES[*]} have their SCRAM passwords"
}

# The conninfo words every service and tool adds in secure mode.
sec_pg_connopts() {
  [[ $LL_SECURE == 1 ]] || return 0
  printf ' sslmode=verify-full sslrootcert=%s passfile=%s' "$SEC_DIR/ca.crt" "$SEC_DIR/pgpass"
}

# ---------------------------------------------------------------------------------------------
# Kafka

# Lines appended to server.properties (later keys win): SASL_SSL, mTLS controller, ACLs.
sec_kafka_conf() {
  [[ $LL_SECURE == 1 ]] || return 0
  local k=$SEC_DIR/kafka ks
  ks=$(sec_pw keystore)
  cat <<EOF

# secure mode (scripts/env_secure.sh): SASL_SSL for clients, SSL with client certificates for
# the controller, StandardAuthorizer; every user but the two super users needs an ACL. SCRAM
# users live in the cluster metadata (kafka-storage format --add-scram); the PLAIN fallback's
# users (a 4.x broker only) in its JAAS line.
listeners=SASL_SSL://127.0.0.1:$1,CONTROLLER://127.0.0.1:$2
advertised.listeners=SASL_SSL://127.0.0.1:$1
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SSL
inter.broker.listener.name=SASL_SSL
sasl.enabled.mechanisms=$(sec_kafka_mechanisms)
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$(sec_pw admin)";
$(sec_plain_jaas)
listener.name.controller.ssl.client.auth=required
ssl.keystore.type=PKCS12
ssl.keystore.location=$k/broker.p12
ssl.keystore.password=$ks
ssl.key.password=$ks
ssl.truststore.type=PKCS12
ssl.truststore.location=$k/truststore.p12
ssl.truststore.password=$ks
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:CN=broker
allow.everyone.if.no.acl.found=false
EOF
}

# The listener's SASL mechanisms: SCRAM-SHA-512 alone, PLAIN too when the clients use PLAIN.
sec_kafka_mechanisms() {
  if [[ $LL_SECURE_KAFKA_MECHANISM == PLAIN ]]; then echo SCRAM-SHA-512,PLAIN; else echo SCRAM-SHA-512; fi
}

# The PLAIN JAAS line (its users: user_<name>="<password>" for every Kafka user), only when the
# listener offers PLAIN; nothing otherwise.
sec_plain_jaas() {
  [[ $LL_SECURE_KAFKA_MECHANISM == PLAIN ]] || return 0
  local u
  printf '%s' 'listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required'
  printf ' username="admin" password="%s"' "$(sec_pw admin)"
  for u in "${SEC_KAFKA_USERS[@]}"; do printf ' user_%s="%s"' "$u" "$(sec_pw "$u")"; done
  printf ';\n'
}

# kafka-storage format's extra arguments: every SCRAM user (salted, no cleartext), one a line.
sec_format_args() {
  [[ $LL_SECURE == 1 ]] || return 0
  local u
  for u in "${SEC_KAFKA_USERS[@]}"; do
    printf -- '--add-scram\nSCRAM-SHA-512=[name=%s,%s]\n' "$u" \
      "$("$PY" "$SCRIPT_DIR/secure/ll_scram.py" kafka "$SEC_PW_DIR/$u")"
  done
}

# The ACLs of config/kafka-acls.conf for this topic prefix, made in one JVM (LlKafkaAcls, compiled
# once into the cache).
sec_kafka_acls() {
  [[ $LL_SECURE == 1 ]] || return 0
  local java src=$SCRIPT_DIR/secure/LlKafkaAcls.java cls stamp
  java=$(java_bin)
  stamp=$(sha256sum <"$src" | cut -c1-16)
  cls=$LL_CACHE_DIR/llkafkaacls-$LL_KAFKA_VERSION-$stamp
  if [[ ! -f $cls/LlKafkaAcls.class ]]; then
    have javac || die "javac not found (install default-jdk-headless: scripts/env.sh install)"
    mkdir -p "$cls.tmp.$$"
    javac -d "$cls.tmp.$$" -cp "$KAFKA_LIBS/*" "$src" || die "javac LlKafkaAcls.java failed"
    mv -T "$cls.tmp.$$" "$cls" 2>/dev/null || rm -rf "$cls.tmp.$$"
  fi
  local u op type pat name
  while read -r u op type pat name; do
    [[ -z $u || $u == \#* ]] && continue
    if [[ $name == =* ]]; then name=${name#=}; else name=$LL_TOPIC_PREFIX$name; fi
    printf 'User:%s %s %s %s %s\n' "$u" "$op" "$type" "$pat" "$name"
  done <"$SEC_ACLS_CONF" >"$SEC_DIR/kafka/acls.txt"
  "$java" -cp "$cls:$KAFKA_LIBS/*" -Dlog4j2.configurationFile="$K_DIR/log4j2.xml" \
    "-Dll.kafka.log.dir=$SEC_DIR/kafka" LlKafkaAcls "$SEC_DIR/kafka/admin.java.properties" \
    "$SEC_DIR/kafka/acls.txt" "127.0.0.1:$(k_port)" 9>&- || die "secure mode: creating the Kafka ACLs failed"
}

# ---------------------------------------------------------------------------------------------
# env file and service configurations

sec_env_lines() {
  [[ $LL_SECURE == 1 ]] || return 0
  cat <<EOF
# Secure mode (LL_SECURE=1): TLS + SCRAM everywhere; users, passwords and ACLs in $SEC_DIR
export LL_SECURE='1'
export LL_SECURE_DIR='$SEC_DIR'
export LL_PG_CONNOPTS='$(sec_pg_connopts)'
export PGSSLMODE='verify-full'
export PGSSLROOTCERT='$SEC_DIR/ca.crt'
export PGPASSFILE='$SEC_DIR/pgpass'
export LL_KAFKA_CLIENT_CONFIG='$SEC_DIR/kafka/nifi.librdkafka.properties'
EOF
}

# The kafka.* lines of service $1's configuration (its own Kafka user ll-$1).
sec_service_kafka_lines() {
  [[ $LL_SECURE == 1 ]] || return 0
  sed 's/^/kafka./; s/=/ = /' "$SEC_DIR/kafka/ll-$1.librdkafka.properties"
}
