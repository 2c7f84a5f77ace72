/* lsn_scene: what the loaded lesson asks to be shown, as one struct. The
 * runner builds it from the lesson's requests (lab.page, lab.say, lab.show,
 * lab.plot, lab.ask, lab.goal ...: lessons/API.md); the app draws it and
 * `kvlab check` reads it headless. Nothing here is Lua or ncurses.
 *
 * Lifetimes: a scene and everything it points to belong to the runner and
 * stay valid until the next runner call that can resume the lesson or load
 * another (see lsn.h). Copy what you keep longer. */
#ifndef LSN_SCENE_H
#define LSN_SCENE_H

#include <stdint.h>

/* What the lesson is doing now. */
typedef enum lsn_state {
    LSN_IDLE = 0,     /* nothing loaded */
    LSN_RUNNING,      /* engine steps in progress (lab.step/run_until): lsn_tick drives them */
    LSN_WAIT_COND,    /* lab.wait_until: lsn_tick re-checks the condition */
    LSN_WAIT_NEXT,    /* lab.pause: waits for lsn_next() */
    LSN_WAIT_ANSWER,  /* lab.ask: waits for a correct lsn_answer() (or lsn_reveal) */
    LSN_WAIT_GOAL,    /* lab.goal: waits for the learner to reach it with lsn_set_flag() */
    LSN_DONE,         /* run(lab) returned: the lesson is complete */
    LSN_ERROR,        /* a Lua error or a limit stopped the lesson: see lsn_scene.error */
} lsn_state;

/* ---- views ------------------------------------------------------------- */

/* View names a lesson can show (API.md lists what each draws), in this
 * order in lsn_scene.views: "text" (always shown), "pool", "memory",
 * "flags", "metrics", "log", "tp", "plot", "requests". */
#define LSN_NVIEWS 9
extern const char *const lsn_view_names[LSN_NVIEWS];

typedef struct lsn_highlight {
    const char *target;        /* what to highlight: a plan term ("kv", "weights"), a
                                  flag name, a metric name, a log substring, "request",
                                  "blocks", "layers" ... (per view, see API.md) */
    const int64_t *ids;        /* request ids / block ids / rank ids, may be NULL */
    int nids;
    const char *note;          /* short label to draw beside it, may be "" */
} lsn_highlight;

typedef struct lsn_view {
    const char *name;          /* one of lsn_view_names */
    int shown;                 /* lesson asked for it (lab.show / lab.hide) */
    int focus;                 /* lab.focus(name): give it the most room */
    int nhighlights;
    const lsn_highlight *highlights;
    /* lab.show(name, {k=v,...}) options as "k" -> "v" strings, e.g. for
     * "memory": upto="profile" (reveal the plan up to this start-up phase). */
    int noptions;
    const char *const *option_keys;
    const char *const *option_values;
} lsn_view;

/* ---- the line plot ------------------------------------------------------ */

typedef struct lsn_series {
    const char *name;          /* legend label */
    int npoints;
    const double *x, *y;
} lsn_series;

typedef struct lsn_plot {
    const char *title, *xlabel, *ylabel;   /* "" if unset */
    int logy;                              /* 1 = log scale on y */
    int nseries;
    const lsn_series *series;
} lsn_plot;

/* ---- a prefill/decode split, as recorded (lab.split{..., show = true}) ----- */

#define LSN_SPLIT_FLIGHTS 8        /* transfers a frame keeps (the oldest on the link) */
#define LSN_SPLIT_FRAMES 480       /* frames a recording keeps, evenly spaced in time */

/* The split at one moment of its virtual clock. Pools of one kind are added
 * up (P prefill instances: P pools). */
typedef struct lsn_split_frame {
    double t_s;                    /* the split's clock, seconds from the first arrival */
    int32_t prefill_used, decode_used;     /* blocks in use (held by a request) */
    int32_t prefill_cached, decode_cached; /* free blocks still holding a prefix-cache hash */
    int32_t nflights;              /* transfers on the link now */
    float flight_done[LSN_SPLIT_FLIGHTS];  /* of the first min(nflights, LSN_SPLIT_FLIGHTS) by
                                      start: how far each has crossed, 0..1 (0 = waits for the link) */
    int64_t kv_transfer_bytes;     /* moved so far, every rank's share */
    int32_t prefilled, transfers, finished; /* requests: prefill done, KV arrived, answered */
    double ttft_mean_s;            /* decode side so far, from arrival (0 = none yet) */
} lsn_split_frame;

