/* kv_history: an engine's run kept so a learner can move back and forth
 * through it, built on the engine's determinism: the same config and the
 * same inputs in the same order give the same state (kv_engine_set_journal).
 *
 * The history records every input the live engine gets (kv_engine.h's
 * journal: submits, steps, aborts, prefix-cache resets, mode switches, clock
 * moves, lesson log lines) and, every K steps, a checkpoint: a compact image
 * of the engine's whole state (kv_snapshot.h). Seeking to a step loads the
 * nearest checkpoint at or before it into a separate replay engine (host
 * backend, no K/V written or verified) and replays the recorded inputs up to
 * that step, so the live engine is never touched and returning to the
 * present costs nothing. A restart (a new engine, e.g. with new flags) is
 * attached as a new segment, a run: positions run on across runs, so one
 * timeline holds every run (a seek lands in the run that was live at that
 * position), and each restart is a KV_MARK_RESTART mark where its run
 * starts. Runs are numbered 0, 1, ... in attach order for the history's
 * life; a run can carry a note, the caller's bytes about it (the lesson
 * runtime keeps its start-up plan and flags there).
 *
 * Positions: position p of a segment is the state after its p-th step and
 * every input given before the next step, i.e. what the live engine looked
 * like just before that next step ran; the newest position of the attached
 * segment is the live engine now. Global positions number every segment's
 * positions in order from 0 and never change, also when old ones are
 * forgotten (kv_history_first moves up).
 *
 * Memory: checkpoints, the input journal, the event marks and the runs'
 * notes stay under max_bytes (default 64 MiB). Checkpoints are kept every
 * K steps; when the bound is reached K doubles and every other checkpoint
 * goes (uniform spacing, so the longest replay of a seek is K steps
 * wherever it lands); when thinning cannot help (a journal alone past the
 * bound) the oldest steps are forgotten, a whole run when its last
 * checkpoint would go. The replay engine is one more engine of the live
 * engine's config (kv_engine_host_bytes), not counted in max_bytes.
 * bench/bench_history.c measures both figures over a 100,000-step run.
 *
 * Not thread-safe: the thread that drives the live engine uses the history. */
#ifndef KV_HISTORY_H
#define KV_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "kv_engine.h"

#define KV_HISTORY_DEFAULT_BYTES (64ull << 20)
#define KV_HISTORY_DEFAULT_EVERY 32   /* steps between checkpoints before any thinning */

typedef struct kv_history_opts {
    uint64_t max_bytes;   /* checkpoints + journal + marks + notes; 0 = KV_HISTORY_DEFAULT_BYTES */
    int32_t every;        /* first checkpoint spacing, steps; 0 = KV_HISTORY_DEFAULT_EVERY */
} kv_history_opts;

typedef struct kv_history kv_history;

/* An empty history (opts NULL = defaults). NULL with err on out of memory
 * or a max_bytes below 64 KiB. */
kv_history *kv_history_create(const kv_history_opts *opts, char *err, size_t errlen);

/* Detach and free everything, the replay engine included. NULL allowed. */
void kv_history_destroy(kv_history *h);

/* Start recording live engine e as a new segment (the previous one, if
 * still attached, is detached and kept): copies e's config, checkpoints its
 * state now and sets e's journal (kv_engine_set_journal) to the history.
 * When e is destroyed the segment ends there by itself. 0, or ENOMEM /
 * EINVAL with one line in err (nothing recorded then). */
int kv_history_attach(kv_history *h, kv_engine *e, char *err, size_t errlen);

/* Stop recording (the engine's journal is cleared; what was recorded stays
 * seekable). No-op when nothing is attached. */
void kv_history_detach(kv_history *h);

/* The live engine being recorded, or NULL. */
kv_engine *kv_history_live(const kv_history *h);

/* Note the outcome of the live engine's latest step (the event marks
 * below); the journal does it before each input, so call this before
 * reading marks or the present when the last input was a step. */
void kv_history_sync(kv_history *h);

/* Oldest kept and newest global positions; -1, -1 when nothing is recorded.
 * The present moves on with the live engine's steps (call kv_history_sync
 * first when the last input was a step). */
int64_t kv_history_first(const kv_history *h);
int64_t kv_history_present(const kv_history *h);

/* Segment index (0 = oldest kept) and engine step of global position pos.
 * 0, or -1 when pos is not kept. */
int kv_history_locate(const kv_history *h, int64_t pos, int32_t *segment, int64_t *step);

