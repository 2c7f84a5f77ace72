/* lsn_answer: reading a learner's typed answer and checking it (no Lua, no
 * ncurses; lessons reach it through lab.ask, see lessons/API.md).
 *
 * A numeric answer is a number with an optional multiplier and unit:
 * "23184", "23,184 tokens", "23.2k", "2.3e4", "2.83 GiB", "3.04 GB",
 * "128 KiB/token", "40%", "1.3x", "~5.4 GB". Units carry a dimension (bytes,
 * tokens, ...) and a scale to that dimension's base unit; answers of another
 * dimension never match. Byte units: binary KiB/MiB/GiB/TiB (2^10..) and
 * decimal KB/MB/GB/TB (10^3..), the distinction vLLM's logs (GiB) and
 * marketing (GB) blur, so the checker spots a right number in the wrong one. */
#ifndef LSN_ANSWER_H
#define LSN_ANSWER_H

#include <stddef.h>

typedef enum lsn_dim {
    LSN_DIM_NONE = 0,   /* a plain number (also x and %) */
    LSN_DIM_BYTES,
    LSN_DIM_TOKENS,
    LSN_DIM_BLOCKS,
    LSN_DIM_VECTORS,
    LSN_DIM_REQUESTS,
    LSN_DIM_SECONDS,
    LSN_DIM_FLOPS,
} lsn_dim;

/* A unit as the learner may type it. */
typedef struct lsn_unit {
    const char *name;   /* canonical spelling: "GiB", "tokens", "%" */
    lsn_dim dim;
    double scale;       /* multiply by this to get the dimension's base unit */
} lsn_unit;

/* Look a unit up by any accepted spelling, case-insensitively ("gib",
 * "GiB", "tokens", "tok", "bytes", "B", "%"). NULL if unknown; "" gives the
 * dimensionless unit. */
const lsn_unit *lsn_unit_find(const char *name);

/* A parsed answer. */
typedef struct lsn_quantity {
    double number;            /* as typed, after the k/M multiplier */
    const lsn_unit *unit;     /* typed unit, or NULL when none was typed */
    double base;              /* number x unit scale (set by lsn_answer_parse only
                                 when a unit was typed; else = number) */
} lsn_quantity;

/* Read text into *q. Returns 0, or -1 with a one-line reason in msg (e.g.
 * "I could not read a number in 'lots'", "unknown unit 'furlongs'"). */
int lsn_answer_parse(const char *text, lsn_quantity *q, char *msg, size_t msglen);

/* Result of a check (mirrors lsn_verdict_kind in lsn.h). */
typedef enum lsn_check_result {
    LSN_CHECK_CORRECT = 0,
    LSN_CHECK_WRONG,
    LSN_CHECK_NEAR_MISS,
    LSN_CHECK_UNREADABLE,
} lsn_check_result;

/* A known mistake and what to say about it. value is in the question's unit. */
typedef struct lsn_near {
    double value;
    const char *why;
} lsn_near;

typedef struct lsn_numq {
    double answer;            /* the right value, in `unit` */
    const char *unit;         /* the question's unit ("tokens", "GiB", "" ...): assumed
                                 when the learner types none; must be lsn_unit_find-able */
    double rel_tol;           /* relative tolerance (0.01 = 1%); <= 0 means 0.01 */
    double abs_tol;           /* absolute tolerance in `unit`; 0 = unused. Accepted
                                 when |typed - answer| <= max(rel, abs) */
    int nnear;
    const lsn_near *near;
} lsn_numq;

/* Check a numeric answer. msg gets one or two sentences for the learner:
 * for CORRECT a short confirmation, for NEAR_MISS the lesson's `why` or the
 * checker's own (wrong byte unit: GB vs GiB, KiB vs MiB ...), for WRONG
 * whether it is too high or too low, for UNREADABLE what could not be read
 * or which dimension was expected. *value (if non-NULL) gets the typed
 * value in the question's unit (NAN when unreadable or of another dimension). */
lsn_check_result lsn_answer_check_number(const lsn_numq *q, const char *text,
                                         double *value, char *msg, size_t msglen);

/* Check a multiple-choice answer: a letter ("b"), a 1-based number ("2"),
 * the choice's text, or an unambiguous start of it (case-insensitive).
 * correct is 1-based; why[i] (may be NULL, or have NULL entries) explains
 * why choice i+1 is wrong. *picked gets the 1-based choice read (0 if none). */
lsn_check_result lsn_answer_check_choice(int nchoices, const char *const *choices,
                                         int correct, const char *const *why,
                                         const char *text, int *picked,
                                         char *msg, size_t msglen);

/* Format value (in `unit`) the way the learner would type it: thousands
 * separators for whole counts ("23,184 tokens"), 3 significant digits
 * otherwise ("2.83 GiB", "0.6 GiB"). Returns buf. */
char *lsn_answer_format(double value, const char *unit, char *buf, size_t buflen);

#endif
