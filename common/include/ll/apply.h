/*
 * apply.h - the one place a database result becomes an apply decision (docs/design.md §3, the decision
 * table).
 *
 * The convention of the services: helpers that read or write the ledger return the database
 * result (ll_db_rc: LL_DB_OK to go on, LL_DB_ROLLBACK when they answered a business rejection in
 * the reply, LL_DB_ERROR / LL_DB_UNAVAILABLE with db->err after a failed statement); only a
 * service's entry point (an ll_apply_fn) returns an ll_apply, through ll_apply_of_db.
 */
#ifndef LL_APPLY_H
#define LL_APPLY_H

#include "ll/db.h"
#include "ll/kloop.h"

/*
 * The apply decision of a helper's database result: LL_DB_OK -> LL_APPLY_COMMIT, LL_DB_ROLLBACK ->
 * LL_APPLY_ROLLBACK, LL_DB_ERROR and LL_DB_UNAVAILABLE (and anything else) -> LL_APPLY_DB (the loop
 * reads db->err). Pure.
 */
ll_apply ll_apply_of_db(ll_db_rc rc);

#endif
