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
 * A consumer (common/src/loop/batch.c, batches of one message here) applies a message in
 * one database transaction (one atomic step), then either commits the Kafka transaction (its
 * reply becomes visible to read_committed readers and the offset moves, one atomic step) or
 * crashes in between: the Kafka transaction is aborted (the reply is lost), the database keeps
 * what it committed, and the message is read again from the committed offset. The completion's
 * chunk consumer may apply up to STAGED_MAX messages before one Kafka transaction commits their
 * replies (commit.c: a database commit does not wait for the Kafka commit).
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
 *   SEEK_KAFKA_ONLY      (DBLOSS) a consumer starts at Kafka's committed offset alone,
 *                        not at min(ledger position, Kafka)                               -> D2
 *   UNCONDITIONAL_POSITION (DBLOSS) the position written whatever the row's write token (no
 *                        compare-and-set, no position check): a loss behind a pooler is never
 *                        found, a stale instance writes its older position last            -> D2
 *
 * -DDBLOSS (issue 27): the database may lose its last k <= 2 committed transactions, once, at
 * any point (failover() below), and nothing tells the consumers (a pooler reconnects behind their
 * unchanged connections, issue 39); the ledger (a struct) keeps each consumer's position, written
 * in the transaction of the effects by compare-and-set on its write token (position.c): a
 * write that finds another token than the one the consumer last read or wrote is refused, and the
 * consumer rewinds to min(ledger, Kafka), fencing the row with a new token, as it does on a crash
 * (a new assignment); a position check finds the same with no input (loop.position_check_interval).
 * The claimer also has a stale instance: at a rebalance the evicted instance may still commit the
 * transaction it had in hand, later, with the token it had (its Kafka transaction is fenced).
 * What holds then: I1-I5 in every ledger state (their ghosts are part of the ledger and go back
 * with it); D1 an input applied again answers what its visible reply said (REPLY); an OWN_NOT_YET
 * chunk is deferred, not asserted away; at rest D2 the final ledger holds every input of every
 * topic (positions at the logs' ends) and D3 agrees with every visible claim decision.
 * D1 is stronger than what the loop relies on: an input re-applied after a loss is not answered
 * again (batch.c answered_before, docs/design.md §5), because across topics a second answer
 * can differ where this model has no such input (a duplicate claim read again after its run
 * completed: test_restore_drill.py::test_an_answer_given_before_the_loss_is_not_given_again).
 * D3 is the property the withheld answer needs.
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
#define STAGED_MAX 2 /* chunks applied before one Kafka commit of their replies (commit.c) */
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

/* ---- the ledger (PostgreSQL): one struct, so that a database loss can put it back ---- */
typedef Ledger {
    byte f_run_st = EXTRACTING;
    byte f_part_st[NP], f_part_tok[NP], f_part_att[NP], f_part_files[NP];
    byte f_file_st[NP * NC], f_file_tok[NP * NC]; /* a file's content is the token of the attempt that wrote it */
    byte f_tok_part[NT];                          /* load_claim_token: partition + 1 a token was granted for */
    byte f_vd_st, f_vd_att;                       /* the VALIDATE_RUN dispatch row */
    bool f_vd_leased;
    byte f_rd_st[NR], f_rd_part[NR], f_rd_att[NR]; /* REISSUE_PARTITION rows */
    bool f_rd_leased[NR];
    byte f_nrd;
    /* ghosts of the ledger's history (what I1-I5 count): a lost transaction takes them along */
    byte f_decisions, f_v_rows, f_sv_wins;
    bool f_superseded[NT];
    byte f_snap[NP * NC];
    bool f_was_success[NP];
#ifdef DBLOSS
    /* nifi_ops.consumer_position (0009): each consumer's read position (batches of one message,
     * in order: the first offset not done), written in the transaction of the effects */
    byte f_pos_cl, f_pos_ch, f_pos_vs;
    /* ghost: the inputs this ledger state has applied (bit = Kafka offset) */
    short f_ap_cl, f_ap_ch;
    byte f_ap_vs;
    /* consumer_position.write_token (0011): a small id, a new one never equal to any token still
     * held somewhere (the ledger, its saved copies, an expectation: NEWTOK), as random UUIDs never
     * repeat */
    byte f_tk_cl, f_tk_ch, f_tk_vs;
#endif
};
Ledger L;
#define run_st L.f_run_st
#define part_st L.f_part_st
#define part_tok L.f_part_tok
#define part_att L.f_part_att
#define part_files L.f_part_files
#define file_st L.f_file_st
#define file_tok L.f_file_tok
#define tok_part L.f_tok_part
#define vd_st L.f_vd_st
#define vd_att L.f_vd_att
#define vd_leased L.f_vd_leased
#define rd_st L.f_rd_st
#define rd_part L.f_rd_part
#define rd_att L.f_rd_att
#define rd_leased L.f_rd_leased
#define nrd L.f_nrd
#define decisions L.f_decisions
#define v_rows L.f_v_rows
#define sv_wins L.f_sv_wins
#define superseded L.f_superseded
#define snap L.f_snap
#define was_success L.f_was_success

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
/* in the ledger struct: decisions (I1: times the run left EXTRACTING), v_rows (I2: VALIDATE_RUN
 * rows), sv_wins (I3: entries into STAGE_VALIDATING), superseded[t] (I4: tokens the sweeper took a
 * partition from), snap/was_success (I5: a partition's files when it became SUCCESS) */
byte cl_ans[MAXCL], ch_ans[MAXCH], vs_ans[MAXVS]; /* I6: committed answers per input offset
                                                   * (DBLOSS: the first visible answer, 1 or 2) */
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

#ifdef DBLOSS
/* The fault "the database loses its last k committed transactions" (k <= 2, at any point; an
 * asynchronous failover, a point-in-time restore): the ledger, its positions and its ghosts go
 * back k commits; Kafka (logs, committed offsets, visible replies) stays. H1 is the ledger before
 * the last commit, H2 before the one before; a commit saves them only while a loss may still come. */
#ifndef LOSS_MAX
#define LOSS_MAX 1
#endif
Ledger H1, H2;
byte nh, hk, loss_used;
byte ntk;                  /* NEWTOK's scratch */
#ifndef ZOMBIE_MAX
#define ZOMBIE_MAX 0
#endif
byte tk_cl, tk_ch, tk_vs;  /* the write token each consumer last read or wrote */
bool zpend;                /* the claimer's stale instance still holds a transaction ... */
byte zi, ztk, zombie_used; /* ... of input zi, written with token ztk if it commits */
byte cl_rd, ch_st, vs_rd;  /* the consumers' read positions (ch_st: the chunk consumer's first
                            * staged offset; ch_app its next one) */
byte ch_res[MAXCH];        /* the chunk consumer's staged answers */
#define COPY(D, S) \
    D.f_run_st = S.f_run_st; D.f_vd_st = S.f_vd_st; D.f_vd_att = S.f_vd_att; D.f_vd_leased = S.f_vd_leased; \
    D.f_nrd = S.f_nrd; D.f_decisions = S.f_decisions; D.f_v_rows = S.f_v_rows; D.f_sv_wins = S.f_sv_wins; \
    D.f_pos_cl = S.f_pos_cl; D.f_pos_ch = S.f_pos_ch; D.f_pos_vs = S.f_pos_vs; \
    D.f_ap_cl = S.f_ap_cl; D.f_ap_ch = S.f_ap_ch; D.f_ap_vs = S.f_ap_vs; \
    D.f_tk_cl = S.f_tk_cl; D.f_tk_ch = S.f_tk_ch; D.f_tk_vs = S.f_tk_vs; \
    for (hk : 0 .. NP - 1) { D.f_part_st[hk] = S.f_part_st[hk]; D.f_part_tok[hk] = S.f_part_tok[hk]; \
        D.f_part_att[hk] = S.f_part_att[hk]; D.f_part_files[hk] = S.f_part_files[hk]; \
        D.f_was_success[hk] = S.f_was_success[hk] } \
    for (hk : 0 .. NP * NC - 1) { D.f_file_st[hk] = S.f_file_st[hk]; D.f_file_tok[hk] = S.f_file_tok[hk]; \
        D.f_snap[hk] = S.f_snap[hk] } \
    for (hk : 0 .. NT - 1) { D.f_tok_part[hk] = S.f_tok_part[hk]; D.f_superseded[hk] = S.f_superseded[hk] } \
    for (hk : 0 .. NR - 1) { D.f_rd_st[hk] = S.f_rd_st[hk]; D.f_rd_part[hk] = S.f_rd_part[hk]; \
        D.f_rd_att[hk] = S.f_rd_att[hk]; D.f_rd_leased[hk] = S.f_rd_leased[hk] } \
    hk = 0
#define CLEAR(D) \
    D.f_run_st = 0; D.f_vd_st = 0; D.f_vd_att = 0; D.f_vd_leased = 0; D.f_nrd = 0; D.f_decisions = 0; \
    D.f_v_rows = 0; D.f_sv_wins = 0; D.f_pos_cl = 0; D.f_pos_ch = 0; D.f_pos_vs = 0; D.f_ap_cl = 0; \
    D.f_ap_ch = 0; D.f_ap_vs = 0; D.f_tk_cl = 0; D.f_tk_ch = 0; D.f_tk_vs = 0; \
    for (hk : 0 .. NP - 1) { D.f_part_st[hk] = 0; D.f_part_tok[hk] = 0; D.f_part_att[hk] = 0; \
        D.f_part_files[hk] = 0; D.f_was_success[hk] = 0 } \
    for (hk : 0 .. NP * NC - 1) { D.f_file_st[hk] = 0; D.f_file_tok[hk] = 0; D.f_snap[hk] = 0 } \
    for (hk : 0 .. NT - 1) { D.f_tok_part[hk] = 0; D.f_superseded[hk] = 0 } \
    for (hk : 0 .. NR - 1) { D.f_rd_st[hk] = 0; D.f_rd_part[hk] = 0; D.f_rd_att[hk] = 0; D.f_rd_leased[hk] = 0 } \
    hk = 0
/* at the start of every ledger transaction */
#define SAVE if :: loss_used < LOSS_MAX -> COPY(H2, H1); COPY(H1, L); if :: nh < 2 -> nh++ :: else -> skip fi \
             :: else -> skip fi
/* the position written in the transaction of the effects (and the ghost of what it applied), with
 * a new write token; the write is allowed only where TOKOK (the compare-and-set) */
/* a token no one holds: not the ledger's, not a saved copy's, not an expectation (the stale
 * claimer's too) */
#define ZREF_cl (zpend && ntk == ztk)
#define ZREF_ch false
#define ZREF_vs false
#define FREETOK(x) ntk = 0; \
    do \
    :: ntk == L.f_tk_##x || ntk == H1.f_tk_##x || ntk == H2.f_tk_##x || ntk == tk_##x || ZREF_##x -> ntk++ \
    :: else -> break \
    od
#define NEWTOK(x) FREETOK(x); L.f_tk_##x = ntk; tk_##x = ntk; ntk = 0
#define POS(x, i) L.f_pos_##x = i + 1; L.f_ap_##x = L.f_ap_##x | (1 << i); NEWTOK(x)
#ifndef MUTANT_UNCONDITIONAL_POSITION
#define TOKOK(x) (L.f_tk_##x == tk_##x)
#else
#define TOKOK(x) true
#endif
/* where a consumer starts on an assignment or a rewind: min(ledger, Kafka) (position.c),
 * the row fenced with a new token; the mutant seeks to Kafka's committed offset alone */
#define FENCE(x) NEWTOK(x)
#ifndef MUTANT_SEEK_KAFKA_ONLY
#define SEEK(x, rd) if :: L.f_pos_##x < x##_com -> rd = L.f_pos_##x :: else -> rd = x##_com fi; FENCE(x)
#else
#define SEEK(x, rd) rd = x##_com; FENCE(x)
#endif
/* a Kafka commit of offsets up to rd: the committed offset never moves back in the model */
#define KCOMMIT(x, rd) if :: rd > x##_com -> x##_com = rd :: else -> skip fi
/* a reply made visible: the first answer for an input, or (re-applied after a loss) the same one */
#define REPLY(a, i, v) if :: a[i] == 0 -> a[i] = v :: else -> assert(a[i] == v) fi
#define ANSWERED(a, i) (a[i] != 0)
/* the position write refused, or the position check found another token: the loop rewinds */
#define MOVED(x) (!TOKOK(x))
/* OWN_NOT_YET (ownership.c): the chunk's token is not granted yet while it could be: deferred */
#define NOTYET(m) (part_tok[(m / 2) % 2] != m / 4 && tok_part[m / 4] != (m / 2) % 2 + 1 && \
                   run_st == EXTRACTING && (part_st[(m / 2) % 2] == PENDING || part_st[(m / 2) % 2] == RETRY))
