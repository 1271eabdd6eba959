/*
 * protocol.pml - the loadledger protocol as the code implements it, for Spin (issue 11).
 *
 * One run, 2 partitions of 2 chunks, 2 workers (either can become a zombie: the sweeper may take
 * its RUNNING partition for stale at any moment, and the paused worker then resumes), the claimer,
 * the completion service (chunks; validation starts), the sweeper (REISSUE mode, max attempts,
 * ack timeout, run deadline), the dispatcher (outbox) and NiFi's validation starter.
 *
 * Kafka: every topic is keyed by the run id, so one run's events sit on one Kafka partition, in
 * order: each topic is an append-only log (an array and its length) with a consumer's committed
 * offset. A Promela channel forgets what it delivered; a Kafka partition does not, and after a
 * crash the consumer reads again from the committed offset, so logs are arrays here.
 * A consumer (common/src/core/kloop_batch.c, batches of one message here) applies a message in
 * one database transaction (one atomic step), then either commits the Kafka transaction (its
 * reply becomes visible to read_committed readers and the offset moves, one atomic step) or
 * crashes in between: the Kafka transaction is aborted (the reply is lost), the database keeps
 * what it committed, and the message is read again from the committed offset. The completion's
 * chunk consumer may apply up to STAGED_MAX messages before one Kafka transaction commits their
 * replies (kloop_commit.c: a database commit does not wait for the Kafka commit).
 *
 * Database: every transaction of a run takes the run row first (ll_run_lock, SELECT ... FOR
 * UPDATE), so transactions of one run are serial: each is one atomic step. The dispatcher's
 * lease and settle touch only dispatch rows (FOR UPDATE SKIP LOCKED / a conditional UPDATE):
 * one atomic step each.
 *
 * Mutants (-DMUTANT_x), each must be rejected by Spin (tests/model/check.sh):
 *   CLAIM_NO_HISTORY     claimer without the superseded-token check (load_claim_token)   -> I4
 *   CHUNK_NO_TOKEN       chunk report accepted without the claim-token check            -> I4
 *   DEADLINE_NO_STATUS   sweeper's run deadline without its status condition            -> I1
 *   OUTBOX_AFTER_COMMIT  VALIDATE_RUN row written after the completion transaction      -> I2
 *   VSTART_NO_STATUS     validation-start CAS without status = 'EXTRACTED_VALIDATED'    -> I3
 *   SWEEP_ANY_STATUS     sweeper reissues a partition whatever its status               -> I5
 *   REPLY_OUTSIDE_TX     replies produced outside the Kafka transaction                  -> I6
 *   OFFSET_BEFORE_DB     offset committed before the database transaction (liveness)    -> L
 */

#define NP 2         /* partitions */
#define NC 2         /* chunks per partition */
#define NT 9         /* claim tokens 1..8; 0 = NULL */
#ifndef MAX_ATT
#define MAX_ATT 2    /* sweeper: recovery.max_attempts */
#endif
#ifndef STALE_MAX
#define STALE_MAX 2  /* how often the sweeper may find a RUNNING partition stale */
#endif
#ifndef STAGED_MAX
#define STAGED_MAX 2 /* chunks applied before one Kafka commit of their replies (kloop_commit.c) */
#endif
#ifndef CRASH_MAX
#define CRASH_MAX 2  /* consumer crashes (any consumer) between database and Kafka commit */
#endif
#ifndef DCRASH_MAX
#define DCRASH_MAX 1 /* dispatcher crashes after publish, before SENT */
#endif
#ifndef REQUEUE_MAX
#define REQUEUE_MAX 1 /* ack timeouts (sweeper rule 3) */
#endif
#ifndef DISP_MAX
#define DISP_MAX 4   /* dispatch.max_attempts */
#endif
#ifndef RESEND_MAX
#define RESEND_MAX 1 /* validation starter: an ACK whose answer was lost, sent again */
#endif
#ifndef DEADLINE_MAX
#define DEADLINE_MAX 1 /* the run deadline (sweeper rule 2) may pass */
#endif
#define NR 2 /* REISSUE_PARTITION rows: one per reissue (STALE_MAX <= 2) */
#define MAXCL 10
#define MAXCH 12
#define MAXVS 8
#define MAXRC 8

