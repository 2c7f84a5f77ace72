/* room_msg: the classroom wire format, shared by the presenter and its
 * followers (room_pres.h, room_follow.h). A room syncs by state, not by
 * screen: a message says where the presenter's lesson is (lesson, step,
 * page, the answers and flag changes its replay needs, flags in effect,
 * view focus, engine seed and step) and a follower re-derives the scene
 * with its own lesson runtime and engine.
 *
 * Frame (all integers little-endian):
 *   0  "KVRM"            magic
 *   4  u8  version        ROOM_PROTO_VERSION; another version is refused
 *   5  u8  type           ROOM_T_*
 *   6  u16 reserved       0
 *   8  u32 payload length at most ROOM_MSG_MAX_PAYLOAD
 *  12  payload            fields: u8 tag, u16 length, value (ROOM_K_* below)
 * A list is a repeated tag; an input, flag or event is one field whose value
 * is itself a field list. Unknown tags are skipped (a newer presenter may add
 * fields without a new version); a known tag with a wrong length, a string
 * that is not printable UTF-8, a count over its bound or a number out of its
 * range makes the whole message malformed.
 *
 * The decoder trusts nothing: every length is checked against what is left,
 * every string against its bound, every number against its range, and it
 * never allocates (the message struct is fixed-size). */
#ifndef ROOM_MSG_H
#define ROOM_MSG_H

#include <stddef.h>
#include <stdint.h>

/* 2: engine images (ROOM_T_IMAGE), a message type an older follower's
 * decoder cannot skip: it is told to use the same kvlab release instead of
 * taking the first image part as a malformed stream and reconnecting. */
#define ROOM_PROTO_VERSION 2
#define ROOM_HEADER_LEN 12
#define ROOM_MSG_MAX_PAYLOAD (256u * 1024u)

#define ROOM_NAME_MAX 64        /* bytes incl. NUL: room, user, group and flag names */
#define ROOM_VALUE_MAX 256      /* bytes incl. NUL: answer texts and flag values */
#define ROOM_TITLE_MAX 160      /* bytes incl. NUL: lesson title */
#define ROOM_TEXT_MAX 512       /* bytes incl. NUL: refusal and goodbye messages */
#define ROOM_MAX_INPUTS 512     /* answers, reveals and flag changes of one lesson */
#define ROOM_MAX_FLAGS 48       /* flags in effect */
#define ROOM_MAX_EVENTS 32      /* events in one message (more: the oldest are dropped) */
#define ROOM_MAX_HINTS 8        /* hints the presenter has been given on one question */
#define ROOM_IMAGE_CHUNK 60000  /* bytes of an engine image one IMAGE message carries */
#define ROOM_IMAGE_MAX (64u << 20) /* bytes of one whole engine image */

/* Message types. */
enum {
    ROOM_T_HELLO = 1,   /* follower -> presenter, the only thing a follower sends */
    ROOM_T_WELCOME,     /* presenter -> follower: who presents what (also answers a probe) */
    ROOM_T_REFUSE,      /* presenter -> follower: not allowed in (text says why), then closed */
    ROOM_T_STATE,       /* presenter -> follower: the full state (a late joiner starts here) */
    ROOM_T_DELTA,       /* presenter -> follower: what changed since the last message */
    ROOM_T_BYE,         /* presenter -> follower: the presenter is leaving (text says why) */
    ROOM_T_IMAGE,       /* presenter -> follower: one part of an engine image (a late joiner's start) */
    ROOM_T_COUNT
};

/* HELLO modes. */
enum { ROOM_MODE_FOLLOW = 1, ROOM_MODE_PROBE = 2 /* `kvlab rooms`: welcome, then close */ };

/* What an input records, as the lesson's progress records it (lsn_progress.h). */
enum { ROOM_IN_ANSWER = 0, ROOM_IN_FLAG = 1, ROOM_IN_REVEAL = 2 };

/* Events since the last message: what the presenter did, for a follower's
 * status line and for applying a small change without a full replay. */
enum {
    ROOM_EV_NEXT = 1,   /* n: the next step (arg = step now) */
    ROOM_EV_BACK,       /* b: one step back (arg = step now) */
    ROOM_EV_RESET,      /* the lesson restarted from step 0 */
    ROOM_EV_LOAD,       /* another lesson opened (arg = lesson number) */
    ROOM_EV_ANSWER,     /* a question answered (value = the text) */
    ROOM_EV_REVEAL,     /* a question's answer revealed */
    ROOM_EV_FLAG,       /* a flag changed (name, value) */
    ROOM_EV_FOCUS,      /* Tab: view focus (arg = pane, -1 = the lesson's) */
    ROOM_EV_PAUSE,      /* space (arg = 1 paused, 0 running) */
    ROOM_EV_SPEED,      /* +/- (arg = speed x 1000) */
    ROOM_EV_COUNT
};