#else
#define SAVE skip
#define POS(x, i) skip
#define SEEK(x, rd) skip
#define KCOMMIT(x, rd) skip
#define REPLY(a, i, v) a[i]++; assert(a[i] == 1)
#define ANSWERED(a, i) (a[i] == 1)
#define NOTYET(m) false
#define TOKOK(x) true
#define cl_rd cl_com
#define ch_st ch_com
#define vs_rd vs_com
#endif


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
    :: part_tok[p] == t -> res = 1                                /* OWN_MATCH */
    :: part_tok[p] != t && tok_part[t] == p + 1 -> res = 2; goto answered /* OWN_SUPERSEDED: CLAIM_MISMATCH */
    :: part_tok[p] != t && tok_part[t] != p + 1 -> res = 2;
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
#ifdef DBLOSS
    /* a command published from an outbox row the database then lost: DISPATCH_MISMATCH, and the
     * re-applied completion writes the row again (a new command, a new ACK) */
    if
    :: vd_st == D_NONE -> res = 2; goto vs_answered
    :: else -> res = 1
    fi;
#else
    assert(vd_st != D_NONE); /* the starter acts only on a command: never DISPATCH_MISMATCH */
    res = 1;
#endif
    vd_st = D_ACKED;
#ifndef MUTANT_VSTART_NO_STATUS
    if
    :: run_st == EXTRACTED_VALIDATED -> run_st = STAGE_VALIDATING; sv_wins++
    :: else -> skip /* the winner's replay: started=true from load_validation_start; others false */
    fi