/* run status */
#define EXTRACTING 1
#define EXTRACTED_VALIDATED 2
#define STAGE_VALIDATING 3
#define TIMED_OUT 4
/* partition status */
#define PENDING 1
#define RUNNING 2
#define RETRY 3
#define SUCCESS 4
#define P_TIMED_OUT 5
/* file status */
#define F_NONE 0
#define WRITTEN 1
#define F_FAILED 2
/* dispatch status */
#define D_NONE 0
#define D_PENDING 1
#define D_SENT 2
#define D_ACKED 3
#define D_DEAD 4
/* claim decision (claim-decisions, as a read_committed reader sees it) */
#define CLAIMED 1
#define REFUSED 2

/* ---- the ledger (PostgreSQL) ---- */
byte run_st = EXTRACTING;
byte part_st[NP], part_tok[NP], part_att[NP], part_files[NP];
byte file_st[NP * NC], file_tok[NP * NC]; /* a file's content is the token of the attempt that wrote it */
byte tok_part[NT];                        /* load_claim_token: partition + 1 a token was granted for */
byte vd_st, vd_att;                       /* the VALIDATE_RUN dispatch row */
bool vd_leased;
byte rd_st[NR], rd_part[NR], rd_att[NR]; /* REISSUE_PARTITION rows */
bool rd_leased[NR];
byte nrd;

/* ---- Kafka ---- */
byte cl[MAXCL], cl_len, cl_com;   /* partition-claims: token * 2 + partition; claimer's offset */
byte dec[NT];                     /* claim-decisions seen by the worker holding the token */
byte ch[MAXCH], ch_len, ch_com;   /* chunks: (token * 2 + partition) * 2 + chunk */
byte ch_app;                      /* completion: next chunk to apply (ch_com..ch_app-1 staged) */
byte vs_len, vs_com;              /* validation-starts (all name the one VALIDATE_RUN dispatch) */
byte vc_len, vc_pos;              /* validate-run-commands; the starter's position */
byte rc[MAXRC], rc_len, rc_pos;   /* reissue-partition-commands; the workers' group position */
byte crashes;                     /* consumer crashes between database and Kafka commit */

/* ---- ghosts (what the invariants count) ---- */
byte decisions;      /* I1: times the run left EXTRACTING */
byte v_rows;         /* I2: VALIDATE_RUN rows */
byte sv_wins;        /* I3: entries into STAGE_VALIDATING (validation-start CAS won) */
bool superseded[NT]; /* I4: tokens the sweeper took a partition from */
byte snap[NP * NC];  /* I5: a partition's files when it became SUCCESS */
bool was_success[NP];
byte cl_ans[MAXCL], ch_ans[MAXCH], vs_ans[MAXVS]; /* I6: committed answers per input offset */
byte next_tok, stale_used, requeue_used, dcrash_used, resend_used, deadline_used;

#define FINAL (run_st == STAGE_VALIDATING || run_st == TIMED_OUT)

/* The safety invariants I1-I5 (I6 is asserted where a reply is committed, and at rest). */
#define I1 (decisions <= 1)
#define I2 ((run_st != EXTRACTED_VALIDATED && run_st != STAGE_VALIDATING) || v_rows == 1)
#define I2b (v_rows <= 1)
#define I3 (sv_wins <= 1)
#define I4 ((part_tok[0] == 0 || !superseded[part_tok[0]]) && (part_tok[1] == 0 || !superseded[part_tok[1]]))
#define I5P(p) (!was_success[p] || \
    (file_st[p * NC] == WRITTEN && file_tok[p * NC] == snap[p * NC] && \
     file_st[p * NC + 1] == WRITTEN && file_tok[p * NC + 1] == snap[p * NC + 1]))
#define I5 (I5P(0) && I5P(1))

/* checked at the end of every step that writes the ledger (the only steps that can break them) */
#define CHECK assert(I1); assert(I2); assert(I2b); assert(I3); assert(I4); assert(I5)


inline reissue_ack(p) {
    /* claim_ack_reissue: a new claim of a RETRY partition ACKs its reissue dispatches */
    for (k : 0 .. NR - 1) {
        if
        :: k < nrd && rd_part[k] == p && rd_st[k] != D_ACKED -> rd_st[k] = D_ACKED
        :: else -> skip
        fi
    }
}

