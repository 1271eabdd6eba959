/*
 * registrar.h - run admission: run requests (docs/contract.md §5.1) and manifests (§5.2).
 */
#ifndef REGISTRAR_H
#define REGISTRAR_H

#include "ll/kloop.h"

/* Applies one run request (topic run-requests). See run_request.c. */
ll_apply registrar_apply_run_request(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);
/* Applies one manifest (topic manifests). See manifest.c. */
ll_apply registrar_apply_manifest(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);

#endif