/* Put the replay engine at global position pos (first..present). Forward
 * from where the replay engine already is when that is nearer than a
 * checkpoint. 0; EINVAL when pos is not kept; ENOMEM. */
int kv_history_seek(kv_history *h, int64_t pos, char *err, size_t errlen);

/* The replay engine at the last successful seek (read it through the
 * const accessors of kv_engine.h and kv_frame.h), and that position; NULL
 * and -1 before any seek. Valid until the next seek, attach or destroy. */
const kv_engine *kv_history_engine(const kv_history *h);
int64_t kv_history_position(const kv_history *h);

/* ---- Runs ---------------------------------------------------------------- */

/* Runs attached so far: the newest run's number + 1 (0 before any attach).
 * A restart makes it grow: a caller that compares it between frames (a
 * classroom presenter) learns that a new run began, also several in one
 * frame. */
int64_t kv_history_runs(const kv_history *h);

/* The run number of global position pos, or -1 when pos is not kept. */
int64_t kv_history_run_at(const kv_history *h, int64_t pos);

/* The global position of engine step `step` of run `run` (what (run, step)
 * names in another process that recorded the same runs), or -1 when that
 * run or step is not kept. */
int64_t kv_history_position_of(const kv_history *h, int64_t run, int64_t step);

/* First and last global positions of run `run` (either pointer may be
 * NULL). 0, or -1 when the run is not kept. */
int kv_history_run_span(const kv_history *h, int64_t run, int64_t *first, int64_t *last);

/* Keep a copy of len bytes (at most max_bytes / 16) with the run being
 * recorded, replacing any earlier note; counted in max_bytes and forgotten
 * with the run. 0; EINVAL when nothing is attached or len is too big;
 * ENOMEM. */
int kv_history_set_note(kv_history *h, const void *data, size_t len, char *err, size_t errlen);

/* The note of the run holding pos (*len its bytes; len may be NULL), or
 * NULL when it has none or pos is not kept. Valid until that run is
 * forgotten, its note replaced or the history destroyed. */
const void *kv_history_note(const kv_history *h, int64_t pos, size_t *len);

/* ---- Notable events -------------------------------------------------- */

enum {
    KV_MARK_PREEMPT = 1 << 0,   /* a request was preempted in the step */
    KV_MARK_EVICT = 1 << 1,     /* cached blocks began to be evicted (the first step of a run of
                                   steps that evict; a full pool evicts at almost every step) */
    KV_MARK_HIT = 1 << 2,       /* an admitted request had a prefix-cache hit */
    KV_MARK_FINISH = 1 << 3,    /* a request finished */
    KV_MARK_RESTART = 1 << 4,   /* a new engine (segment) starts here */
    KV_MARK_ALL = 0x1f
};

/* One position where something notable happened: the position right after
 * the step that did it (the step's consequences are shown there). */
typedef struct kv_history_mark {
    int64_t pos;
    uint32_t kinds;             /* KV_MARK_* */
    int32_t count;              /* preemptions in the step, else finishes, else 1 */
    int64_t req_id;             /* the first preempted request, else the first finished, else
                                   the first admitted with a hit; -1 for a restart or an eviction */
} kv_history_mark;

/* The nearest mark strictly after (dir > 0) or before (dir < 0) pos with
 * one of kinds; 0 and *out filled, or -1 when there is none. */
int kv_history_next_mark(const kv_history *h, int64_t pos, int dir, uint32_t kinds, kv_history_mark *out);

/* KV_MARK_* kinds of every mark in [from, to) OR-ed (for drawing a
 * timeline column). */
uint32_t kv_history_marks_between(const kv_history *h, int64_t from, int64_t to);

/* ---- Figures ----------------------------------------------------------- */

typedef struct kv_history_stats {
    uint64_t bytes;             /* all of the below: what max_bytes bounds */
    uint64_t checkpoint_bytes, journal_bytes, mark_bytes; /* journal_bytes: with the runs' notes */
    uint64_t max_bytes;
    uint64_t replay_engine_bytes; /* the replay engine (kv_engine_host_bytes), 0 before a seek */
    int32_t checkpoints, segments;
    int32_t every;              /* current checkpoint spacing K, steps */
    int64_t marks;
    int64_t forgotten;          /* positions dropped from the start to stay under max_bytes */
    int64_t last_seek_steps;    /* steps the last seek replayed (at most every) */
} kv_history_stats;

void kv_history_get_stats(const kv_history *h, kv_history_stats *out);

#endif