/* services/claimer/partition_claim.c (ll_claim_decide + the token history), one transaction */
inline apply_claim(p, t, r) {
    if
    :: run_st != EXTRACTING -> r = REFUSED                                    /* RUN_STATUS_MISMATCH */
    :: run_st == EXTRACTING && part_st[p] == RUNNING && part_tok[p] == t -> r = CLAIMED /* REPLAY */
    :: run_st == EXTRACTING && !(part_st[p] == RUNNING && part_tok[p] == t) &&
       part_st[p] != PENDING && part_st[p] != RETRY -> r = REFUSED           /* CLAIM/PARTITION_STATUS_MISMATCH */
    :: run_st == EXTRACTING && (part_st[p] == PENDING || part_st[p] == RETRY) ->
#ifndef MUTANT_CLAIM_NO_HISTORY
        if
        :: tok_part[t] != 0 -> r = REFUSED                                   /* superseded: CLAIM_MISMATCH */
        :: else ->
#else
        if
        :: true ->
#endif
            /* claim_grant ... WHERE status IN ('PENDING','RETRY') */
            assert(!superseded[t]); /* I4: a superseded token never owns a partition again */
            if
            :: part_st[p] == RETRY -> reissue_ack(p)
            :: else -> skip
            fi;
            part_st[p] = RUNNING; part_tok[p] = t; part_att[p]++; tok_part[t] = p + 1;
            r = CLAIMED
        fi
    fi
}

/* services/completion/chunk_report.c + ownership.c + ledger.c (gate, completion CAS, outbox) */
inline apply_chunk(p, c, t) {
    idx = p * NC + c;
#ifndef MUTANT_CHUNK_NO_TOKEN
    if
    :: part_tok[p] == t -> skip                                   /* OWN_MATCH */
    :: part_tok[p] != t && tok_part[t] == p + 1 -> goto answered  /* OWN_SUPERSEDED: CLAIM_MISMATCH */
    :: part_tok[p] != t && tok_part[t] != p + 1 ->
        /* OWN_NOT_YET cannot happen: a worker reports only after its grant was committed */
        assert(!(run_st == EXTRACTING && (part_st[p] == PENDING || part_st[p] == RETRY)));
        goto answered                                            /* OWN_MISMATCH */
    fi;
#endif
    /* ST_RECORD_FILE: may write unless the partition is SUCCESS; an identical report writes nothing */
    if
    :: part_st[p] != SUCCESS && (file_st[idx] != WRITTEN || file_tok[idx] != t) ->
        assert(!superseded[t]); /* I4: no write by a superseded token accepted */
        if
        :: file_st[idx] != WRITTEN -> part_files[p]++
        :: else -> skip
        fi;
        file_st[idx] = WRITTEN; file_tok[idx] = t
    :: else -> skip /* REPLAY, or CHUNK_CONFLICT on a SUCCESS partition */
    fi;
    /* ll_chunk_gate: run EXTRACTING, partition RUNNING, every chunk there */
    if
    :: run_st == EXTRACTING && part_st[p] == RUNNING && part_files[p] >= NC ->
        /* chunk_partition_success ... WHERE status = 'RUNNING' AND claim_token = $3 */
        if
        :: part_tok[p] == t ->
            part_st[p] = SUCCESS; was_success[p] = true;
            for (k : 0 .. NC - 1) { snap[p * NC + k] = file_tok[p * NC + k] }
        :: else -> skip
        fi;
        /* ledger_complete_extract: counted freshly, WHERE r.status = 'EXTRACTING' */
        if
        :: run_st == EXTRACTING && part_st[0] == SUCCESS && part_st[1] == SUCCESS ->
            run_st = EXTRACTED_VALIDATED; decisions++;
#ifndef MUTANT_OUTBOX_AFTER_COMMIT
            /* ledger_enqueue_validate ... ON CONFLICT DO NOTHING, same transaction */
            if
            :: vd_st == D_NONE -> vd_st = D_PENDING; v_rows++
            :: else -> skip
            fi
#else
            enqueue_later = true
#endif
        :: else -> skip
        fi
    :: else -> skip
    fi;
answered:
    skip
}

/* services/completion/validation_start.c: ACK, then the CAS EXTRACTED_VALIDATED -> STAGE_VALIDATING */
inline apply_vstart() {
    assert(vd_st != D_NONE); /* the starter acts only on a command: never DISPATCH_MISMATCH */
    vd_st = D_ACKED;
#ifndef MUTANT_VSTART_NO_STATUS
    if
    :: run_st == EXTRACTED_VALIDATED -> run_st = STAGE_VALIDATING; sv_wins++
    :: else -> skip /* the winner's replay: started=true from load_validation_start; others false */
    fi
#else
    run_st = STAGE_VALIDATING; sv_wins++
#endif
}

