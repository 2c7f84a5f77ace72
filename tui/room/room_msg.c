/* room_msg: encoder and hostile-input decoder of the classroom wire format
 * (the layout is in room_msg.h). */
#include "room_msg.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kv_util.h"

/* Top-level field tags. */
enum {
    K_MODE = 1, K_USER, K_ROOM, K_PRESENTER, K_GROUP, K_PID, K_TEXT,
    K_HAVE = 9,
    K_SEQ = 10, K_BASE, K_RUN, K_LESSON, K_TITLE, K_STEP, K_PAGE, K_RSTATE, K_FOCUS, K_PAUSED,
    K_SPEED, K_ESEED, K_ESTEP, K_SGEN, K_FOLLOWERS,
    K_IMG_TOTAL = 25, K_IMG_OFF, K_IMG_DATA,
    K_INPUT = 30, K_FLAG, K_EVENT,
    K_RW_BACK = 40, K_RW_STEP, K_IN_ACTIVE, K_TYPED, K_VKIND, K_VERDICT, K_HINT, K_FEDIT, K_FSEL, K_FTYPED,
    K_SSTARTS = 50,
    K_MAX = 64
};
/* Tags inside an input, a flag and an event. */
enum { I_WAIT = 1, I_KIND, I_NAME, I_VALUE };
enum { F_NAME = 1, F_VALUE };
enum { E_KIND = 1, E_ARG, E_NAME, E_VALUE };

#define STEP_MAX 1000000      /* far above any lesson's step count */
#define FOLLOWERS_MAX 1000000

/* ---- text check ---------------------------------------------------------- */

