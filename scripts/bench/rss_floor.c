/*
 * rss_floor.c - the memory floor of a process built on this machine's librdkafka and libpq
 * (issue 8, the RSS target): what a service costs before it does any work of its own.
 *
 *   ll-rss-floor BOOTSTRAP CONNINFO TOPIC SECONDS
 *
 * Connects to PostgreSQL, creates a transactional producer (init_transactions) and a
 * read_committed consumer subscribed to TOPIC in a throwaway group — what every loadledger
 * service does at start — polls for SECONDS, then prints one line:
 *   VmHWM <KiB> RssFile <KiB> RssAnon <KiB>
 * read from /proc/self/status (KiB, as the kernel gives them). Exit 0, or 1 with a message on
 * stderr when a connection fails. Built and run by scripts/bench.sh (tools/nifisim/bench.py,
 * phase "floor"); not part of the product.
 */
#include <librdkafka/rdkafka.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Prints the three /proc/self/status fields of the figure. */
static void print_status(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long hwm = -1, file = -1, anon = -1;
    while (f && fgets(line, sizeof line, f)) {
        (void)(sscanf(line, "VmHWM: %ld", &hwm) || sscanf(line, "RssFile: %ld", &file) ||
               sscanf(line, "RssAnon: %ld", &anon));
    }
    if (f)
        fclose(f);
    printf("VmHWM %ld RssFile %ld RssAnon %ld\n", hwm, file, anon);
}

/* A client of `type` with the given properties (NULL-terminated pairs); exits on error. */
static rd_kafka_t *client(rd_kafka_type_t type, const char *const *kv)
{
    char err[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    for (; kv[0]; kv += 2) {
        if (rd_kafka_conf_set(c, kv[0], kv[1], err, sizeof err) != RD_KAFKA_CONF_OK) {
            fprintf(stderr, "rss_floor: %s\n", err);
            exit(1);
        }
    }
    rd_kafka_t *rk = rd_kafka_new(type, c, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "rss_floor: %s\n", err);
        exit(1);
    }
    return rk;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: ll-rss-floor BOOTSTRAP CONNINFO TOPIC SECONDS\n");
        return 2;
    }
    PGconn *pg = PQconnectdb(argv[2]);
    if (PQstatus(pg) != CONNECTION_OK) {
        fprintf(stderr, "rss_floor: %s", PQerrorMessage(pg));
        return 1;
    }
    PQclear(PQexec(pg, "SELECT 1"));
    char group[64], txid[64];
    snprintf(group, sizeof group, "ll-rss-floor-%ld", (long)time(NULL));
    snprintf(txid, sizeof txid, "ll-rss-floor-%ld", (long)time(NULL));
    const char *pkv[] = {"bootstrap.servers", argv[1], "transactional.id", txid, "log_level", "3", NULL};
    rd_kafka_t *prod = client(RD_KAFKA_PRODUCER, pkv);
    rd_kafka_error_t *e = rd_kafka_init_transactions(prod, 30000);
    if (e) {
        fprintf(stderr, "rss_floor: init_transactions: %s\n", rd_kafka_error_string(e));
        return 1;
    }
    const char *ckv[] = {"bootstrap.servers",
                         argv[1],
                         "group.id",
                         group,
                         "isolation.level",
                         "read_committed",
                         "enable.auto.commit",
                         "false",
                         "log_level",
                         "3",
                         NULL};
    rd_kafka_t *cons = client(RD_KAFKA_CONSUMER, ckv);
    rd_kafka_poll_set_consumer(cons);
    rd_kafka_topic_partition_list_t *t = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(t, argv[3], RD_KAFKA_PARTITION_UA);
    if (rd_kafka_subscribe(cons, t) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr, "rss_floor: subscribe failed\n");
        return 1;
    }
    rd_kafka_topic_partition_list_destroy(t);
    time_t end = time(NULL) + atoi(argv[4]);
    while (time(NULL) < end) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(cons, 200);
        if (m)
            rd_kafka_message_destroy(m);
        rd_kafka_poll(prod, 0);
    }
    print_status();
    rd_kafka_consumer_close(cons);
    rd_kafka_destroy(cons);
    rd_kafka_destroy(prod);
    PQfinish(pg);
    return 0;
}