/* NiFi PG-20: a worker takes a work order (its partition from the manifest dispatch, then the
 * reissue commands of the other worker's partition: the node that stalled is not the one that
 * takes its reissue), claims with a fresh token, and reports its chunks once the claim is
 * granted. Between any two steps it may pause for as long as it likes (the zombie). */
proctype worker(byte first) {
    byte p = first, t;
    goto claim;
end_idle:
    do
    :: atomic { rc_pos < rc_len && rc[rc_pos] != first -> p = rc[rc_pos]; rc_pos++ }
claim:
        atomic {
            if
            :: next_tok < NT - 1 -> next_tok++; t = next_tok; cl[cl_len] = t * 2 + p; cl_len++
            :: else -> t = 0 /* out of tokens (bounded model): the order is dropped */
            fi
        }
        if
        :: t != 0 ->
            dec[t] != 0; /* read_committed: the claim decision */
            if
            :: dec[t] == CLAIMED ->
                atomic { ch[ch_len] = (t * 2 + p) * 2 + 0; ch_len++ };
                atomic { ch[ch_len] = (t * 2 + p) * 2 + 1; ch_len++; p = 0; t = 0 }
            :: else -> skip
            fi
        :: else -> skip
        fi;
        p = 0; t = 0
    od
}

/* ll-claimer on partition-claims. The database commit and the Kafka commit are one step unless
 * the consumer crashes between them: nothing else reads the reply or the offset in between, so
 * the interleavings a separate step would add are equivalent ones. */
active proctype claimer() {
    byte m, p, t, r, k;
end_idle:
    do
    :: atomic { cl_com < cl_len -> m = cl[cl_com]; t = m / 2; p = m % 2; apply_claim(p, t, r);
#ifdef MUTANT_REPLY_OUTSIDE_TX
                cl_ans[cl_com]++; assert(cl_ans[cl_com] == 1);
#endif
                if
                :: /* Kafka commit: reply and offset in one transaction */
#ifndef MUTANT_REPLY_OUTSIDE_TX
                    cl_ans[cl_com]++; assert(cl_ans[cl_com] == 1); /* I6 */
#endif
                    if
                    :: dec[t] == 0 -> dec[t] = r
                    :: else -> skip
                    fi;
                    cl_com++
                :: crashes < CRASH_MAX -> crashes++ /* aborted: read again from cl_com */
                fi;
                m = 0; p = 0; t = 0; r = 0; k = 0; CHECK }
    od
}

/* ll-completion on chunks (the per-message path; the set-based one, chunk_bulk.c, decides only
 * what this path would decide for the same state and leaves everything else to it) */
