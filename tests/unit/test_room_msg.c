/* The classroom wire format: round trips, partial frames, and hostile bytes
 * the decoder must refuse (each with the bound or rule it breaks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "room_follow.h"
#include "room_msg.h"

#define CAP (ROOM_HEADER_LEN + ROOM_MSG_MAX_PAYLOAD)

static uint8_t buf[CAP];
static room_msg in, out;

static void fill_state(room_msg *m)
{
    room_msg_init(m, ROOM_T_STATE);
    room_state *s = &m->st;
    s->seq = 42;
    s->run_id = 0x1234567890abcdefull;
    s->lesson = 7;
    snprintf(s->lesson_title, sizeof s->lesson_title, "Why the pool fills — %s", "préemption");
    s->step = 5;
    s->page = 3;
    s->run_state = 3;
    s->view_focus = 2;
    s->paused = 1;
    s->speed = 0.25;
    s->engine_seed = 99;
    s->engine_step = 12345678901ull;
    s->server_gen = 4;
    s->step_starts = 2;
    s->followers = 30;
    m->have = ROOM_H_FOLLOWERS;
    s->ninputs = 3;
    s->inputs[0] = (room_input){.wait = 1, .kind = ROOM_IN_ANSWER};
    snprintf(s->inputs[0].value, sizeof s->inputs[0].value, "407,000 tokens");
    s->inputs[1] = (room_input){.wait = 2, .kind = ROOM_IN_FLAG};
    snprintf(s->inputs[1].name, sizeof s->inputs[1].name, "max-model-len");
    snprintf(s->inputs[1].value, sizeof s->inputs[1].value, "8192");
    s->inputs[2] = (room_input){.wait = 4, .kind = ROOM_IN_REVEAL};
    s->nflags = 2;
    snprintf(s->flags[0].name, sizeof s->flags[0].name, "gpu");
    snprintf(s->flags[0].value, sizeof s->flags[0].value, "H100-80GB");
    snprintf(s->flags[1].name, sizeof s->flags[1].name, "kv-cache-dtype");
    s->nevents = 1;
    s->events[0] = (room_event){.kind = ROOM_EV_FLAG, .arg = -3};
    snprintf(s->events[0].name, sizeof s->events[0].name, "max-model-len");
    snprintf(s->events[0].value, sizeof s->events[0].value, "8192");
}

static int decode(const uint8_t *b, size_t n, room_msg *m, char *err)
{
    size_t used;
    return room_msg_decode(b, n, m, &used, err, 256);
}

static void test_state_round_trip(void **state)
{
    (void)state;
    fill_state(&in);
    size_t n = room_msg_encode(&in, buf, sizeof buf);
    assert_true(n > ROOM_HEADER_LEN);
    size_t used;
    char err[256] = "";
    assert_int_equal(room_msg_decode(buf, n, &out, &used, err, sizeof err), 1);
    assert_int_equal(used, n);
    assert_int_equal(out.type, ROOM_T_STATE);
    assert_int_equal(out.have, ROOM_H_FULL | ROOM_H_FOLLOWERS);
    const room_state *a = &in.st, *b = &out.st;
    assert_true(a->seq == b->seq && a->run_id == b->run_id && a->engine_step == b->engine_step);
    assert_int_equal(b->lesson, 7);
    assert_string_equal(b->lesson_title, a->lesson_title);
    assert_int_equal(b->step, 5);
    assert_int_equal(b->page, 3);
    assert_int_equal(b->run_state, 3);
    assert_int_equal(b->view_focus, 2);
    assert_int_equal(b->paused, 1);
    assert_true(b->speed == 0.25);
    assert_int_equal(b->engine_seed, 99);
    assert_int_equal(b->server_gen, 4);
    assert_int_equal(b->step_starts, 2);
    assert_int_equal(b->followers, 30);
    assert_int_equal(b->ninputs, 3);
    assert_int_equal(b->inputs[1].kind, ROOM_IN_FLAG);
    assert_string_equal(b->inputs[1].name, "max-model-len");
    assert_string_equal(b->inputs[1].value, "8192");
    assert_string_equal(b->inputs[0].value, "407,000 tokens");
    assert_int_equal(b->inputs[2].kind, ROOM_IN_REVEAL);
    assert_int_equal(b->inputs[2].wait, 4);
    assert_int_equal(b->nflags, 2);
    assert_string_equal(b->flags[0].value, "H100-80GB");
    assert_string_equal(b->flags[1].value, "");
    assert_int_equal(b->nevents, 1);
    assert_int_equal(b->events[0].kind, ROOM_EV_FLAG);
    assert_int_equal(b->events[0].arg, -3);
    assert_string_equal(b->events[0].value, "8192");
}

static void test_small_messages(void **state)
{
    (void)state;
    char err[256];
    room_msg_init(&in, ROOM_T_HELLO);
    in.mode = ROOM_MODE_PROBE;
    snprintf(in.user, sizeof in.user, "bob");
    size_t n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), 1);
    assert_int_equal(out.mode, ROOM_MODE_PROBE);
    assert_string_equal(out.user, "bob");

    room_msg_init(&in, ROOM_T_WELCOME);
    snprintf(in.room, sizeof in.room, "ml101");
    snprintf(in.presenter, sizeof in.presenter, "alice");
    snprintf(in.group, sizeof in.group, "students");
    in.pid = 4242;
    in.st.lesson = 3;
    snprintf(in.st.lesson_title, sizeof in.st.lesson_title, "Blocks");
    in.st.followers = 2;
    n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), 1);
    assert_string_equal(out.room, "ml101");
    assert_string_equal(out.presenter, "alice");
    assert_string_equal(out.group, "students");
    assert_int_equal(out.pid, 4242);
    assert_int_equal(out.st.lesson, 3);
    assert_int_equal(out.st.followers, 2);

    room_msg_init(&in, ROOM_T_REFUSE);
    snprintf(in.text, sizeof in.text, "room 'a' is open to a only");
    n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), 1);
    assert_int_equal(out.type, ROOM_T_REFUSE);
    assert_string_equal(out.text, "room 'a' is open to a only");
    assert_string_equal(room_msg_type_name(ROOM_T_BYE), "bye");
    assert_string_equal(room_msg_type_name(99), "?");
}

static void test_delta_and_apply(void **state)
{
    (void)state;
    char err[256];
    fill_state(&in);
    room_state base = in.st;
    room_msg_init(&in, ROOM_T_DELTA);
    in.st.seq = 43;
    in.st.base_seq = 42;
    in.st.run_id = base.run_id;
    in.st.engine_step = base.engine_step + 3;
    in.st.followers = 31;
    in.have = ROOM_H_ENGINE | ROOM_H_FOLLOWERS;
    in.st.nevents = 1;
    in.st.events[0].kind = ROOM_EV_PAUSE;
    in.st.events[0].arg = 0;
    size_t n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), 1);
    assert_int_equal(out.have, ROOM_H_ENGINE | ROOM_H_FOLLOWERS);
    room_state s = base;
    assert_int_equal(room_state_apply_delta(&s, &out), 0);
    assert_int_equal(s.seq, 43);
    assert_true(s.engine_step == base.engine_step + 3);
    assert_int_equal(s.followers, 31);
    assert_int_equal(s.step, base.step);           /* not in the delta: kept */
    assert_int_equal(s.ninputs, base.ninputs);
    assert_int_equal(s.nevents, 2);                /* appended */
    assert_int_equal(s.events[1].kind, ROOM_EV_PAUSE);
    /* A delta that does not follow the state is not applied. */
    s = base;
    s.seq = 40;
    assert_int_equal(room_state_apply_delta(&s, &out), -1);
    assert_int_equal(s.followers, base.followers);
    s = base;
    s.run_id ^= 1;
    assert_int_equal(room_state_apply_delta(&s, &out), -1);
    /* Events past the bound drop the oldest. */
    s = base;
    s.nevents = ROOM_MAX_EVENTS;
    for (int i = 0; i < ROOM_MAX_EVENTS; i++)
        s.events[i] = (room_event){.kind = ROOM_EV_NEXT, .arg = i};
    assert_int_equal(room_state_apply_delta(&s, &out), 0);
    assert_int_equal(s.nevents, ROOM_MAX_EVENTS);
    assert_int_equal(s.events[0].arg, 1);
    assert_int_equal(s.events[ROOM_MAX_EVENTS - 1].kind, ROOM_EV_PAUSE);
}