#else
    run_st = STAGE_VALIDATING; sv_wins++
#endif
vs_answered:
    skip
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
    :: atomic { cl_rd < cl_len && TOKOK(cl) -> SAVE; m = cl[cl_rd]; t = m / 2; p = m % 2; apply_claim(p, t, r);
                POS(cl, cl_rd);
#ifdef MUTANT_REPLY_OUTSIDE_TX
                cl_ans[cl_com]++; assert(cl_ans[cl_com] == 1);
#endif
                if
                :: /* Kafka commit: reply and offset in one transaction */
#ifndef MUTANT_REPLY_OUTSIDE_TX
                    REPLY(cl_ans, cl_rd, r); /* I6; D1 after a loss */
#endif
                    if
                    :: dec[t] == 0 -> dec[t] = r
                    :: else -> skip
                    fi;
                    cl_rd++; KCOMMIT(cl, cl_rd)
                :: crashes < CRASH_MAX -> crashes++; SEEK(cl, cl_rd) /* aborted: read again */
                fi;
                m = 0; p = 0; t = 0; r = 0; k = 0; CHECK }
#ifdef DBLOSS
    :: atomic { MOVED(cl) -> SEEK(cl, cl_rd) } /* a refused write or the position check: rewind */
    /* a rebalance evicts this instance while it applies input cl_rd: the new owner merges (and
     * fences); the old one may still commit that transaction later, with the token it had */
    :: atomic { zombie_used < ZOMBIE_MAX && cl_rd < cl_len -> zombie_used++; zpend = true; zi = cl_rd;
                ztk = tk_cl; SEEK(cl, cl_rd) }
    :: atomic { zpend -> zpend = false;
                if
#ifndef MUTANT_UNCONDITIONAL_POSITION
                :: L.f_tk_cl == ztk ->
#else
                :: true ->
#endif
                    SAVE; m = cl[zi]; t = m / 2; p = m % 2; apply_claim(p, t, r);
                    /* a token of its own (a random UUID: never one the new owner holds) */
                    L.f_pos_cl = zi + 1; L.f_ap_cl = L.f_ap_cl | (1 << zi); FREETOK(cl); L.f_tk_cl = ntk; ntk = 0
                :: else -> skip /* refused: the new owner's fence */
                fi;
                m = 0; p = 0; t = 0; r = 0; CHECK }
