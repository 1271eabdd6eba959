/*
 * schema_gate.h - a service's check at start that the ledger's schema is one it knows
 * (schema_version.h has the range and the verdicts; docs/operations.md "Schema versions").
 *
 * The check reads the highest migration number recorded in nifi_ops.schema_migrations over the
 * service's own db.conninfo. While the verdict does not let the service run (too old, too new, no
 * readable history, the database unreachable) the service stays up and applies nothing: it has
 * not joined its consumer group yet, so no offset moves; /readyz answers 503 with the reason
 * (ll_obs_schema), one log line says why (again only when the reason changes), and the check is
 * repeated every LL_SCHEMA_RETRY_MS (LL_SCHEMA_DB_RETRY_MS without a database). This suits a
 * rolling upgrade: a new binary started before `loadctl migrate` waits for it instead of exiting
 * and being restarted in a loop.
 */
#ifndef LL_SCHEMA_GATE_H
#define LL_SCHEMA_GATE_H

#include <signal.h>

#include "ll/config.h"
#include "ll/schema_version.h"

/* How often a waiting service reads the schema version again (ms): a schema it does not accept
 * changes only with a migration; an unreachable database is tried again sooner (a failover, a
 * restart of PostgreSQL). */
#define LL_SCHEMA_RETRY_MS    5000
#define LL_SCHEMA_DB_RETRY_MS 1000
/* The longest wait for the connection and for the version query (ms). */
#define LL_SCHEMA_QUERY_TIMEOUT_MS 5000

/*
 * Reads the ledger's schema version over conninfo (application_name app): *version is the highest
 * migration number recorded (0 when none). Returns 0; or -1 with why (a sentence for an operator,
 * at most whylen bytes) and *too_old = 1 when the history itself is missing or unreadable (a
 * ledger not migrated by a loadctl that grants it, i.e. older than 0010), 0 when the database
 * could not be asked (unreachable, a timeout).
 */
int ll_schema_read_version(const char *conninfo, const char *app, int *version, int *too_old, char *why,
                           size_t whylen);

/*
 * Waits until the ledger's schema lets service run (OK or NEWER_COMPATIBLE, logged as
 * schema_checked, with a notice schema_newer for the latter), reading it every LL_SCHEMA_RETRY_MS;
 * meanwhile /readyz says why not and schema_refused logs it. Returns 0 to go on, 1 when *stop
 * became non-zero first (SIGTERM: exit cleanly).
 */
int ll_schema_gate(const char *service, const ll_config *cfg, volatile sig_atomic_t *stop);

#endif
