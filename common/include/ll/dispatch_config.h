/*
 * dispatch_config.h - the configuration keys that more than one service reads about the outbox
 * (docs/contract.md §6, §7.3, §9), declared once: their default, range and help are written here
 * only, and every key table that needs one takes it from here.
 */
#ifndef LL_DISPATCH_CONFIG_H
#define LL_DISPATCH_CONFIG_H

#include "ll/config.h"

/* The largest dispatch.max_attempts: the attempts are an int in the services (ll_dispatch_classify,
 * ll_dispatch_ack_timeout) and in load_dispatch.attempt_count. */
#define LL_DISPATCH_MAX_ATTEMPTS_MAX 2147483647

/*
 * dispatch.max_attempts (docs/contract.md §6, §7.3): deliveries of one outbox row before it is DEAD,
 * ACK-timeout resends included; 1..LL_DISPATCH_MAX_ATTEMPTS_MAX, default 20. Read by the
 * dispatcher (a failed delivery) and the sweeper (an unacknowledged SENT row), with ll_config_int.
 */
#define LL_DISPATCH_MAX_ATTEMPTS_KEY                                                                         \
    {                                                                                                        \
        "dispatch.max_attempts", "20", false, "deliveries before DEAD (ACK-timeout resends count)",          \
            LL_CONFIG_INT, 1, LL_DISPATCH_MAX_ATTEMPTS_MAX                                                   \
    }

#endif
