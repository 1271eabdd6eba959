#!/usr/bin/python3
"""SCRAM credentials for scripts/env_secure.sh, computed here so that a cleartext password never
reaches a server, a command line or a server log (RFC 5802 / RFC 7677).

  ll_scram.py pg FILE     PostgreSQL's SCRAM-SHA-256 verifier of the password in FILE (one line),
                          for CREATE/ALTER ROLE ... PASSWORD '<verifier>' (stored as is)
  ll_scram.py kafka FILE  the SCRAM-SHA-512 entry of kafka-storage format --add-scram:
                          iterations=8192,salt="<b64>",saltedpassword="<b64>"

The password is read from a file (mode 0600), never from argv. Exit 0, or 2 on usage.
"""
import base64
import hashlib
import hmac
import os
import sys


def b64(b):
    return base64.b64encode(b).decode()


def pg_verifier(pw):
    """SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey> (PostgreSQL's stored format)."""
    salt, it = os.urandom(16), 4096
    salted = hashlib.pbkdf2_hmac("sha256", pw, salt, it)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    return "SCRAM-SHA-256$%d:%s$%s:%s" % (it, b64(salt), b64(hashlib.sha256(client_key).digest()),
                                         b64(server_key))


def kafka_salted(pw):
    """The salted form kafka-storage's --add-scram takes for SCRAM-SHA-512."""
    salt, it = os.urandom(16), 8192
    salted = hashlib.pbkdf2_hmac("sha512", pw, salt, it)
    return 'iterations=%d,salt="%s",saltedpassword="%s"' % (it, b64(salt), b64(salted))


def main(argv):
    if len(argv) != 3 or argv[1] not in ("pg", "kafka"):
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[2], "rb") as f:
        pw = f.read().strip()
    print(pg_verifier(pw) if argv[1] == "pg" else kafka_salted(pw))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
