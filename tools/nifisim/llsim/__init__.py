"""llsim: a stand-in for the NiFi side of loadledger, for the demo and the integration tests.

It writes Avro with an independent implementation (Debian's python3-avro), in the four value
framings NiFi 2.x produces, talks to the real Kafka broker with confluent_kafka, starts the
loadledger services against the broker and PostgreSQL that scripts/env.sh started, and reads
the ledger with psycopg2.
"""