/* Every prefix of a valid frame asks for more, never fails. */
static void test_partial_frames(void **state)
{
    (void)state;
    fill_state(&in);
    size_t n = room_msg_encode(&in, buf, sizeof buf);
    char err[256];
    for (size_t k = 0; k < n; k++) {
        size_t used = 99;
        assert_int_equal(room_msg_decode(buf, k, &out, &used, err, sizeof err), 0);
        assert_int_equal(used, 0);
    }
    /* Two frames back to back: the first is taken alone. */
    memcpy(buf + n, buf, n);
    size_t used;
    assert_int_equal(room_msg_decode(buf, 2 * n, &out, &used, err, sizeof err), 1);
    assert_int_equal(used, n);
}

static size_t hello_frame(void)
{
    room_msg_init(&in, ROOM_T_HELLO);
    in.mode = ROOM_MODE_FOLLOW;
    snprintf(in.user, sizeof in.user, "bob");
    return room_msg_encode(&in, buf, sizeof buf);
}

static void set_payload_len(uint32_t v)
{
    for (int i = 0; i < 4; i++)
        buf[8 + i] = (uint8_t)(v >> (8 * i));
}

static void test_bad_headers(void **state)
{
    (void)state;
    char err[256];
    size_t n = hello_frame();
    buf[0] = 'X';
    assert_int_equal(decode(buf, 1, &out, err), -1); /* refused at its first byte */
    assert_non_null(strstr(err, "magic"));
    n = hello_frame();
    buf[4] = ROOM_PROTO_VERSION + 1;
    assert_int_equal(decode(buf, 5, &out, err), -1);
    assert_non_null(strstr(err, "version"));
    n = hello_frame();
    buf[5] = ROOM_T_COUNT;
    assert_int_equal(decode(buf, n, &out, err), -1);
    buf[5] = 0;
    assert_int_equal(decode(buf, n, &out, err), -1);
    n = hello_frame();
    buf[7] = 1;
    assert_int_equal(decode(buf, n, &out, err), -1);
    /* A payload over the limit is refused from the header alone. */
    n = hello_frame();
    set_payload_len(ROOM_MSG_MAX_PAYLOAD + 1);
    assert_int_equal(decode(buf, ROOM_HEADER_LEN, &out, err), -1);
    assert_non_null(strstr(err, "limit"));
    set_payload_len(0xffffffffu);
    assert_int_equal(decode(buf, ROOM_HEADER_LEN, &out, err), -1);
    /* A payload length shorter than its fields: a field runs past the end. */
    n = hello_frame();
    set_payload_len((uint32_t)(n - ROOM_HEADER_LEN - 1));
    assert_int_equal(decode(buf, n, &out, err), -1);
}

