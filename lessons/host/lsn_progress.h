/* lsn_progress: the learner's progress file (JSON, read and written with
 * cJSON), $XDG_STATE_HOME/kvlab/progress.json, else
 * ~/.local/state/kvlab/progress.json (XDG Base Directory spec: state data).
 *
 * Format (format_version 1):
 *   {"format_version": 1, "current": 2,
 *    "lessons": {"1": {"step": 4, "done": true,
 *                      "inputs": [{"wait": 2, "answer": "407,000 tokens"},
 *                                 {"wait": 3, "flag": "max-model-len", "value": "8192"},
 *                                 {"wait": 5, "reveal": true}]}}}
 * A lesson may also keep "scores", the best way each of its challenges was
 * solved (lesson 21's golf, lab.score in lessons/API.md):
 *    "scores": {"challenge 1": {"changes": 1, "rank": 3, "lever": "gpu",
 *                               "cost": "a smaller card"}}
 * fewer flag changes first, then a lower rank on the cheapest-first list.
 * The learner's vLLM release, chosen once (kvlab --vllm-version V, the flags
 * view's vllm-version row) and kept for every lesson:
 *    "vllm_version": "0.33.0", "accounting": "release"
 * ("textbook": the course's simplified arithmetic, kvlab --accounting
 * textbook); absent = the newest release.
 * "step" is the number of steps completed; "inputs" are what the learner fed
 * the lesson, tagged with the wait (0-based: the step being worked on) where
 * they happened, so the runner can replay the lesson to its step.
 * Writes are atomic: a temp file in the same folder, fsync, rename. Two
 * kvlab processes of one user share the file: a save takes an flock on
 * "<path>.lock", reads the file again and merges per lesson (a lesson only
 * one process changed since it last read the file is taken from that one;
 * one both changed goes to the furthest step, with that run's inputs; done
 * if either is; the best score of each challenge), so neither erases the
 * other's lessons. A progress.json that is a symlink is followed (the file
 * it names is replaced, the link stays); one whose target cannot be
 * resolved is refused. */
#ifndef LSN_PROGRESS_H
#define LSN_PROGRESS_H

#include <stddef.h>

#define LSN_MAX_LESSONS 99
#define LSN_MAX_STEPS 100000              /* steps of one lesson (kvlab check's cap on waits) */
#define LSN_MAX_INPUTS 100000             /* recorded inputs of one lesson */
#define LSN_MAX_INPUT_TEXT 4096           /* bytes of one answer or flag value */
#define LSN_PROGRESS_MAX_BYTES (4u << 20) /* a progress file is small: more is not ours */

typedef enum lsn_input_kind { LSN_IN_ANSWER = 0, LSN_IN_FLAG, LSN_IN_REVEAL } lsn_input_kind;

typedef struct lsn_input {
    int wait;                  /* step being worked on when it happened */
    lsn_input_kind kind;
    char *name;                /* LSN_IN_FLAG: flag name; else NULL */
    char *value;               /* answer text or flag value; NULL for reveal */
} lsn_input;

#define LSN_MAX_SCORES 16                 /* challenges scored per lesson */
#define LSN_SCORE_KEY 48                  /* bytes of a challenge's name, incl. the NUL */
#define LSN_SCORE_TEXT 96                 /* bytes of a lever or cost text, incl. the NUL */

/* How a challenge was solved: the best kept (lsn_progress_score). */
typedef struct lsn_score {
    char key[LSN_SCORE_KEY];   /* the challenge ("challenge 1") */
    int changes;               /* flag changes it took (0..LSN_MAX_STEPS) */
    int rank;                  /* the lever's place on the cheapest-first list (1 = cheapest; 0 = not on it) */
    char lever[LSN_SCORE_TEXT];/* the flags changed ("gpu") */
    char cost[LSN_SCORE_TEXT]; /* what that lever costs ("a smaller card", "context given up") */
} lsn_score;

typedef struct lsn_lesson_progress {
    int step;                  /* steps completed (0 = not started) */
    int done;                  /* completed once */
    int ninputs, cap;
    lsn_input *inputs;
    int nscores;               /* best scores of its challenges, kept across resets */
    lsn_score scores[LSN_MAX_SCORES];
} lsn_lesson_progress;

#define LSN_RELEASE_TEXT 16               /* bytes of a release ("0.33.0") or accounting, incl. the NUL */

typedef struct lsn_progress {
    int current;               /* lesson to resume, 0 = none */
    char vllm_version[LSN_RELEASE_TEXT]; /* the learner's release, "" = the newest */
    char accounting[LSN_RELEASE_TEXT];   /* "release", "textbook", "" = release */
    lsn_lesson_progress lessons[LSN_MAX_LESSONS + 1]; /* index = lesson number */
    /* Each lesson as this process last read or wrote it (its JSON text; NULL
     * = none): a save merges with the file per lesson against it. */
    char *base[LSN_MAX_LESSONS + 1];
} lsn_progress;

/* Empty progress. */
void lsn_progress_init(lsn_progress *p);
/* Free inputs (p itself is the caller's). */
void lsn_progress_clear(lsn_progress *p);

/* The progress file path for state_dir (NULL = XDG default, see above) into
 * buf. Returns 0, or -1 when neither XDG_STATE_HOME nor HOME is set. */
int lsn_progress_path(const char *state_dir, char *buf, size_t buflen);

/* Load path into *p (which is cleared first), read with kv_read_file
 * (regular files only, at most LSN_PROGRESS_MAX_BYTES). Returns 0 when
 * loaded or when the file does not exist (empty progress); 1 when the file
 * was corrupt or held a value this program never writes (a step, wait or
 * lesson number out of range, a text too long): it was renamed to
 * "<path>.corrupt-<unix time>", *p is empty and notice holds one line saying
 * so; -1 when it could not be read (a FIFO, a folder, no permission: notice
 * says why; *p is empty, the file is left alone). Temp files of saves whose
 * process died ("<path>.tmp-<pid>") are removed first. */
int lsn_progress_load(lsn_progress *p, const char *path, char *notice, size_t noticelen);

/* Write *p to path atomically, creating missing folders (mode 0700), under
 * the lock and merged with the file as said above. The lessons this process
 * has not changed since its last read or write are brought up to date from
 * the file in *p. Returns 0, or -1 with one line in err (*p unchanged). */
int lsn_progress_save(lsn_progress *p, const char *path, char *err, size_t errlen);

/* Append an input to lesson n (copies the strings). Returns 0 or -1 (no memory). */
int lsn_progress_add_input(lsn_progress *p, int n, int wait, lsn_input_kind kind,
                           const char *name, const char *value);

/* Record a solution of one of lesson n's challenges: it replaces the kept
 * one when it took fewer changes, or as many at a lower nonzero rank (a
 * first one is always kept). *before (may be NULL) gets the score kept
 * before this one (key "" when none). Returns 1 when s is the new best, 0
 * when the old one stays, -1 on bad arguments (n out of range, more than
 * LSN_MAX_SCORES challenges, changes or rank out of range). */
int lsn_progress_score(lsn_progress *p, int n, const lsn_score *s, lsn_score *before);

/* Drop lesson n's inputs with wait >= from_wait. */
void lsn_progress_truncate(lsn_progress *p, int n, int from_wait);

#endif