#endif
    od
}

/* ll-completion on chunks (the per-message path; the set-based one, chunk_bulk.c, decides only
 * what this path would decide for the same state and leaves everything else to it) */
active proctype completion_chunks() {
    byte m, p, c, t, idx, k, res;
    bool enqueue_later;
end_idle:
    do
#ifndef MUTANT_OFFSET_BEFORE_DB
#ifndef MUTANT_OUTBOX_AFTER_COMMIT
    /* commit.c: a database commit does not wait for the Kafka commit, so up to STAGED_MAX
     * messages are applied (each its own database transaction, its reply staged) before one
     * Kafka transaction commits their replies and moves the offset past them; a crash, or a
     * failed Kafka commit, in between loses the staged replies, and every one of those messages
     * is read again from the committed offset */
    :: atomic { ch_app < ch_len && ch_app < ch_st + STAGED_MAX && TOKOK(ch) && !NOTYET(ch[ch_app]) ->
                SAVE; m = ch[ch_app]; c = m % 2; p = (m / 2) % 2; t = m / 4;
                apply_chunk(p, c, t);
                POS(ch, ch_app);
#ifdef MUTANT_REPLY_OUTSIDE_TX
                ch_ans[ch_app]++; assert(ch_ans[ch_app] == 1);
#endif
#ifdef DBLOSS
                ch_res[ch_app] = res;
#endif
                ch_app++;
                m = 0; p = 0; c = 0; t = 0; idx = 0; k = 0; res = 0; CHECK }
    :: atomic { ch_app > ch_st -> /* Kafka commit: the staged replies and the offset */
                do
                :: ch_st < ch_app ->
#ifndef MUTANT_REPLY_OUTSIDE_TX
#ifdef DBLOSS
                    REPLY(ch_ans, ch_st, ch_res[ch_st]); ch_res[ch_st] = 0;
#else
                    REPLY(ch_ans, ch_com, 0); /* I6 */
#endif
#endif
                    ch_st++
                :: else -> break
                od;
                KCOMMIT(ch, ch_st);
                CHECK }
#ifndef DBLOSS
    :: atomic { ch_app > ch_com && crashes < CRASH_MAX -> crashes++; ch_app = ch_com; CHECK }
#else
    :: atomic { ch_app > ch_st && crashes < CRASH_MAX -> crashes++; SEEK(ch, ch_st); ch_app = ch_st;
                for (k : 0 .. MAXCH - 1) { ch_res[k] = 0 }; k = 0 }
    :: atomic { MOVED(ch) -> /* a refused write or the position check: the loop rewinds */
                SEEK(ch, ch_st); ch_app = ch_st;
                for (k : 0 .. MAXCH - 1) { ch_res[k] = 0 }; k = 0 }
#endif
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
    byte res;
end_idle:
    do
    :: atomic { vs_rd < vs_len && TOKOK(vs) -> SAVE; apply_vstart(); POS(vs, vs_rd);
#ifdef MUTANT_REPLY_OUTSIDE_TX
                vs_ans[vs_com]++; assert(vs_ans[vs_com] == 1);
#endif
                if
                :: /* Kafka commit */
#ifndef MUTANT_REPLY_OUTSIDE_TX
                    REPLY(vs_ans, vs_rd, res); /* I6; D1 after a loss */
#endif
                    vs_rd++; KCOMMIT(vs, vs_rd)
                :: crashes < CRASH_MAX -> crashes++; SEEK(vs, vs_rd)
                fi;
                res = 0; CHECK }
#ifdef DBLOSS
    :: atomic { MOVED(vs) -> SEEK(vs, vs_rd) } /* a refused write or the position check */
#endif
    od
}