/* Build a frame of the given type from raw payload bytes. */
static size_t raw_frame(int type, const uint8_t *pl, size_t n)
{
    memcpy(buf, "KVRM", 4);
    buf[4] = ROOM_PROTO_VERSION;
    buf[5] = (uint8_t)type;
    buf[6] = buf[7] = 0;
    set_payload_len((uint32_t)n);
    memcpy(buf + ROOM_HEADER_LEN, pl, n);
    return ROOM_HEADER_LEN + n;
}

static void test_bad_fields(void **state)
{
    (void)state;
    char err[256];
    /* mode(1) = 1, user(2) = "bob" */
    uint8_t ok[] = {1, 1, 0, 1, 2, 3, 0, 'b', 'o', 'b'};
    assert_int_equal(decode(buf, raw_frame(ROOM_T_HELLO, ok, sizeof ok), &out, err), 1);
    /* an unknown tag is skipped */
    uint8_t unk[] = {1, 1, 0, 1, 60, 2, 0, 9, 9, 2, 3, 0, 'b', 'o', 'b'};
    assert_int_equal(decode(buf, raw_frame(ROOM_T_HELLO, unk, sizeof unk), &out, err), 1);
    /* the same field twice */
    uint8_t dup[] = {1, 1, 0, 1, 1, 1, 0, 1, 2, 3, 0, 'b', 'o', 'b'};
    assert_int_equal(decode(buf, raw_frame(ROOM_T_HELLO, dup, sizeof dup), &out, err), -1);
    assert_non_null(strstr(err, "twice"));
    /* a number of the wrong width */
    uint8_t wide[] = {1, 2, 0, 1, 0, 2, 3, 0, 'b', 'o', 'b'};
    assert_int_equal(decode(buf, raw_frame(ROOM_T_HELLO, wide, sizeof wide), &out, err), -1);
    /* a mode out of range */
    uint8_t mode[] = {1, 1, 0, 7, 2, 3, 0, 'b', 'o', 'b'};
    assert_int_equal(decode(buf, raw_frame(ROOM_T_HELLO, mode, sizeof mode), &out, err), -1);
    /* a control character (terminal escape) in a string */
    uint8_t esc[] = {1, 1, 0, 1, 2, 3, 0, 0x1b, '[', 'J'};
    assert_int_equal(decode(buf, raw_frame(ROOM_T_HELLO, esc, sizeof esc), &out, err), -1);
    assert_non_null(strstr(err, "UTF-8"));
    /* an overlong UTF-8 '/' */
    uint8_t ovl[] = {1, 1, 0, 1, 2, 2, 0, 0xc0, 0xaf};
    assert_int_equal(decode(buf, raw_frame(ROOM_T_HELLO, ovl, sizeof ovl), &out, err), -1);
    /* a string over its bound */
    uint8_t big[3 + 7 + 3 + ROOM_NAME_MAX];
    size_t k = 0;
    big[k++] = 1; big[k++] = 1; big[k++] = 0; big[k++] = 1;
    big[k++] = 2; big[k++] = ROOM_NAME_MAX; big[k++] = 0;
    memset(big + k, 'a', ROOM_NAME_MAX);
    k += ROOM_NAME_MAX;
    assert_int_equal(decode(buf, raw_frame(ROOM_T_HELLO, big, k), &out, err), -1);
    /* a field that does not belong to the type */
    uint8_t wrong[] = {1, 1, 0, 1, 2, 3, 0, 'b', 'o', 'b', 7, 1, 0, 'x'};
    assert_int_equal(decode(buf, raw_frame(ROOM_T_HELLO, wrong, sizeof wrong), &out, err), -1);
    /* a required field missing */
    uint8_t miss[] = {1, 1, 0, 1};
    assert_int_equal(decode(buf, raw_frame(ROOM_T_HELLO, miss, sizeof miss), &out, err), -1);
    assert_non_null(strstr(err, "lacks"));
    /* a field header cut short */
    uint8_t cut[] = {1, 1, 0, 1, 2, 3};
    assert_int_equal(decode(buf, raw_frame(ROOM_T_HELLO, cut, sizeof cut), &out, err), -1);
}