int room_text_ok(const char *s, size_t len, size_t max)
{
    if (len >= max)
        return 0;
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned c = p[i];
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f)
                return 0;
            i++;
            continue;
        }
        int n;
        unsigned cp, min;
        if ((c & 0xe0) == 0xc0) { n = 1; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { n = 2; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { n = 3; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (len - i < (size_t)n + 1)
            return 0;
        for (int k = 1; k <= n; k++) {
            unsigned cc = p[i + (size_t)k];
            if ((cc & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (cc & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f))
            return 0;
        i += (size_t)n + 1;
    }
    return 1;
}

void room_text_clean(char *s, size_t max)
{
    if (!max)
        return;
    s[max - 1] = '\0';
    size_t len = strlen(s), i = 0;
    while (i < len) {
        size_t n = 1;
        unsigned c = (unsigned char)s[i];
        if (c >= 0xc0)
            n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : 4;
        if (n > len - i || !room_text_ok(s + i, n, n + 1)) {
            s[i++] = '?';
            continue;
        }
        i += n;
    }
}

const char *room_msg_type_name(int type)
{
    static const char *const names[ROOM_T_COUNT] = {
        [ROOM_T_HELLO] = "hello", [ROOM_T_WELCOME] = "welcome", [ROOM_T_REFUSE] = "refuse",
        [ROOM_T_STATE] = "state", [ROOM_T_DELTA] = "delta", [ROOM_T_BYE] = "bye",
        [ROOM_T_IMAGE] = "image",
    };
    return type > 0 && type < ROOM_T_COUNT ? names[type] : "?";
}

void room_msg_init(room_msg *m, int type)
{
    /* The lists are read only up to their counts: clearing them (190 KiB)
     * for every message would cost more than the message. */
    memset(m, 0, offsetof(room_msg, st) + offsetof(room_state, inputs));
    m->st.nflags = 0;
    m->st.nevents = 0;
    memset(&m->mode, 0, sizeof *m - offsetof(room_msg, mode));
    m->type = (uint8_t)type;
    m->st.view_focus = -1;
    m->st.speed = 1.0;
    m->st.scr.rewind_back = -1;
    m->st.scr.verdict_kind = -1;
}

/* ---- encoding ---------------------------------------------------------- */

typedef struct wbuf {
    uint8_t *p;
    size_t cap, len;
    int bad;                  /* something did not fit */
} wbuf;

static void put(wbuf *w, const void *src, size_t n)
{
    if (w->bad || n > w->cap - w->len) {
        w->bad = 1;
        return;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void put_le(wbuf *w, uint64_t v, int bytes)
{
    uint8_t b[8];
    for (int i = 0; i < bytes; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, (size_t)bytes);
}

static void field_hdr(wbuf *w, int tag, size_t len)
{
    if (len > 0xffff) {
        w->bad = 1;
        return;
    }
    put_le(w, (uint64_t)tag, 1);
    put_le(w, len, 2);
}

static void put_u(wbuf *w, int tag, uint64_t v, int bytes)
{
    field_hdr(w, tag, (size_t)bytes);
    put_le(w, v, bytes);
}

static void put_str(wbuf *w, int tag, const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    if (n >= max) { /* not NUL-terminated within its bound */
        w->bad = 1;
        return;
    }
    field_hdr(w, tag, n);
    put(w, s, n);
}

static void put_f64(wbuf *w, int tag, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    put_u(w, tag, v, 8);
}

/* A nested field: reserve its header, write the body, patch the length. */
static size_t nest_begin(wbuf *w, int tag)
{
    size_t at = w->len;
    field_hdr(w, tag, 0);
    return at;
}

static void nest_end(wbuf *w, size_t at)
{
    if (w->bad)
        return;
    size_t body = w->len - at - 3;
    if (body > 0xffff) {
        w->bad = 1;
        return;
    }
    w->p[at + 1] = (uint8_t)body;
    w->p[at + 2] = (uint8_t)(body >> 8);
}

static int clampi(int v, int max) { return v < 0 ? 0 : v > max ? max : v; }

static void put_state(wbuf *w, const room_msg *m, unsigned have)
{
    const room_state *s = &m->st;
    put_u(w, K_HAVE, have, 4);
    put_u(w, K_SEQ, s->seq, 8);
    put_u(w, K_RUN, s->run_id, 8);
    if (m->type == ROOM_T_DELTA)
        put_u(w, K_BASE, s->base_seq, 8);
    if (have & ROOM_H_LESSON) {
        put_u(w, K_LESSON, (uint32_t)s->lesson, 4);
        put_str(w, K_TITLE, s->lesson_title, sizeof s->lesson_title);
    }
    if (have & ROOM_H_STEP) {
        put_u(w, K_STEP, (uint32_t)s->step, 4);
        put_u(w, K_PAGE, (uint32_t)s->page, 4);
        put_u(w, K_RSTATE, s->run_state, 1);
    }
    if (have & ROOM_H_VIEW) {
        put_u(w, K_FOCUS, (uint32_t)s->view_focus, 4);
        put_u(w, K_PAUSED, s->paused, 1);
        put_f64(w, K_SPEED, s->speed);
    }
    if (have & ROOM_H_ENGINE) {
        put_u(w, K_ESEED, s->engine_seed, 8);
        put_u(w, K_ESTEP, s->engine_step, 8);
        put_u(w, K_SGEN, s->server_gen, 4);
        put_u(w, K_SSTARTS, s->step_starts, 4);
    }
    if (have & ROOM_H_FOLLOWERS)
        put_u(w, K_FOLLOWERS, (uint32_t)s->followers, 4);
    if (have & ROOM_H_SCREEN) {
        const room_screen *c = &s->scr;
        put_u(w, K_RW_BACK, (uint32_t)c->rewind_back, 4);
        put_u(w, K_RW_STEP, (uint64_t)c->rewind_step, 8);
        put_u(w, K_IN_ACTIVE, c->input_active, 1);
        put_str(w, K_TYPED, c->typed, sizeof c->typed);
        put_u(w, K_VKIND, (uint8_t)c->verdict_kind, 1);
        put_str(w, K_VERDICT, c->verdict, sizeof c->verdict);
        for (int i = 0; i < clampi(c->nhints, ROOM_MAX_HINTS); i++)
            put_str(w, K_HINT, c->hints[i], sizeof c->hints[i]);
        put_u(w, K_FEDIT, c->flag_editing, 1);
        put_u(w, K_FSEL, (uint32_t)c->flag_sel, 4);
        put_str(w, K_FTYPED, c->flag_typed, sizeof c->flag_typed);
    }
    if (have & ROOM_H_INPUTS) {
        int n = clampi(s->ninputs, ROOM_MAX_INPUTS);
        for (int i = 0; i < n; i++) {
            const room_input *in = &s->inputs[i];
            size_t at = nest_begin(w, K_INPUT);
            put_u(w, I_WAIT, (uint32_t)in->wait, 4);
            put_u(w, I_KIND, in->kind, 1);
            put_str(w, I_NAME, in->name, sizeof in->name);
            put_str(w, I_VALUE, in->value, sizeof in->value);
            nest_end(w, at);
        }
    }
    if (have & ROOM_H_FLAGS) {
        int n = clampi(s->nflags, ROOM_MAX_FLAGS);
        for (int i = 0; i < n; i++) {
            size_t at = nest_begin(w, K_FLAG);
            put_str(w, F_NAME, s->flags[i].name, sizeof s->flags[i].name);
            put_str(w, F_VALUE, s->flags[i].value, sizeof s->flags[i].value);
            nest_end(w, at);
        }
    }
    int ne = clampi(s->nevents, ROOM_MAX_EVENTS);
    for (int i = 0; i < ne; i++) {
        const room_event *e = &s->events[i];
        size_t at = nest_begin(w, K_EVENT);
        put_u(w, E_KIND, e->kind, 1);
        put_u(w, E_ARG, (uint64_t)e->arg, 8);
        put_str(w, E_NAME, e->name, sizeof e->name);
        put_str(w, E_VALUE, e->value, sizeof e->value);
        nest_end(w, at);
    }
}

size_t room_msg_encode(const room_msg *m, uint8_t *buf, size_t cap)
{
    wbuf w = {buf, cap, 0, 0};
    put(&w, "KVRM", 4);
    put_le(&w, ROOM_PROTO_VERSION, 1);
    put_le(&w, m->type, 1);
    put_le(&w, 0, 2);
    put_le(&w, 0, 4); /* payload length, patched below */
    switch (m->type) {
    case ROOM_T_HELLO:
        put_u(&w, K_MODE, m->mode, 1);
        put_str(&w, K_USER, m->user, sizeof m->user);
        break;
    case ROOM_T_WELCOME:
        put_str(&w, K_ROOM, m->room, sizeof m->room);
        put_str(&w, K_PRESENTER, m->presenter, sizeof m->presenter);
        put_str(&w, K_GROUP, m->group, sizeof m->group);
        put_u(&w, K_PID, (uint32_t)m->pid, 4);
        put_u(&w, K_LESSON, (uint32_t)m->st.lesson, 4);
        put_str(&w, K_TITLE, m->st.lesson_title, sizeof m->st.lesson_title);
        put_u(&w, K_FOLLOWERS, (uint32_t)m->st.followers, 4);
        break;
    case ROOM_T_REFUSE:
    case ROOM_T_BYE:
        put_str(&w, K_TEXT, m->text, sizeof m->text);
        break;
    case ROOM_T_STATE:
        put_state(&w, m, ROOM_H_FULL | (m->have & (ROOM_H_FOLLOWERS | ROOM_H_SCREEN)));
        break;
    case ROOM_T_DELTA:
        put_state(&w, m, m->have & (ROOM_H_FULL | ROOM_H_FOLLOWERS | ROOM_H_SCREEN));
        break;
    case ROOM_T_IMAGE:
        if (m->img_len < 1 || m->img_len > ROOM_IMAGE_CHUNK || m->img_total > ROOM_IMAGE_MAX ||
            m->img_off > m->img_total || m->img_len > m->img_total - m->img_off)
            return 0;
        put_u(&w, K_RUN, m->st.run_id, 8);
        put_u(&w, K_SGEN, m->st.server_gen, 4);
        put_u(&w, K_ESTEP, m->st.engine_step, 8);
        put_u(&w, K_IMG_TOTAL, m->img_total, 4);
        put_u(&w, K_IMG_OFF, m->img_off, 4);
        field_hdr(&w, K_IMG_DATA, m->img_len);
        put(&w, m->img_data, m->img_len);
        break;
    default:
        return 0;
    }
    if (w.bad || w.len - ROOM_HEADER_LEN > ROOM_MSG_MAX_PAYLOAD)
        return 0;
    uint32_t pl = (uint32_t)(w.len - ROOM_HEADER_LEN);
    for (int i = 0; i < 4; i++)
        buf[8 + i] = (uint8_t)(pl >> (8 * i));
    return w.len;
}

/* ---- decoding ---------------------------------------------------------- */

typedef struct rbuf {
    const uint8_t *p;
    size_t len, at;
} rbuf;

static uint64_t le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Next field of r: 1 with tag/value, 0 at the end, -1 when cut short. */
static int next_field(rbuf *r, int *tag, const uint8_t **val, size_t *vlen)
{
    if (r->at == r->len)
        return 0;
    if (r->len - r->at < 3)
        return -1;
    *tag = r->p[r->at];
    size_t n = (size_t)le(r->p + r->at + 1, 2);
    if (n > r->len - r->at - 3)
        return -1;
    *val = r->p + r->at + 3;
    *vlen = n;
    r->at += 3 + n;
    return 1;
}

typedef struct dctx {
    char *err;
    size_t errlen;
} dctx;

#define BAD(...) kv_errf(d->err, d->errlen, -1, __VA_ARGS__)

static int get_u(dctx *d, const char *what, const uint8_t *v, size_t n, int bytes, uint64_t *out)
{
    if (n != (size_t)bytes)
        return BAD("room message: %s has %zu bytes, not %d", what, n, bytes);
    *out = le(v, bytes);
    return 0;
}

/* A signed 32-bit field within [lo, hi]. */
static int get_i32(dctx *d, const char *what, const uint8_t *v, size_t n, int64_t lo, int64_t hi, int32_t *out)
{
    uint64_t u = 0;
    if (get_u(d, what, v, n, 4, &u) < 0)
        return -1;
    int64_t s = (int64_t)(int32_t)(uint32_t)u;
    if (s < lo || s > hi)
        return BAD("room message: %s %lld is out of range [%lld, %lld]", what, (long long)s, (long long)lo,
                   (long long)hi);
    *out = (int32_t)s;
    return 0;
}

static int get_small(dctx *d, const char *what, const uint8_t *v, size_t n, unsigned lo, unsigned hi, uint8_t *out)
{
    uint64_t u = 0;
    if (get_u(d, what, v, n, 1, &u) < 0)
        return -1;
    if (u < lo || u > hi)
        return BAD("room message: %s %u is out of range [%u, %u]", what, (unsigned)u, lo, hi);
    *out = (uint8_t)u;
    return 0;
}

static int get_str(dctx *d, const char *what, const uint8_t *v, size_t n, char *out, size_t max)
{
    if (!room_text_ok((const char *)v, n, max))
        return BAD("room message: %s is not printable UTF-8 of at most %zu bytes", what, max - 1);
    memcpy(out, v, n);
    out[n] = '\0';
    return 0;
}

/* Mark tag seen; a second copy of a scalar field is malformed. */
static int once(dctx *d, uint64_t *seen, int tag)
{
    if (*seen & (1ull << tag))
        return BAD("room message: field %d appears twice", tag);
    *seen |= 1ull << tag;
    return 0;
}

static int dec_input(dctx *d, const uint8_t *v, size_t n, room_input *in)
{
    rbuf r = {v, n, 0};
    uint64_t seen = 0;
    int tag, rc;
    const uint8_t *fv;
    size_t fn;
    memset(in, 0, sizeof *in);
    while ((rc = next_field(&r, &tag, &fv, &fn)) == 1) {
        if (tag < 1 || tag > I_VALUE)
            continue;
        if (once(d, &seen, tag) < 0)
            return -1;
        int e = 0;
        switch (tag) {
        case I_WAIT: e = get_i32(d, "input wait", fv, fn, 0, STEP_MAX, &in->wait); break;
        case I_KIND: e = get_small(d, "input kind", fv, fn, ROOM_IN_ANSWER, ROOM_IN_REVEAL, &in->kind); break;
        case I_NAME: e = get_str(d, "input flag name", fv, fn, in->name, sizeof in->name); break;
        case I_VALUE: e = get_str(d, "input value", fv, fn, in->value, sizeof in->value); break;
        }
        if (e < 0)
            return -1;
    }
    if (rc < 0)
        return BAD("room message: an input is cut short");
    if (!(seen & (1u << I_WAIT)) || !(seen & (1u << I_KIND)))
        return BAD("room message: an input lacks its wait or kind");
    if ((in->kind == ROOM_IN_FLAG) != (in->name[0] != '\0'))
        return BAD("room message: an input's flag name does not match its kind");
    if (in->kind == ROOM_IN_REVEAL && in->value[0])
        return BAD("room message: a reveal carries a value");
    return 0;
}

static int dec_flag(dctx *d, const uint8_t *v, size_t n, room_flag *f)
{
    rbuf r = {v, n, 0};
    uint64_t seen = 0;
    int tag, rc;
    const uint8_t *fv;
    size_t fn;
    memset(f, 0, sizeof *f);
    while ((rc = next_field(&r, &tag, &fv, &fn)) == 1) {
        if (tag < 1 || tag > F_VALUE)
            continue;
        if (once(d, &seen, tag) < 0)
            return -1;
        int e = tag == F_NAME ? get_str(d, "flag name", fv, fn, f->name, sizeof f->name)
                              : get_str(d, "flag value", fv, fn, f->value, sizeof f->value);
        if (e < 0)
            return -1;
    }
    if (rc < 0)
        return BAD("room message: a flag is cut short");
    if (!f->name[0])
        return BAD("room message: a flag has no name");
    return 0;
}

static int dec_event(dctx *d, const uint8_t *v, size_t n, room_event *ev)
{
    rbuf r = {v, n, 0};
    uint64_t seen = 0, u = 0;
    int tag, rc;
    const uint8_t *fv;
    size_t fn;
    memset(ev, 0, sizeof *ev);
    while ((rc = next_field(&r, &tag, &fv, &fn)) == 1) {
        if (tag < 1 || tag > E_VALUE)
            continue;
        if (once(d, &seen, tag) < 0)
            return -1;
        int e = 0;
        switch (tag) {
        case E_KIND: e = get_small(d, "event kind", fv, fn, 1, ROOM_EV_COUNT - 1, &ev->kind); break;
        case E_ARG:
            e = get_u(d, "event arg", fv, fn, 8, &u);
            ev->arg = (int64_t)u;
            break;
        case E_NAME: e = get_str(d, "event name", fv, fn, ev->name, sizeof ev->name); break;
        case E_VALUE: e = get_str(d, "event value", fv, fn, ev->value, sizeof ev->value); break;
        }
        if (e < 0)
            return -1;
    }
    if (rc < 0)
        return BAD("room message: an event is cut short");
    if (!ev->kind)
        return BAD("room message: an event has no kind");
    return 0;
}

/* Which ROOM_H_* group a tag belongs to (0: none, always allowed). */
static unsigned group_of(int tag)
{
    switch (tag) {
    case K_LESSON: case K_TITLE: return ROOM_H_LESSON;
    case K_STEP: case K_PAGE: case K_RSTATE: return ROOM_H_STEP;
    case K_FOCUS: case K_PAUSED: case K_SPEED: return ROOM_H_VIEW;
    case K_ESEED: case K_ESTEP: case K_SGEN: case K_SSTARTS: return ROOM_H_ENGINE;
    case K_FOLLOWERS: return ROOM_H_FOLLOWERS;
    case K_RW_BACK: case K_RW_STEP: case K_IN_ACTIVE: case K_TYPED: case K_VKIND: case K_VERDICT: case K_HINT:
    case K_FEDIT: case K_FSEL: case K_FTYPED: return ROOM_H_SCREEN;
    case K_INPUT: return ROOM_H_INPUTS;
    case K_FLAG: return ROOM_H_FLAGS;
    default: return 0;
    }
}

/* The scalar tags each group (and each message type) must carry. */
static uint64_t required_tags(int type, unsigned have)
{
    uint64_t t = 0;
#define T(x) (1ull << (x))
    switch (type) {
    case ROOM_T_HELLO: return T(K_MODE) | T(K_USER);
    case ROOM_T_WELCOME:
        return T(K_ROOM) | T(K_PRESENTER) | T(K_GROUP) | T(K_PID) | T(K_LESSON) | T(K_TITLE) | T(K_FOLLOWERS);
    case ROOM_T_REFUSE:
    case ROOM_T_BYE: return T(K_TEXT);
    case ROOM_T_IMAGE: return T(K_RUN) | T(K_SGEN) | T(K_ESTEP) | T(K_IMG_TOTAL) | T(K_IMG_OFF) | T(K_IMG_DATA);
    default: break;
    }
    t = T(K_HAVE) | T(K_SEQ) | T(K_RUN);
    if (type == ROOM_T_DELTA) t |= T(K_BASE);
    if (have & ROOM_H_LESSON) t |= T(K_LESSON) | T(K_TITLE);
    if (have & ROOM_H_STEP) t |= T(K_STEP) | T(K_PAGE) | T(K_RSTATE);
    if (have & ROOM_H_VIEW) t |= T(K_FOCUS) | T(K_PAUSED) | T(K_SPEED);
    if (have & ROOM_H_ENGINE) t |= T(K_ESEED) | T(K_ESTEP) | T(K_SGEN);
    if (have & ROOM_H_FOLLOWERS) t |= T(K_FOLLOWERS);
    if (have & ROOM_H_SCREEN)
        t |= T(K_RW_BACK) | T(K_RW_STEP) | T(K_IN_ACTIVE) | T(K_TYPED) | T(K_VKIND) | T(K_VERDICT) | T(K_FEDIT) |
             T(K_FSEL) | T(K_FTYPED);
    return t;
#undef T
}

/* Tags a type may carry at all (others of ours are malformed there). */
static int tag_allowed(int type, int tag)
{
    switch (type) {
    case ROOM_T_HELLO: return tag == K_MODE || tag == K_USER;
    case ROOM_T_WELCOME:
        return tag == K_ROOM || tag == K_PRESENTER || tag == K_GROUP || tag == K_PID || tag == K_LESSON ||
               tag == K_TITLE || tag == K_FOLLOWERS;
    case ROOM_T_REFUSE:
    case ROOM_T_BYE: return tag == K_TEXT;
    case ROOM_T_STATE: return tag >= K_HAVE && tag != K_BASE && (tag < K_IMG_TOTAL || tag > K_IMG_DATA);
    case ROOM_T_DELTA: return tag >= K_HAVE && (tag < K_IMG_TOTAL || tag > K_IMG_DATA);
    case ROOM_T_IMAGE:
        return tag == K_RUN || tag == K_SGEN || tag == K_ESTEP || tag == K_IMG_TOTAL || tag == K_IMG_OFF ||
               tag == K_IMG_DATA;
    }
    return 0;
}

/* The top-level tags this release knows (others are skipped). */
static int known_tag(int tag)
{
    return (tag >= 1 && tag <= K_IMG_DATA) || (tag >= K_INPUT && tag <= K_EVENT) ||
           (tag >= K_RW_BACK && tag <= K_FTYPED) || tag == K_SSTARTS;
}

static int dec_payload(dctx *d, int type, const uint8_t *p, size_t n, room_msg *m)
{
    rbuf r = {p, n, 0};
    uint64_t seen = 0, u = 0;
    int tag, rc;
    const uint8_t *v;
    size_t vn;
    room_state *s = &m->st;
    unsigned have = 0;
    while ((rc = next_field(&r, &tag, &v, &vn)) == 1) {
        if (!known_tag(tag))
            continue; /* unknown: a newer sender's field */
        if (!tag_allowed(type, tag))
            return BAD("room message: a %s message cannot carry field %d", room_msg_type_name(type), tag);
        unsigned g = group_of(tag);
        if (type == ROOM_T_STATE || type == ROOM_T_DELTA) {
            if (tag != K_HAVE && !(seen & (1ull << K_HAVE)))
                return BAD("room message: fields before the list of what is present");
            if (g && !(have & g))
                return BAD("room message: field %d is not in the list of what is present", tag);
        }
        int e = 0;
        if (tag == K_INPUT) {
            if (s->ninputs >= ROOM_MAX_INPUTS)
                return BAD("room message: more than %d inputs", ROOM_MAX_INPUTS);
            e = dec_input(d, v, vn, &s->inputs[s->ninputs]);
            if (!e) s->ninputs++;
        } else if (tag == K_FLAG) {
            if (s->nflags >= ROOM_MAX_FLAGS)
                return BAD("room message: more than %d flags", ROOM_MAX_FLAGS);
            e = dec_flag(d, v, vn, &s->flags[s->nflags]);
            if (!e) s->nflags++;
        } else if (tag == K_HINT) {
            if (s->scr.nhints >= ROOM_MAX_HINTS)
                return BAD("room message: more than %d hints", ROOM_MAX_HINTS);
            e = get_str(d, "hint", v, vn, s->scr.hints[s->scr.nhints], sizeof s->scr.hints[0]);
            if (!e) s->scr.nhints++;
        } else if (tag == K_EVENT) {
            if (s->nevents >= ROOM_MAX_EVENTS)
                return BAD("room message: more than %d events", ROOM_MAX_EVENTS);
            e = dec_event(d, v, vn, &s->events[s->nevents]);
            if (!e) s->nevents++;
        } else {
            if (once(d, &seen, tag) < 0)
                return -1;
            switch (tag) {
            case K_MODE: e = get_small(d, "mode", v, vn, ROOM_MODE_FOLLOW, ROOM_MODE_PROBE, &m->mode); break;
            case K_USER: e = get_str(d, "user", v, vn, m->user, sizeof m->user); break;
            case K_ROOM: e = get_str(d, "room", v, vn, m->room, sizeof m->room); break;
            case K_PRESENTER: e = get_str(d, "presenter", v, vn, m->presenter, sizeof m->presenter); break;
            case K_GROUP: e = get_str(d, "group", v, vn, m->group, sizeof m->group); break;
            case K_PID: e = get_i32(d, "pid", v, vn, 1, INT32_MAX, &m->pid); break;
            case K_TEXT: e = get_str(d, "text", v, vn, m->text, sizeof m->text); break;
            case K_HAVE:
                e = get_u(d, "present list", v, vn, 4, &u);
                if (!e && (u & ~(uint64_t)(ROOM_H_FULL | ROOM_H_FOLLOWERS | ROOM_H_SCREEN)))
                    e = BAD("room message: unknown bits 0x%llx in the list of what is present", (unsigned long long)u);
                have = (unsigned)u;
                if (!e && type == ROOM_T_STATE && (have & ROOM_H_FULL) != ROOM_H_FULL)
                    e = BAD("room message: a state lacks part of the state (present 0x%x)", have);
                break;
            case K_SEQ: e = get_u(d, "seq", v, vn, 8, &s->seq); break;
            case K_BASE: e = get_u(d, "base seq", v, vn, 8, &s->base_seq); break;
            case K_RUN: e = get_u(d, "run id", v, vn, 8, &s->run_id); break;
            case K_LESSON: e = get_i32(d, "lesson", v, vn, 0, 99, &s->lesson); break;
            case K_TITLE: e = get_str(d, "lesson title", v, vn, s->lesson_title, sizeof s->lesson_title); break;
            case K_STEP: e = get_i32(d, "step", v, vn, 0, STEP_MAX, &s->step); break;
            case K_PAGE: e = get_i32(d, "page", v, vn, 0, STEP_MAX, &s->page); break;
            case K_RSTATE: e = get_small(d, "run state", v, vn, 0, 7, &s->run_state); break;
            case K_FOCUS: e = get_i32(d, "view focus", v, vn, -1, 31, &s->view_focus); break;
            case K_PAUSED: e = get_small(d, "paused", v, vn, 0, 1, &s->paused); break;
            case K_SPEED: {
                e = get_u(d, "speed", v, vn, 8, &u);
                double sp;
                memcpy(&sp, &u, sizeof sp);
                if (!e && !(isfinite(sp) && sp > 0 && sp <= 64))
                    e = BAD("room message: speed is not within (0, 64]");
                s->speed = sp;
                break;
            }
            case K_ESEED: e = get_u(d, "engine seed", v, vn, 8, &s->engine_seed); break;
            case K_ESTEP: e = get_u(d, "engine step", v, vn, 8, &s->engine_step); break;
            case K_SGEN:
                e = get_u(d, "server starts", v, vn, 4, &u);
                s->server_gen = (uint32_t)u;
                break;
            case K_SSTARTS:
                e = get_u(d, "server starts in the step", v, vn, 4, &u);
                if (!e && u > 1000000)
                    e = BAD("room message: %llu server starts in one step", (unsigned long long)u);
                s->step_starts = (uint32_t)u;
                break;
            case K_FOLLOWERS: e = get_i32(d, "followers", v, vn, 0, FOLLOWERS_MAX, &s->followers); break;
            case K_RW_BACK: e = get_i32(d, "rewound run", v, vn, -1, INT32_MAX, &s->scr.rewind_back); break;
            case K_RW_STEP:
                e = get_u(d, "rewound step", v, vn, 8, &u);
                if (!e && u > (uint64_t)INT64_MAX)
                    e = BAD("room message: rewound step out of range");
                s->scr.rewind_step = (int64_t)u;
                break;
            case K_IN_ACTIVE: e = get_small(d, "answer box", v, vn, 0, 1, &s->scr.input_active); break;
            case K_TYPED: e = get_str(d, "typed answer", v, vn, s->scr.typed, sizeof s->scr.typed); break;
            case K_VKIND: {
                uint8_t k = 0;
                e = get_small(d, "verdict kind", v, vn, 0, 255, &k);
                s->scr.verdict_kind = (int8_t)k;
                if (!e && (s->scr.verdict_kind < -1 || s->scr.verdict_kind > 15))
                    e = BAD("room message: verdict kind %d out of range", s->scr.verdict_kind);
                break;
            }
            case K_VERDICT: e = get_str(d, "verdict", v, vn, s->scr.verdict, sizeof s->scr.verdict); break;
            case K_FEDIT: e = get_small(d, "flag editing", v, vn, 0, 2, &s->scr.flag_editing); break;
            case K_FSEL: e = get_i32(d, "flag row", v, vn, 0, ROOM_MAX_FLAGS, &s->scr.flag_sel); break;
            case K_FTYPED: e = get_str(d, "typed flag value", v, vn, s->scr.flag_typed, sizeof s->scr.flag_typed); break;
            case K_IMG_TOTAL:
                e = get_u(d, "image length", v, vn, 4, &u);
                if (!e && (u < 1 || u > ROOM_IMAGE_MAX))
                    e = BAD("room message: an image of %llu bytes (1 to %u)", (unsigned long long)u, ROOM_IMAGE_MAX);
                m->img_total = (uint32_t)u;
                break;
            case K_IMG_OFF:
                e = get_u(d, "image offset", v, vn, 4, &u);
                m->img_off = (uint32_t)u;
                break;
            case K_IMG_DATA:
                if (vn < 1 || vn > ROOM_IMAGE_CHUNK)
                    e = BAD("room message: an image part of %zu bytes (1 to %d)", vn, ROOM_IMAGE_CHUNK);
                else {
                    memcpy(m->img_data, v, vn);
                    m->img_len = (uint32_t)vn;
                }
                break;
            }
        }
        if (e < 0)
            return -1;
    }
    if (rc < 0)
        return BAD("room message: a field is cut short");
    uint64_t need = required_tags(type, have);
    if ((seen & need) != need) {
        for (int t = 1; t < K_MAX; t++)
            if ((need & (1ull << t)) && !(seen & (1ull << t)))
                return BAD("room message: a %s message lacks field %d", room_msg_type_name(type), t);
    }
    if (type == ROOM_T_IMAGE && (m->img_off > m->img_total || m->img_len > m->img_total - m->img_off))
        return BAD("room message: an image part at %u (+%u bytes) is outside its %u-byte image", m->img_off,
                   m->img_len, m->img_total);
    if (type == ROOM_T_DELTA && s->base_seq >= s->seq)
        return BAD("room message: a delta's base %llu is not before its seq %llu", (unsigned long long)s->base_seq,
                   (unsigned long long)s->seq);
    m->have = (type == ROOM_T_STATE || type == ROOM_T_DELTA) ? have : 0;
    return 0;
}

int room_msg_decode(const uint8_t *buf, size_t len, room_msg *out, size_t *used, char *err, size_t errlen)
{
    dctx dd = {err, errlen}, *d = &dd;
    *used = 0;
    /* Check what has arrived as early as it can be checked: a hostile peer
     * is cut off at its first wrong byte, not after a 256 KiB "payload". */
    static const char magic[4] = {'K', 'V', 'R', 'M'};
    for (size_t i = 0; i < len && i < 4; i++)
        if (buf[i] != (uint8_t)magic[i])
            return BAD("room message: not a kvlab room stream (bad magic)");
    if (len >= 5 && buf[4] != ROOM_PROTO_VERSION)
        return BAD("room message: protocol version %u, this kvlab speaks %d (use the same kvlab release)",
                   buf[4], ROOM_PROTO_VERSION);
    if (len >= 6 && (buf[5] < 1 || buf[5] >= ROOM_T_COUNT))
        return BAD("room message: unknown type %u", buf[5]);
    if (len >= 8 && (buf[6] || buf[7]))
        return BAD("room message: reserved header bytes are not zero");
    if (len < ROOM_HEADER_LEN)
        return 0;
    uint64_t pl = le(buf + 8, 4);
    if (pl > ROOM_MSG_MAX_PAYLOAD)
        return BAD("room message: payload of %llu bytes is over the %u byte limit", (unsigned long long)pl,
                   ROOM_MSG_MAX_PAYLOAD);
    if (len - ROOM_HEADER_LEN < pl)
        return 0;
    int type = buf[5];
    room_msg_init(out, type);
    if (dec_payload(d, type, buf + ROOM_HEADER_LEN, (size_t)pl, out) < 0)
        return -1;
    *used = ROOM_HEADER_LEN + (size_t)pl;
    return 1;
}

int room_state_apply_delta(room_state *st, const room_msg *m)
{
    const room_state *d = &m->st;
    if (m->type != ROOM_T_DELTA || d->run_id != st->run_id || d->base_seq != st->seq)
        return -1;
    if (m->have & ROOM_H_LESSON) {
        st->lesson = d->lesson;
        memcpy(st->lesson_title, d->lesson_title, sizeof st->lesson_title);
    }
    if (m->have & ROOM_H_STEP) {
        st->step = d->step;
        st->page = d->page;
        st->run_state = d->run_state;
    }
    if (m->have & ROOM_H_VIEW) {
        st->view_focus = d->view_focus;
        st->paused = d->paused;
        st->speed = d->speed;
    }
    if (m->have & ROOM_H_ENGINE) {
        st->engine_seed = d->engine_seed;
        st->engine_step = d->engine_step;
        st->server_gen = d->server_gen;
        st->step_starts = d->step_starts;
    }
    if (m->have & ROOM_H_FOLLOWERS)
        st->followers = d->followers;
    if (m->have & ROOM_H_SCREEN)
        st->scr = d->scr;
    if (m->have & ROOM_H_INPUTS) {
        st->ninputs = d->ninputs;
        memcpy(st->inputs, d->inputs, (size_t)d->ninputs * sizeof d->inputs[0]);
    }
    if (m->have & ROOM_H_FLAGS) {
        st->nflags = d->nflags;
        memcpy(st->flags, d->flags, (size_t)d->nflags * sizeof d->flags[0]);
    }
    for (int i = 0; i < d->nevents; i++) {
        if (st->nevents == ROOM_MAX_EVENTS) {
            memmove(st->events, st->events + 1, (ROOM_MAX_EVENTS - 1) * sizeof st->events[0]);
            st->nevents--;
        }
        st->events[st->nevents++] = d->events[i];
    }
    st->seq = d->seq;
    return 0;
}