active proctype completion_chunks() {
    byte m, p, c, t, idx, k;
    bool enqueue_later;
end_idle:
    do
#ifndef MUTANT_OFFSET_BEFORE_DB
#ifndef MUTANT_OUTBOX_AFTER_COMMIT
    /* kloop_commit.c: a database commit does not wait for the Kafka commit, so up to STAGED_MAX
     * messages are applied (each its own database transaction, its reply staged) before one
     * Kafka transaction commits their replies and moves the offset past them; a crash, or a
     * failed Kafka commit, in between loses the staged replies, and every one of those messages
     * is read again from the committed offset */
    :: atomic { ch_app < ch_len && ch_app < ch_com + STAGED_MAX ->
                m = ch[ch_app]; c = m % 2; p = (m / 2) % 2; t = m / 4;
                apply_chunk(p, c, t);
#ifdef MUTANT_REPLY_OUTSIDE_TX
                ch_ans[ch_app]++; assert(ch_ans[ch_app] == 1);
#endif
                ch_app++;
                m = 0; p = 0; c = 0; t = 0; idx = 0; k = 0; CHECK }
    :: atomic { ch_app > ch_com -> /* Kafka commit: the staged replies and the offset */
                do
                :: ch_com < ch_app ->
#ifndef MUTANT_REPLY_OUTSIDE_TX
                    ch_ans[ch_com]++; assert(ch_ans[ch_com] == 1); /* I6 */
#endif
                    ch_com++
                :: else -> break
                od;
                CHECK }
    :: atomic { ch_app > ch_com && crashes < CRASH_MAX -> crashes++; ch_app = ch_com; CHECK }
#else
    :: atomic { ch_com < ch_len -> m = ch[ch_com]; c = m % 2; p = (m / 2) % 2; t = m / 4;
                apply_chunk(p, c, t);
#ifdef MUTANT_REPLY_OUTSIDE_TX
                ch_ans[ch_com]++; assert(ch_ans[ch_com] == 1);
#endif
                m = 0; p = 0; c = 0; t = 0; idx = 0; k = 0; CHECK }
#endif
#ifdef MUTANT_OUTBOX_AFTER_COMMIT
        if
        :: atomic { if
                    :: enqueue_later && vd_st == D_NONE -> vd_st = D_PENDING; v_rows++
                    :: else -> skip
                    fi;
                    enqueue_later = false;
                    ch_ans[ch_com]++; assert(ch_ans[ch_com] == 1);
                    ch_com++; CHECK }
        :: atomic { crashes < CRASH_MAX -> crashes++; enqueue_later = false; CHECK }
        fi
#endif
#else
    :: atomic { ch_com < ch_len -> m = ch[ch_com]; ch_com++ } /* offset first */
        if
        :: atomic { c = m % 2; p = (m / 2) % 2; t = m / 4; apply_chunk(p, c, t); ch_ans[ch_com - 1]++;
                    m = 0; p = 0; c = 0; t = 0; idx = 0; k = 0; CHECK }
        :: atomic { crashes < CRASH_MAX -> crashes++; m = 0 } /* the message is never applied */
        fi
#endif
    od
}

/* ll-completion on validation-starts */
active proctype completion_vstarts() {
end_idle:
    do
    :: atomic { vs_com < vs_len -> apply_vstart();
#ifdef MUTANT_REPLY_OUTSIDE_TX
                vs_ans[vs_com]++; assert(vs_ans[vs_com] == 1);
#endif
                if
                :: /* Kafka commit */
#ifndef MUTANT_REPLY_OUTSIDE_TX
                    vs_ans[vs_com]++; assert(vs_ans[vs_com] == 1); /* I6 */
#endif
                    vs_com++
                :: crashes < CRASH_MAX -> crashes++
                fi;
                CHECK }
    od
}

/* ll-dispatcher: lease (attempt + 1) and publish, then SENT only if still PENDING. A crash between
 * the lease and the publish only counts an attempt: lease and publish are one step. */
inline settle() {
    if
    :: atomic { /* outbox_sent ... WHERE status = 'PENDING' (an ACK that came first stays ACKED) */
                if
                :: v -> if :: vd_st == D_PENDING -> vd_st = D_SENT :: else -> skip fi; vd_leased = false
                :: else -> if :: rd_st[k] == D_PENDING -> rd_st[k] = D_SENT :: else -> skip fi; rd_leased[k] = false
                fi;
                k = 0; v = false }
    :: atomic { dcrash_used < DCRASH_MAX -> dcrash_used++;
                /* crash after publish, before SENT: the row stays PENDING, due again after the lease */
                if
                :: v -> vd_leased = false
                :: else -> rd_leased[k] = false
                fi;
                k = 0; v = false }
    fi
}

active proctype dispatcher() {
    byte k;
    bool v;
end_idle:
    do
    :: atomic { vd_st == D_PENDING && !vd_leased -> vd_leased = true; vd_att++; v = true; vc_len++ };
        settle()
    :: atomic { nrd > 0 && rd_st[0] == D_PENDING && !rd_leased[0] -> rd_leased[0] = true; rd_att[0]++; k = 0;
                rc[rc_len] = rd_part[0]; rc_len++ };
        settle()
    :: atomic { nrd > 1 && rd_st[1] == D_PENDING && !rd_leased[1] -> rd_leased[1] = true; rd_att[1]++; k = 1;
                rc[rc_len] = rd_part[1]; rc_len++ };
        settle()
    od
}