static void test_bad_state(void **state)
{
    (void)state;
    char err[256];
    size_t n;
    /* lesson out of range */
    fill_state(&in);
    in.st.lesson = 100;
    n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), -1);
    assert_non_null(strstr(err, "lesson"));
    /* speed not finite */
    fill_state(&in);
    in.st.speed = NAN;
    n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), -1);
    fill_state(&in);
    in.st.speed = 0;
    n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), -1);
    /* a flag input without a flag name */
    fill_state(&in);
    in.st.inputs[1].name[0] = '\0';
    n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), -1);
    /* an answer that names a flag */
    fill_state(&in);
    snprintf(in.st.inputs[0].name, sizeof in.st.inputs[0].name, "gpu");
    n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), -1);
    /* a delta whose base is not before it */
    fill_state(&in);
    in.type = ROOM_T_DELTA;
    in.have = ROOM_H_ENGINE;
    in.st.base_seq = in.st.seq;
    n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), -1);
    /* a state whose "present" list lacks part of the state */
    fill_state(&in);
    n = room_msg_encode(&in, buf, sizeof buf);
    /* the first field is K_HAVE (tag 9, 4 bytes): clear ROOM_H_FLAGS in it */
    assert_int_equal(buf[ROOM_HEADER_LEN], 9);
    buf[ROOM_HEADER_LEN + 3] &= (uint8_t)~ROOM_H_FLAGS;
    assert_int_equal(decode(buf, n, &out, err), -1);
    assert_non_null(strstr(err, "lacks"));
}

