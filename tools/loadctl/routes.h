/*
 * routes.h - which service consumes which input topic with which schema, and where it answers
 * (the services' main.c input tables), for the loadctl commands that read the topics (verify,
 * dead-letters, redrive).
 */
#ifndef LOADCTL_ROUTES_H
#define LOADCTL_ROUTES_H

/* One input of a service. Static strings. */
typedef struct lc_route {
    const char *service;      /* registrar, claimer, completion */
    const char *input;        /* logical input topic, e.g. "chunks" */
    const char *input_schema; /* its .avsc */
    const char *reply;        /* logical reply topic */
    const char *reply_schema; /* the reply's .avsc */
} lc_route;

/* Number of routes (a constant: commands size arrays by it). */
#define LC_N_ROUTES 12
/* Index of the chunks route in LC_ROUTES. */
#define LC_CHUNK_ROUTE 4

/* The routes, LC_N_ROUTES of them, in the services' order. */
extern const lc_route LC_ROUTES[LC_N_ROUTES];

#endif