/* Fields a STATE must carry, and those a DELTA may (room_msg.have). */
enum {
    ROOM_H_LESSON = 1u << 0,      /* lesson, lesson_title */
    ROOM_H_STEP = 1u << 1,        /* step, page, run_state */
    ROOM_H_INPUTS = 1u << 2,      /* ninputs, inputs */
    ROOM_H_FLAGS = 1u << 3,       /* nflags, flags */
    ROOM_H_ENGINE = 1u << 4,      /* engine_seed, engine_step, server_gen (and step_starts: 0 when absent) */
    ROOM_H_VIEW = 1u << 5,        /* view_focus, paused, speed */
    ROOM_H_FOLLOWERS = 1u << 6,   /* followers */
    ROOM_H_SCREEN = 1u << 7,      /* rewind, typed answer, verdict, hints, flag editing (room_screen) */
};
#define ROOM_H_FULL (ROOM_H_LESSON | ROOM_H_STEP | ROOM_H_INPUTS | ROOM_H_FLAGS | ROOM_H_ENGINE | ROOM_H_VIEW)

typedef struct room_input {
    int32_t wait;                 /* step being worked on when it happened (0-based) */
    uint8_t kind;                 /* ROOM_IN_* */
    char name[ROOM_NAME_MAX];     /* ROOM_IN_FLAG: flag name; else "" */
    char value[ROOM_VALUE_MAX];   /* answer text or flag value; "" for a reveal */
} room_input;

typedef struct room_flag {
    char name[ROOM_NAME_MAX];
    char value[ROOM_VALUE_MAX];   /* "" = the default */
} room_flag;

typedef struct room_event {
    uint8_t kind;                 /* ROOM_EV_* */
    int64_t arg;
    char name[ROOM_NAME_MAX];
    char value[ROOM_VALUE_MAX];
} room_event;

/* What the presenter's screen shows beyond the lesson's own state, so that
 * followers see it as the presenter's: the step it rewound to (as
 * app_rewind_where names it, the run counted back from the newest so that
 * a follower whose history holds other older runs finds the same one),
 * the answer being typed, the last verdict (a wrong answer's too), the
 * hints given, and the flag being edited with its text. */
typedef struct room_screen {
    int32_t rewind_back;          /* -1 live; else the run shown, 0 = the newest, 1 = the one before, ... */
    int64_t rewind_step;          /* that run's engine step shown */
    uint8_t input_active;         /* the answer box has the keys */
    char typed[ROOM_VALUE_MAX];   /* its text */
    int8_t verdict_kind;          /* the last answer's verdict (lsn_verdict_kind), -1 none */
    char verdict[ROOM_TEXT_MAX];
    int nhints;
    char hints[ROOM_MAX_HINTS][ROOM_TEXT_MAX];
    uint8_t flag_editing;         /* the flags view: 0 closed, 1 has the keys, 2 typing a value */
    int32_t flag_sel;             /* the flags view's selected row */
    char flag_typed[ROOM_VALUE_MAX];
} room_screen;

/* Where the presenter's lesson is. */
typedef struct room_state {
    uint64_t seq;                 /* message number, increasing per presenter run */
    uint64_t base_seq;            /* DELTA: the message it follows (seq - 1 when none was skipped) */
    uint64_t run_id;              /* changes when the presenter restarts (a new run of seq) */
    int32_t lesson;               /* lesson number, 0 = none loaded (1..99) */
    char lesson_title[ROOM_TITLE_MAX];
    int32_t step;                 /* steps completed (lsn_step) */
    int32_t page;                 /* page number, 1-based (0 = none) */
    uint8_t run_state;            /* the runner's lsn_state */
    int32_t view_focus;           /* pane given priority (-1 = the lesson's choice) */
    uint8_t paused;
    double speed;                 /* animation speed factor, (0, 64] */
    uint64_t engine_seed;
    uint64_t engine_step;         /* engine steps since the lesson's server last started */
    uint32_t server_gen;          /* server starts in this lesson so far */
    uint32_t step_starts;         /* server starts since the lesson's current step began (lsn_step_starts) */
    int32_t followers;            /* how many follow (for a follower's header) */
    room_screen scr;              /* ROOM_H_SCREEN (a STATE may carry it; a presenter of this release always does) */
    int ninputs;
    room_input inputs[ROOM_MAX_INPUTS];
    int nflags;
    room_flag flags[ROOM_MAX_FLAGS];
    int nevents;
    room_event events[ROOM_MAX_EVENTS];
} room_state;