typedef struct lsn_split {
    int32_t num_prefill, num_decode;       /* instances */
    int32_t prefill_blocks, decode_blocks; /* pool sizes added up (null blocks left out) */
    int32_t requests;
    const char *link;              /* "rdma", "nvlink", "pcie" */
    double link_bytes_per_s;       /* one direction, one GPU */
    double one_ttft_mean_s;        /* the same requests on one instance */
    int nframes;                   /* 1..LSN_SPLIT_FRAMES, the last one the end of the run */
    const lsn_split_frame *frames;
} lsn_split;

/* ---- questions and goals ------------------------------------------------ */

typedef enum lsn_qkind {
    LSN_Q_NUMBER = 0,          /* a number with optional unit, checked with a tolerance */
    LSN_Q_CHOICE,              /* pick one of choices[] (by letter, number or text) */
} lsn_qkind;

typedef struct lsn_question {
    lsn_qkind kind;
    const char *prompt;
    const char *unit;          /* NUMBER: unit assumed when the learner types none
                                  ("tokens", "GiB", "bytes", ""); shown beside the box */
    int nchoices;              /* CHOICE */
    const char *const *choices;
    int tries;                 /* wrong answers so far */
    int hints_total;           /* hints the lesson provides */
    int hints_shown;           /* hints given so far (lsn_hint) */
    int predict;               /* a prediction (lab.predict): every readable entry is taken */
} lsn_question;

typedef struct lsn_goal {
    const char *text;          /* what the learner must make happen */
    int met;                   /* reached (the lesson resumes on the next tick) */
    int hints_total, hints_shown;
} lsn_goal;

/* ---- flags -------------------------------------------------------------- */

/* A flag the loaded lesson lets the learner change (the lesson's `flags`
 * list; the playground allows all), with its value as the lesson's server
 * was started. Names are vLLM's dashed form ("max-model-len",
 * "gpu-memory-utilization") plus kvlab's own ("gpu", "model", "kv-cache"
 * on/off, "contiguous"). */
typedef struct lsn_flag {
    const char *name;
    const char *value;         /* current value as text ("" = the default) */
    const char *help;          /* one line: what it changes */
    int nchoices;              /* enumerated values, 0 = free text */
    const char *const *choices;
} lsn_flag;

/* ---- the whole scene ---------------------------------------------------- */

typedef struct lsn_scene {
    int lesson;                /* loaded lesson number, 0 = none */
    const char *title;         /* its title, "" if none */
    lsn_state state;
    int step;                  /* steps completed (pauses, answers, goals passed) */

    /* Narration: UTF-8 paragraphs separated by "\n\n", no markup other than
     * a line starting with "  " (keep as is: code, commands, log lines). */
    const char *text;          /* the current page, "" if none */
    const char *page_title;    /* from lab.page(title), "" if none */
    int page_no;               /* 1-based */
    const char *error;         /* LSN_ERROR: "lessons/02-x.lua:41: ...\nstack traceback:\n...";
                                  else NULL */

    const lsn_view *views;     /* LSN_NVIEWS, in lsn_view_names order */
    const lsn_plot *plot;      /* lab.plot{...}, NULL if none */
    const lsn_split *split;    /* lab.split{show = true} on this page, NULL if none: the
                                  pool view plays it (two pools and the link) */
    const lsn_question *question; /* waiting for an answer, else NULL */
    const lsn_goal *goal;      /* being worked on, else NULL */
    int nflags;
    const lsn_flag *flags;     /* the flags the learner may change */
    const char *server_error;  /* vLLM's refusal of the last start, NULL if it started */
    const char *serve_cmd;     /* the `vllm serve` command of the flags as they stand
                                  (lsn_server_command), "" without a server */
} lsn_scene;

#endif