/* ll-sweeper (REISSUE mode): stale partitions, ack timeouts, the run deadline */
active proctype sweeper() {
    byte p, k, q;
end_idle:
    do
    :: atomic { stale_used < STALE_MAX && run_st == EXTRACTING &&
#ifndef MUTANT_SWEEP_ANY_STATUS
                (part_st[0] == RUNNING || part_st[1] == RUNNING) ->
#else
                true ->
#endif
                stale_used++;
                if
#ifndef MUTANT_SWEEP_ANY_STATUS
                :: part_st[0] == RUNNING -> p = 0
                :: part_st[1] == RUNNING -> p = 1
#else
                :: p = 0
                :: p = 1
#endif
                fi;
                if
                :: part_att[p] >= MAX_ATT -> /* REISSUE_ATTEMPTS_EXHAUSTED: sweep_timeout_run */
                    for (q : 0 .. NP - 1) {
                        if
                        :: part_st[q] == PENDING || part_st[q] == RUNNING || part_st[q] == RETRY -> part_st[q] = P_TIMED_OUT
                        :: else -> skip
                        fi
                    }
                    run_st = TIMED_OUT; decisions++
                :: else -> /* sweep_to_retry, sweep_invalidate_files, sweep_enqueue_reissue */
                    superseded[part_tok[p]] = (part_tok[p] != 0);
                    part_st[p] = RETRY; part_tok[p] = 0; part_files[p] = 0;
                    for (q : 0 .. NC - 1) {
                        if
                        :: file_st[p * NC + q] == WRITTEN -> file_st[p * NC + q] = F_FAILED
                        :: else -> skip
                        fi
                    }
                    rd_part[nrd] = p; rd_st[nrd] = D_PENDING; nrd++
                fi;
                p = 0; q = 0; CHECK }
    :: atomic { requeue_used < REQUEUE_MAX && vd_st == D_SENT && run_st == EXTRACTED_VALIDATED ->
                requeue_used++; if :: vd_att >= DISP_MAX -> vd_st = D_DEAD :: else -> vd_st = D_PENDING fi; CHECK }
    :: atomic { requeue_used < REQUEUE_MAX && run_st == EXTRACTING &&
                ((nrd > 0 && rd_st[0] == D_SENT && part_st[rd_part[0]] == RETRY) ||
                 (nrd > 1 && rd_st[1] == D_SENT && part_st[rd_part[1]] == RETRY)) ->
                requeue_used++;
                if
                :: nrd > 0 && rd_st[0] == D_SENT && part_st[rd_part[0]] == RETRY -> k = 0
                :: nrd > 1 && rd_st[1] == D_SENT && part_st[rd_part[1]] == RETRY -> k = 1
                fi;
                if :: rd_att[k] >= DISP_MAX -> rd_st[k] = D_DEAD :: else -> rd_st[k] = D_PENDING fi; k = 0; CHECK }
#ifndef LIVENESS
    /* rule 2 (a deadline would end every run; left out of the liveness run) */
    :: atomic { deadline_used < DEADLINE_MAX &&
#ifndef MUTANT_DEADLINE_NO_STATUS
                run_st == EXTRACTING ->
#else
                true ->
#endif
                deadline_used++;
                for (q : 0 .. NP - 1) {
                    if
                    :: part_st[q] == PENDING || part_st[q] == RUNNING || part_st[q] == RETRY -> part_st[q] = P_TIMED_OUT
                    :: else -> skip
                    fi
                }
                run_st = TIMED_OUT; decisions++; q = 0; CHECK }
#endif
    od
}

/* NiFi's validation flow: on a validate-run command, ask to start (the ACK); an ACK whose answer
 * was lost is sent again */
active proctype starter() {
end_idle:
    do
    :: atomic { vc_pos < vc_len -> vc_pos++; vs_len++ }
    :: atomic { vc_pos > 0 && resend_used < RESEND_MAX -> resend_used++; vs_len++ }
    od
}

/* At rest (nothing can move): the run is final, and every input was answered exactly once. */
active proctype at_rest() {
    byte i;
    timeout ->
    d_step {
    assert(FINAL);
    assert(I2);
    for (i : 0 .. MAXCL - 1) { assert(i >= cl_len || cl_ans[i] == 1) }
    for (i : 0 .. MAXCH - 1) { assert(i >= ch_len || ch_ans[i] == 1) }
    for (i : 0 .. MAXVS - 1) { assert(i >= vs_len || vs_ans[i] == 1) }
    }
}

init {
    byte i;
    atomic {
        for (i : 0 .. NP - 1) { part_st[i] = PENDING }
        run worker(0);
        run worker(1)
    }
}

#ifdef LIVENESS
ltl live { <> FINAL }
#endif
