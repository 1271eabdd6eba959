-- 0008_least_privilege: the UPDATE rights on the outbox and the run row narrowed to the columns
-- each writer sets (issue 9 §7; the per-role deny tests are tests/integration/test_roles.py).
-- Revoking a table's UPDATE revokes its column grants too, so each role starts from nothing.
--
-- - ll_claimer only ACKs the reissue dispatches of a partition it grants (contract §3.4): it
--   cannot requeue, retarget or create a command.
-- - ll_dispatcher leases, marks SENT, backs off and marks DEAD (contract §5.11): it cannot change
--   what a dispatch is (run, type, partition) nor ACK it.
-- - ll_operator (loadctl) changes a run only as resolve-publish-unknown and cleanup do, and a
--   dispatch only as resend does: not a run's identity, bounds, counts or snapshot, and never a
--   partition, a file, a token or a validation row (it had no right to those before either).
-- FOR UPDATE (loadctl's run lock, the dispatcher's lease) needs UPDATE on one column: kept.

REVOKE UPDATE ON nifi_ops.load_dispatch FROM ll_claimer;
GRANT UPDATE (status, acked_at) ON nifi_ops.load_dispatch TO ll_claimer;

REVOKE UPDATE ON nifi_ops.load_dispatch FROM ll_dispatcher;
GRANT UPDATE (status, attempt_count, next_attempt_at, sent_at, last_http_status, last_error)
    ON nifi_ops.load_dispatch TO ll_dispatcher;

REVOKE UPDATE ON nifi_ops.load_run FROM ll_operator;
GRANT UPDATE (status, version_no, heartbeat_at, published_at, completed_at, error_stage,
              error_code, error_message, cleaned_at)
    ON nifi_ops.load_run TO ll_operator;
REVOKE UPDATE ON nifi_ops.load_dispatch FROM ll_operator;
GRANT UPDATE (status, attempt_count, next_attempt_at, last_error)
    ON nifi_ops.load_dispatch TO ll_operator;