/* More inputs than the bound: the encoder cuts, a hand-made frame is refused. */
static void test_counts_bounded(void **state)
{
    (void)state;
    char err[256];
    fill_state(&in);
    in.st.ninputs = ROOM_MAX_INPUTS + 50;
    for (int i = 0; i < ROOM_MAX_INPUTS; i++)
        in.st.inputs[i] = (room_input){.wait = i, .kind = ROOM_IN_REVEAL};
    size_t n = room_msg_encode(&in, buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal(decode(buf, n, &out, err), 1);
    assert_int_equal(out.st.ninputs, ROOM_MAX_INPUTS);
    /* Append one more input field by hand and fix the payload length. */
    static const uint8_t extra[] = {30, 11, 0, 1, 4, 0, 0, 0, 0, 0, 2, 1, 0, 2};
    memcpy(buf + n, extra, sizeof extra);
    set_payload_len((uint32_t)(n + sizeof extra - ROOM_HEADER_LEN));
    assert_int_equal(decode(buf, n + sizeof extra, &out, err), -1);
    assert_non_null(strstr(err, "inputs"));
    /* A buffer too small to encode into: 0, not a cut frame. */
    assert_int_equal(room_msg_encode(&in, buf, 100), 0);
}

static void test_text_ok(void **state)
{
    (void)state;
    assert_true(room_text_ok("abc", 3, 4));
    assert_false(room_text_ok("abcd", 4, 4));             /* no room for the NUL */
    assert_true(room_text_ok("é—🙂", strlen("é—🙂"), 64));
    assert_false(room_text_ok("a\tb", 3, 64));
    assert_false(room_text_ok("a\x7f", 2, 64));
    assert_false(room_text_ok("\xc2\x9b", 2, 64));         /* C1 CSI */
    assert_false(room_text_ok("\xed\xa0\x80", 3, 64));     /* surrogate */
    assert_false(room_text_ok("\xe2\x80", 2, 64));         /* cut short */
    assert_false(room_text_ok("\xf4\x90\x80\x80", 4, 64)); /* above U+10FFFF */
    assert_false(room_text_ok("a\0b", 3, 64));
}

/* One part of an engine image: offset, whole length, run. */
static size_t image_part(uint32_t total, uint32_t off, uint32_t len, uint8_t fill)
{
    room_msg_init(&in, ROOM_T_IMAGE);
    in.st.run_id = 77;
    in.st.server_gen = 3;
    in.st.engine_step = 100610;
    in.img_total = total;
    in.img_off = off;
    in.img_len = len;
    memset(in.img_data, fill, len);
    return room_msg_encode(&in, buf, sizeof buf);
}

/* Engine images (a late joiner's start): parts round-trip; a part outside
 * its image, an empty or oversized one, or an image field in a state are
 * refused; a follower puts the parts together in order and drops an image
 * whose parts come out of order. */
static void test_image_parts(void **state)
{
    (void)state;
    char err[256];
    size_t n = image_part(150000, 60000, ROOM_IMAGE_CHUNK, 0xab);
    assert_true(n > ROOM_IMAGE_CHUNK);
    assert_int_equal(decode(buf, n, &out, err), 1);
    assert_int_equal(out.type, ROOM_T_IMAGE);
    assert_int_equal(out.st.run_id, 77);
    assert_int_equal(out.st.server_gen, 3);
    assert_int_equal(out.st.engine_step, 100610);
    assert_int_equal(out.img_total, 150000);
    assert_int_equal(out.img_off, 60000);
    assert_int_equal(out.img_len, ROOM_IMAGE_CHUNK);
    assert_int_equal(out.img_data[0], 0xab);
    assert_int_equal(out.img_data[ROOM_IMAGE_CHUNK - 1], 0xab);
    /* the encoder writes no part outside its image, none empty */
    assert_int_equal(image_part(1000, 900, 200, 1), 0);
    assert_int_equal(image_part(1000, 0, 0, 1), 0);
    assert_int_equal(image_part(ROOM_IMAGE_MAX + 1u, 0, 10, 1), 0);
    /* the decoder refuses them too: the whole length (bytes 44-47) and the
     * offset (51-54) patched in a valid part */
    n = image_part(1000, 900, 100, 1);
    assert_true(n > 0);
    buf[44] = 0xe8; buf[45] = 0x02; buf[46] = 0; buf[47] = 0; /* 744 < 900 + 100 */
    assert_int_equal(decode(buf, n, &out, err), -1);
    assert_non_null(strstr(err, "outside"));
    n = image_part(1000, 900, 100, 1);
    buf[44] = buf[45] = buf[46] = buf[47] = 0xff; /* over ROOM_IMAGE_MAX */
    assert_int_equal(decode(buf, n, &out, err), -1);
    n = image_part(1000, 900, 100, 1);
    buf[51] = 0xff; buf[52] = 0xff; buf[53] = 0xff; buf[54] = 0x7f;
    assert_int_equal(decode(buf, n, &out, err), -1);
    /* a part without its run (K_RUN = 12) */
    n = image_part(1000, 0, 100, 1);
    buf[12] = 60; /* now an unknown tag, skipped: the run is missing */
    assert_int_equal(decode(buf, n, &out, err), -1);
    assert_non_null(strstr(err, "lacks"));
    /* an image field (the whole length, tag 25) in a hello is refused */
    uint8_t hello[] = {1, 1, 0, 1, 2, 3, 0, 'b', 'o', 'b', 25, 4, 0, 1, 0, 0, 0};
    assert_int_equal(decode(buf, raw_frame(ROOM_T_HELLO, hello, sizeof hello), &out, err), -1);

    /* A follower puts the parts together. */
    room_follow *f = room_follow_new_at("/nonexistent/room.sock", "r");
    assert_non_null(f);
    size_t len;
    uint64_t run, step;
    uint32_t gen;
    unsigned ch = 0;
    for (uint32_t off = 0; off < 150000; off += ROOM_IMAGE_CHUNK) {
        assert_null(room_follow_image(f, &len, &run, &gen, &step));
        uint32_t k = 150000 - off < ROOM_IMAGE_CHUNK ? 150000 - off : ROOM_IMAGE_CHUNK;
        n = image_part(150000, off, k, (uint8_t)(off / ROOM_IMAGE_CHUNK + 1));
        ch |= room_follow_feed(f, buf, n, 0.0);
    }
    assert_true(ch & ROOM_FC_IMAGE);
    const uint8_t *img = room_follow_image(f, &len, &run, &gen, &step);
    assert_non_null(img);
    assert_int_equal(len, 150000);
    assert_int_equal(run, 77);
    assert_int_equal(gen, 3);
    assert_int_equal(step, 100610);
    assert_int_equal(img[0], 1);
    assert_int_equal(img[ROOM_IMAGE_CHUNK], 2);
    assert_int_equal(img[149999], 3);
    room_follow_drop_image(f);
    assert_null(room_follow_image(f, &len, &run, &gen, &step));
    /* out of order: the image being assembled is dropped, none is whole */
    n = image_part(150000, 0, ROOM_IMAGE_CHUNK, 1);
    room_follow_feed(f, buf, n, 0.0);
    n = image_part(150000, 2 * ROOM_IMAGE_CHUNK, 150000 - 2 * ROOM_IMAGE_CHUNK, 3);
    assert_false(room_follow_feed(f, buf, n, 0.0) & ROOM_FC_IMAGE);
    assert_null(room_follow_image(f, &len, &run, &gen, &step));
    room_follow_stats fs;
    room_follow_get_stats(f, &fs);
    assert_int_equal(fs.image_parts_dropped, 1);
    assert_int_equal(fs.images, 1);
    room_follow_free(f);
}

/* The presenter's screen (ROOM_H_SCREEN): a STATE carries it, a DELTA of it
 * alone merges it, a state without it reads as live with nothing typed, and
 * values out of range are refused. */
static void test_screen(void **state)
{
    (void)state;
    char err[256];
    fill_state(&in);
    in.have = ROOM_H_FOLLOWERS | ROOM_H_SCREEN;
    room_screen *c = &in.st.scr;
    c->rewind_back = 1;
    c->rewind_step = 1393;
    c->input_active = 1;
    snprintf(c->typed, sizeof c->typed, "zebra");
    c->verdict_kind = 2;
    snprintf(c->verdict, sizeof c->verdict, "I could not read a number in 'zebra'.");
    c->nhints = 2;
    snprintf(c->hints[0], sizeof c->hints[0], "Count the blocks.");
    snprintf(c->hints[1], sizeof c->hints[1], "Sixteen per block.");
    c->flag_editing = 2;
    c->flag_sel = 3;
    snprintf(c->flag_typed, sizeof c->flag_typed, "0.95");
    size_t n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), 1);
    assert_int_equal(out.have, ROOM_H_FULL | ROOM_H_FOLLOWERS | ROOM_H_SCREEN);
    const room_screen *d = &out.st.scr;
    assert_int_equal(d->rewind_back, 1);
    assert_int_equal(d->rewind_step, 1393);
    assert_int_equal(d->input_active, 1);
    assert_string_equal(d->typed, "zebra");
    assert_int_equal(d->verdict_kind, 2);
    assert_string_equal(d->verdict, c->verdict);
    assert_int_equal(d->nhints, 2);
    assert_string_equal(d->hints[1], "Sixteen per block.");
    assert_int_equal(d->flag_editing, 2);
    assert_int_equal(d->flag_sel, 3);
    assert_string_equal(d->flag_typed, "0.95");
    room_state st = out.st;
    /* a delta of the screen alone: back to live, the box emptied */
    room_msg_init(&in, ROOM_T_DELTA);
    in.st.seq = st.seq + 1;
    in.st.base_seq = st.seq;
    in.st.run_id = st.run_id;
    in.have = ROOM_H_SCREEN;
    in.st.scr.verdict_kind = -1;
    n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), 1);
    assert_int_equal(room_state_apply_delta(&st, &out), 0);
    assert_int_equal(st.scr.rewind_back, -1);
    assert_int_equal(st.scr.verdict_kind, -1);
    assert_string_equal(st.scr.typed, "");
    assert_int_equal(st.scr.nhints, 0);
    assert_int_equal(st.step, 5); /* the rest stays */
    /* a state without the screen: live, nothing typed */
    fill_state(&in);
    n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), 1);
    assert_int_equal(out.st.scr.rewind_back, -1);
    assert_int_equal(out.st.scr.verdict_kind, -1);
    /* out of range: the flags view's mode, a verdict kind */
    fill_state(&in);
    in.have = ROOM_H_SCREEN;
    in.st.scr.flag_editing = 3;
    n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), -1);
    in.st.scr.flag_editing = 0;
    in.st.scr.verdict_kind = 40;
    n = room_msg_encode(&in, buf, sizeof buf);
    assert_int_equal(decode(buf, n, &out, err), -1);
    assert_non_null(strstr(err, "verdict"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_round_trip), cmocka_unit_test(test_small_messages),
        cmocka_unit_test(test_delta_and_apply),  cmocka_unit_test(test_partial_frames),
        cmocka_unit_test(test_bad_headers),      cmocka_unit_test(test_bad_fields),
        cmocka_unit_test(test_bad_state),        cmocka_unit_test(test_counts_bounded),
        cmocka_unit_test(test_text_ok),          cmocka_unit_test(test_image_parts),
        cmocka_unit_test(test_screen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