/* ll-dispatcher: lease (attempt + 1) and publish, then SENT only if still PENDING. A crash between
 * the lease and the publish only counts an attempt: lease and publish are one step. */
inline settle() {
    if
    :: atomic { /* outbox_sent ... WHERE status = 'PENDING' (an ACK that came first stays ACKED) */
                SAVE;
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
    :: atomic { vd_st == D_PENDING && !vd_leased -> SAVE; vd_leased = true; vd_att++; v = true; vc_len++ };
        settle()
    :: atomic { nrd > 0 && rd_st[0] == D_PENDING && !rd_leased[0] -> SAVE; rd_leased[0] = true; rd_att[0]++; k = 0;
                rc[rc_len] = rd_part[0]; rc_len++ };
        settle()
    :: atomic { nrd > 1 && rd_st[1] == D_PENDING && !rd_leased[1] -> SAVE; rd_leased[1] = true; rd_att[1]++; k = 1;
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
                stale_used++; SAVE;
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
                requeue_used++; SAVE; if :: vd_att >= DISP_MAX -> vd_st = D_DEAD :: else -> vd_st = D_PENDING fi; CHECK }
    :: atomic { requeue_used < REQUEUE_MAX && run_st == EXTRACTING &&
                ((nrd > 0 && rd_st[0] == D_SENT && part_st[rd_part[0]] == RETRY) ||
                 (nrd > 1 && rd_st[1] == D_SENT && part_st[rd_part[1]] == RETRY)) ->
                requeue_used++; SAVE;
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
                deadline_used++; SAVE;
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
#ifdef DBLOSS
    /* D2 first: the claims a lost transaction took along are applied again */
    for (i : 0 .. MAXCL - 1) { assert(i >= cl_len || (L.f_ap_cl & (1 << i)) != 0) }
#endif
    assert(FINAL);
    assert(I2);
    for (i : 0 .. MAXCL - 1) { assert(i >= cl_len || ANSWERED(cl_ans, i)) }
    for (i : 0 .. MAXCH - 1) { assert(i >= ch_len || ANSWERED(ch_ans, i)) }
    for (i : 0 .. MAXVS - 1) { assert(i >= vs_len || ANSWERED(vs_ans, i)) }
#ifdef DBLOSS
    /* D2: the final ledger holds every input (an answer visible or not) and its position is past
     * it; D3: it agrees with every visible claim decision: a CLAIMED token was granted that
     * partition, a REFUSED one never was or was superseded (a grant whose answer a crash lost,
     * then a reissue, then the replay: SUPERSEDED) */
    for (i : 0 .. MAXCL - 1) { assert(i >= cl_len || (L.f_ap_cl & (1 << i)) != 0) }
    for (i : 0 .. MAXCH - 1) { assert(i >= ch_len || (L.f_ap_ch & (1 << i)) != 0) }
    for (i : 0 .. MAXVS - 1) { assert(i >= vs_len || (L.f_ap_vs & (1 << i)) != 0) }
    assert(L.f_pos_cl == cl_len && L.f_pos_ch == ch_len && L.f_pos_vs == vs_len);
    for (i : 0 .. MAXCL - 1) {
        assert(i >= cl_len ||
               (cl_ans[i] == CLAIMED && tok_part[cl[i] / 2] == cl[i] % 2 + 1) ||
               (cl_ans[i] == REFUSED && (tok_part[cl[i] / 2] != cl[i] % 2 + 1 || superseded[cl[i] / 2])))
    }
#endif
    }
}

#ifdef DBLOSS
/* the database fails over (or is restored) and has lost its last k <= 2 committed transactions;
 * nothing tells the consumers (a pooler keeps their connections): only their position writes'
 * compare-and-set and their position checks can find it */
active proctype failover() {
end_wait:
    atomic { loss_used < LOSS_MAX && nh > 0 -> loss_used++;
             if
             :: COPY(L, H1)
             :: nh == 2 -> COPY(L, H2)
             fi;
             CLEAR(H1); CLEAR(H2); nh = 0; CHECK }
}
#endif

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