/* One decoded message. Which part is meaningful depends on type.
 *
 * IMAGE: a joining follower's start, sent before its first STATE: the
 * presenter's engine (and what the lesson runtime needs beside it) as one
 * opaque image (lsn_engine_image, lessons/host/lsn.h), cut into parts of at
 * most ROOM_IMAGE_CHUNK bytes sent in order. Each part names the run it
 * belongs to (st.run_id, st.server_gen), the engine step it was taken at
 * (st.engine_step), the whole image's length (img_total, at most
 * ROOM_IMAGE_MAX) and where the part goes (img_off, img_len). */
typedef struct room_msg {
    uint8_t type;                 /* ROOM_T_* */
    unsigned have;                /* STATE / DELTA: ROOM_H_* present (STATE: all of ROOM_H_FULL) */
    room_state st;                /* STATE, DELTA; WELCOME uses lesson, lesson_title, followers;
                                     IMAGE uses run_id, server_gen, engine_step */
    uint8_t img_data[ROOM_IMAGE_CHUNK]; /* IMAGE: the part's bytes (never cleared by room_msg_init) */
    uint8_t mode;                 /* HELLO: ROOM_MODE_* */
    char user[ROOM_NAME_MAX];     /* HELLO: the follower's user name (for display only) */
    char room[ROOM_NAME_MAX];     /* WELCOME: room name */
    char presenter[ROOM_NAME_MAX];/* WELCOME: presenter's user name */
    char group[ROOM_NAME_MAX];    /* WELCOME: group the room is open to, "" = presenter only */
    int32_t pid;                  /* WELCOME: presenter's process id */
    char text[ROOM_TEXT_MAX];     /* REFUSE, BYE: one line for the follower */
    uint32_t img_total, img_off, img_len; /* IMAGE: the whole image's bytes; this part's place and size */
} room_msg;

/* Empty message of the given type (all counts 0, strings "", view_focus -1,
 * speed 1; list entries past their counts are left as they were). */
void room_msg_init(room_msg *m, int type);

/* Encode m into buf[cap] as one frame. For STATE every ROOM_H_FULL field is
 * written whatever m->have says; for DELTA only the fields in m->have.
 * Counts above their bound are cut to the bound. Returns the frame's length
 * in bytes, or 0 when it does not fit cap or ROOM_MSG_MAX_PAYLOAD (or a
 * string is too long to represent, which room_msg_init'ed structs never are). */
size_t room_msg_encode(const room_msg *m, uint8_t *buf, size_t cap);

/* Decode the frame at the start of buf[len]. Returns 1 with *out filled and
 * *used = the frame's length; 0 when buf holds only part of a frame (read
 * more; *used = 0); -1 when the bytes are not a valid frame (bad magic,
 * version, type, length, a malformed field, a STATE missing a field), with
 * one line in err. A stream that gave -1 cannot be resynchronised: close it. */
int room_msg_decode(const uint8_t *buf, size_t len, room_msg *out, size_t *used, char *err, size_t errlen);

/* Merge a DELTA into a state: the fields it has replace those in *st, its
 * events are appended (the oldest dropped past ROOM_MAX_EVENTS), seq is
 * taken. Returns 0, or -1 when the delta does not follow st (its base_seq is
 * not st->seq, or another run_id): the caller waits for the next STATE. */
int room_state_apply_delta(room_state *st, const room_msg *delta);

/* Is s a string the wire may carry: at most max-1 bytes of valid UTF-8 with
 * no control characters (a follower prints names and messages it gets)? */
int room_text_ok(const char *s, size_t len, size_t max);

/* Make s (NUL-terminated within max bytes, cut there otherwise) a string
 * room_text_ok accepts: each byte that does not start a valid printable
 * UTF-8 character becomes '?'. */
void room_text_clean(char *s, size_t max);

/* Type name for messages ("state", "delta", ...), "?" when out of range. */
const char *room_msg_type_name(int type);

#endif
