/* app_keys: keys and mouse. The main keys (footer and ? help), the flags
 * view when it has the keys, the answer box, the overlays, mouse clicks on
 * blocks and flags (handed to the view under the pointer, ui_views.h).
 * Changes reach the lesson only through lsn_* calls; what they need of the
 * engine they read from the frame, as the views do. */
#include "app.h"
#include "app_rewind.h"
#include "app_room.h"
#include "app_term.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui_chrome.h"
#include "ui_flags.h"
#include "ui_pool.h"
#include "ui_reqs.h"
#include "ui_style.h"
#include "ui_text.h"
#include "ui_views.h"

/* ---- keys ---------------------------------------------------------------- */

static void apply_flag(app *a, const char *name, const char *value)
{
    char err[256] = "";
    a->recap[0] = 0; /* the learner acted: the last answer's explanation has been read */
    unsigned ch = lsn_set_flag(a->lsn, name, value, err, sizeof err);
    if (!ch && err[0]) {
        app_status(a, UI_R_ERROR, "%s", err);
        return;
    }
    app_lesson_changed(a, ch);
    const char *serr = lsn_server_error(a->lsn);
    int lf;
    int tp_hidden = app_tp_reachable(a) && !(app_shown_panes(a, &lf) & UI_PANE_BIT(UI_PANE_TP));
    if (serr) app_status(a, UI_R_ERROR, "%s = %s: the server did not start%s", name, *value ? value : "(default)",
                         lsn_goal_not_counted(a->lsn) ? " (not counted for this goal)" : "");
    else app_status(a, UI_R_OK, "%s = %s: server restarted%s%s", name, *value ? value : "(default)",
                    lsn_goal_not_counted(a->lsn) ? " (not counted for this goal)" : "",
                    tp_hidden ? " (Tab: the ranks)" : "");
}

static void give_hint(app *a)
{
    const char *h = lsn_hint(a->lsn);
    if (!h) {
        app_status(a, UI_R_DIM, "No more hints here.");
        return;
    }
    if (a->nhints < APP_MAX_HINTS) snprintf(a->hints[a->nhints++], sizeof a->hints[0], "%s", h);
    a->dirty |= UI_PANE_BIT(UI_PANE_TEXT);
}

static void submit_answer(app *a, const char *text)
{
    lsn_verdict v;
    memset(&v, 0, sizeof v);
    int page = lsn_page_number(a->lsn);   /* the question's page, before the lesson moves on */
    const lsn_question *asked = lsn_get_question(a->lsn);
    int predict = asked && asked->predict;
    unsigned ch = lsn_answer(a->lsn, text, &v);
    snprintf(a->verdict, sizeof a->verdict, "%s", v.message);
    a->verdict_kind = (int)v.kind;
    a->input_len = 0;  /* a wrong answer leaves the box empty for the next try */
    a->input[0] = 0;
    if (v.kind == LSN_V_CORRECT) {
        a->input_active = 0;
        app_status(a, UI_R_OK, "%s", predict ? "Noted: now the engine runs" : "Right: see the text view.");
        a->status_page = lsn_page_number(a->lsn); /* about this page's answer only */
        /* The lesson may open a new page at once: the explanation stays on
         * top of the text view until the learner presses n or p. */
        snprintf(a->recap, sizeof a->recap, "%s", v.message[0] ? v.message : "Right.");
        a->recap_page = page;
        a->verdict[0] = 0;
    } else if (a->status_page >= 0) {
        /* the last question's "Right: ..." does not stand beside this one's miss */
        a->status[0] = 0;
        a->status_until = 0;
        a->dirty |= UI_PANE_BIT(UI_PANE_HEADER) | UI_PANE_BIT(UI_PANE_FOOTER) | UI_PANE_BIT(UI_PANE_FLAGS);
    }
    a->vst.text_follow = 1;
    /* A wrong answer earns the next hint (lessons/API.md): lsn_answer already
     * put it at the end of v.message; asking lsn_hint here as well would use
     * up a second one. */
    app_lesson_changed(a, ch);
    a->dirty |= UI_PANE_BIT(UI_PANE_TEXT);
}

static void next_step(app *a)
{
    lsn_state st = lsn_get_state(a->lsn);
    if (st == LSN_DONE) {
        int cur = lsn_current(a->lsn);
        const lsn_info *li = lsn_info_of(a->lsn, cur + 1);
        if (li && li->available) app_load_lesson(a, cur + 1, 0);
        else app_open_overlay(a, APP_OV_LESSONS);
        return;
    }
    unsigned ch = lsn_next(a->lsn);
    if (!ch) {
        /* n waits for something: say what. */
        const lsn_goal *g = lsn_get_goal(a->lsn);
        if (lsn_get_question(a->lsn))
            app_status(a, UI_R_WARN, "Answer the question first (type it, Enter); h for a hint");
        else if (g && !g->met)
            app_status(a, UI_R_WARN, "Reach the goal first: change a flag (f); h for a hint");
    }
    app_lesson_changed(a, ch);
}

static void cycle_view(app *a)
{
    int lf;
    unsigned m = app_shown_panes(a, &lf);
    if (app_tp_reachable(a)) m |= UI_PANE_BIT(UI_PANE_TP);
    if (!m) return;
    int start = a->view_focus >= 0 ? a->view_focus : UI_PANE_MEMORY - 1;
    for (int i = 1; i <= UI_PANE_COUNT; i++) {
        int p = start + i;
        if (p >= UI_PANE_COUNT) p = UI_PANE_MEMORY + (p - UI_PANE_COUNT);
        if (p >= UI_PANE_MEMORY && (m & UI_PANE_BIT(p))) {
            a->view_focus = p;
            app_status(a, UI_R_DIM, "View: %s", ui_layout_pane_name((ui_pane)p));
            app_relayout(a, 0);
            return;
        }
    }
}

static void flags_key(app *a, int ch)
{
    int n = lsn_flag_count(a->lsn);
    if (n <= 0) { a->key_focus = -1; app_relayout(a, 0); return; }
    const lsn_flag *f = lsn_flag_at(a->lsn, a->vst.flag_sel < n ? a->vst.flag_sel : 0);
    if (a->flag_editing) {
        if (ch == 27) { a->flag_editing = 0; }
        else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
            a->flag_editing = 0;
            char name[64];
            snprintf(name, sizeof name, "%s", f->name);
            apply_flag(a, name, a->flag_buf);
        } else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
            if (a->flag_len > 0) a->flag_buf[--a->flag_len] = 0;
        } else if (ch == 21) { /* Ctrl-U: clear */
            a->flag_len = 0;
            a->flag_buf[0] = 0;
        } else if (ch >= 32 && ch < 127 && a->flag_len < APP_INPUT_MAX - 1) {
            /* The pre-filled value is selected: the first character typed
             * replaces it (as in a dialog's text field). */
            if (a->flag_selall) { a->flag_len = 0; a->flag_buf[0] = 0; }
            a->flag_buf[a->flag_len++] = (char)ch;
            a->flag_buf[a->flag_len] = 0;
        }
        a->flag_selall = 0;
        a->dirty |= UI_PANE_BIT(UI_PANE_FLAGS) | UI_PANE_BIT(UI_PANE_FOOTER);
        return;
    }
    switch (ch) {
    case 27: case 'f':
        a->key_focus = -1;
        app_relayout(a, 0);
        break;
    case KEY_UP: case 'k': if (a->vst.flag_sel > 0) a->vst.flag_sel--; break;
    case KEY_DOWN: case 'j': if (a->vst.flag_sel < n - 1) a->vst.flag_sel++; break;
    case KEY_LEFT: case KEY_RIGHT: case '+': case '-': case '=': case '<': case '>': {
        char v[APP_INPUT_MAX];
        int dir = (ch == KEY_RIGHT || ch == '+' || ch == '=' || ch == '>') ? 1 : -1;
        char cur[APP_INPUT_MAX];
        app_frame_update(a);
        ui_flags_effective(&a->frame, f, cur, sizeof cur);
        if (lsn_catalog_step(a->lsn, f->name, cur, dir, v, sizeof v) || ui_flags_step(cur, f, dir, v, sizeof v)) {
            char name[64];
            snprintf(name, sizeof name, "%s", f->name);
            apply_flag(a, name, v);
        } else {
            app_status(a, UI_R_DIM, "%s: no steps to take; Enter or a digit types a value", f->name);
        }
        break;
    }
    case '\n': case '\r': case KEY_ENTER: case 'e':
        a->flag_editing = 1;
        app_frame_update(a);
        ui_flags_effective(&a->frame, f, a->flag_buf, sizeof a->flag_buf);
        a->flag_len = (int)strlen(a->flag_buf);
        a->flag_selall = a->flag_len > 0;
        app_status(a, UI_R_DIM, "Editing %s: type a value, Enter applies, Esc cancels", f->name);
        break;
    case 'q': case '?': case 'n': case 'p': case ' ': case 'h': case 'l': case '\t':
        /* Leave the flags and let the main keys act. */
        a->key_focus = -1;
        app_relayout(a, 0);
        ungetch(ch);
        break;
    default:
        if ((ch >= '0' && ch <= '9') || ch == '.') {
            a->flag_editing = 1;
            a->flag_buf[0] = (char)ch;
            a->flag_buf[1] = 0;
            a->flag_len = 1;
            a->flag_selall = 0;
            app_status(a, UI_R_DIM, "Editing %s: Enter applies, Esc cancels", f->name);
        }
        break;
    }
    a->dirty |= UI_PANE_BIT(UI_PANE_FLAGS) | UI_PANE_BIT(UI_PANE_FOOTER);
}

/* A command key typed into an empty answer box acts as a command; a
 * letter that is one of the question's choices is an answer. */
static int box_command_key(const app *a, const lsn_question *q, int ch)
{
    if (a->input_len > 0) return 0;
    if (q && q->kind == LSN_Q_CHOICE && ch >= 'a' && ch < 'a' + q->nchoices) return 0;
    return ch == 'f' || ch == 'n' || ch == 'p' || ch == '?' || ch == '\t' || ch == 'l' || ch == 'r' ||
           ch == 'q' || ch == KEY_UP || ch == KEY_DOWN || ch == KEY_PPAGE || ch == KEY_NPAGE;
}

static void answer_key(app *a, int ch)
{
    if (ch == 27) { a->input_active = 0; }
    else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
        if (a->input_len > 0) submit_answer(a, a->input);
    } else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
        if (a->input_len > 0) a->input[--a->input_len] = 0;
    } else if (ch == 21) { /* Ctrl-U: clear */
        a->input_len = 0;
        a->input[0] = 0;
    } else if (ch == 'h' && a->input_len == 0) {
        give_hint(a);
    } else if (ch >= 32 && ch < 127 && a->input_len < APP_INPUT_MAX - 1) {
        a->input[a->input_len++] = (char)ch;
        a->input[a->input_len] = 0;
    }
    a->dirty |= UI_PANE_BIT(UI_PANE_TEXT) | UI_PANE_BIT(UI_PANE_FOOTER);
}

static void mouse_key(app *a)
{
    MEVENT me;
    if (getmouse(&me) != OK) return;
    ui_mouse m = UI_MOUSE_CLICK;
    if (me.bstate & BUTTON4_PRESSED) m = UI_MOUSE_WHEEL_UP;
#ifdef BUTTON5_PRESSED
    else if (me.bstate & BUTTON5_PRESSED) m = UI_MOUSE_WHEEL_DOWN;
#endif
    app_mouse_at(a, me.y, me.x, m);
}

static void overlay_key(app *a, int ch, int *quit)
{
    if (a->overlay == APP_OV_HELP) {
        int page = a->vst.help_rows > 2 ? a->vst.help_rows - 1 : 1;
        if (ch == 27 || ch == 'q' || ch == '?' || ch == '\n' || ch == ' ') app_open_overlay(a, APP_OV_NONE);
        else if (ch == KEY_UP || ch == 'k') a->vst.help_scroll--;
        else if (ch == KEY_DOWN || ch == 'j') a->vst.help_scroll++;
        else if (ch == KEY_PPAGE) a->vst.help_scroll -= page;
        else if (ch == KEY_NPAGE) a->vst.help_scroll += page;
        else if (ch == KEY_HOME) a->vst.help_scroll = 0;
        else if (ch == KEY_END) a->vst.help_scroll = ui_chrome_help_lines(); /* clamped as it draws */
        else return;
        a->dirty = ~0u;
        return;
    }
    if (a->overlay == APP_OV_LESSONS) {
        int n = lsn_count(a->lsn);
        if (ch == 27 || ch == 'q' || ch == 'l') app_open_overlay(a, APP_OV_NONE);
        else if (ch == KEY_UP || ch == 'k') { if (a->vst.list_sel > 0) a->vst.list_sel--; }
        else if (ch == KEY_DOWN || ch == 'j') { if (a->vst.list_sel < n - 1) a->vst.list_sel++; }
        else if (ch >= '0' && ch <= '9') {
            /* Typing a number jumps to that lesson: "2" then "1" picks 21. */
            int want = ch - '0';
            const lsn_info *cur = lsn_info_at(a->lsn, a->vst.list_sel);
            if (cur && a->now - a->list_typed_at < 1.5 && cur->number * 10 + want <= n) want += cur->number * 10;
            a->list_typed_at = a->now;
            for (int i = 0; i < n; i++) {
                const lsn_info *li = lsn_info_at(a->lsn, i);
                if (li && li->number == want) { a->vst.list_sel = i; break; }
            }
        }
        else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
            const lsn_info *li = lsn_info_at(a->lsn, a->vst.list_sel);
            app_open_overlay(a, APP_OV_NONE);
            if (li && li->available) app_load_lesson(a, li->number, 1);
            else if (li) app_status(a, UI_R_WARN, "Lesson %d is not written yet.", li->number);
        }
        a->dirty = ~0u;
        return;
    }
    if (ch == 'y' || ch == 'Y') {
        int kind = a->overlay;
        app_open_overlay(a, APP_OV_NONE);
        if (kind == APP_OV_CONFIRM_RESET) {
            a->nhints = 0;
            a->verdict[0] = 0;
            a->recap[0] = 0;
            app_lesson_changed(a, lsn_reset(a->lsn));
        } else if (kind == APP_OV_CONFIRM_QUIT) {
            *quit = 1;
        }
    } else if (ch == 'n' || ch == 'N' || ch == 27 || ch == 'q') {
        app_open_overlay(a, APP_OV_NONE);
    }
}

/* v: keep the plan the memory view draws now as its second bar, so the
 * next flag change shows beside it term by term; v again drops it. */
static void keep_plan(app *a)
{
    a->dirty |= UI_PANE_BIT(UI_PANE_MEMORY);
    if (a->vs_kept) {
        a->vs_kept = 0;
        app_relayout(a, 0);
        app_status(a, UI_R_DIM, "The kept plan is dropped: one memory bar again");
        return;
    }
    app_frame_update(a);
    if (!a->frame.has_plan) {
        app_status(a, UI_R_DIM, "No plan to keep yet: start a server first");
        return;
    }
    if (!a->vs_plan && !(a->vs_plan = malloc(sizeof *a->vs_plan))) return;
    *a->vs_plan = a->frame.plan;
    a->vs_kept = 1;
    app_relayout(a, 0);
    int lf;
    int shown = app_shown_panes(a, &lf) & UI_PANE_BIT(UI_PANE_MEMORY);
    app_status(a, UI_R_OK, "Plan kept: change a flag to see it beside the new one%s (v drops it)",
               shown ? "" : " in the memory view");
}

static void step_once(app *a)
{
    if (!lsn_engine_runs(a->lsn)) {
        app_status(a, UI_R_DIM, "The lesson holds the engine on this page: n goes on");
        return;
    }
    /* Exactly one engine step, whatever the lesson's animation rate. */
    a->paused = 1;
    app_lesson_changed(a, lsn_tick_steps(a->lsn, 1));
    a->dirty |= UI_PANE_BIT(UI_PANE_HEADER);
}

void app_handle_key(app *a, int ch, int *quit)
{
    ch = app_term_key(ch); /* Home and End in every encoding (app_term.h) */
    if (app_room_key(a, ch)) /* a follower's keys (app_room.h) */
        return;
    if (ch == KEY_RESIZE) {
        getmaxyx(stdscr, a->rows, a->cols);
        app_close_overlay();
        app_relayout(a, 1);
        if (a->overlay) app_open_overlay(a, a->overlay);
        return;
    }
    if (a->lay.too_small) {
        if (ch == 'q' || ch == 'Q') *quit = 1;
        return;
    }
    if (ch == KEY_MOUSE) { mouse_key(a); return; }
    if (a->overlay) { overlay_key(a, ch, quit); return; }
    if (app_rewind_key(a, ch)) return; /* [ ] { } Home End; other keys that act return to the present */
    /* A follower's flags view and answer box are the presenter's, shown: its
     * own keys (the few app_room_key lets through) scroll and quit. */
    int drives = app_room_drives(a);
    if (a->key_focus == UI_PANE_FLAGS && !drives) { flags_key(a, ch); return; }
    const lsn_question *q = lsn_get_question(a->lsn);
    if (a->input_active && q && !drives) {
        if (!box_command_key(a, q, ch)) { answer_key(a, ch); return; }
        a->input_active = 0;
        a->dirty |= UI_PANE_BIT(UI_PANE_TEXT) | UI_PANE_BIT(UI_PANE_FOOTER);
    }
    if (q && q->kind == LSN_Q_CHOICE && ch >= 'a' && ch < 'a' + q->nchoices && ch <= 'e') {
        char s[2] = { (char)ch, 0 };
        submit_answer(a, s);
        return;
    }
    if (q && ((ch >= '0' && ch <= '9') || ch == '.' || ch == '\n' || ch == '\r' || ch == KEY_ENTER)) {
        a->input_active = 1;
        if (ch != '\n' && ch != '\r' && ch != KEY_ENTER) answer_key(a, ch);
        a->dirty |= UI_PANE_BIT(UI_PANE_TEXT) | UI_PANE_BIT(UI_PANE_FOOTER);
        return;
    }
    switch (ch) {
    case 'q': case 'Q':
        /* A presenter with followers: one stray q must not end the class. */
        if (app_room_followers(a) > 0) app_open_overlay(a, APP_OV_CONFIRM_QUIT);
        else *quit = 1;
        break;
    /* moving on or back: what was said about the last page is done with */
    case 'n': case KEY_RIGHT: a->recap[0] = 0; a->status_until = 0; next_step(a); break;
    case 'p': case 'b': case KEY_LEFT:
        a->recap[0] = 0;
        a->status_until = 0;
        app_lesson_changed(a, lsn_back(a->lsn));
        break;
    case ' ':
        if (!a->paused && !lsn_engine_runs(a->lsn)) {
            app_status(a, UI_R_DIM, "The lesson holds the engine on this page: nothing runs to pause");
            break;
        }
        a->paused = !a->paused;
        a->dirty |= UI_PANE_BIT(UI_PANE_HEADER) | UI_PANE_BIT(UI_PANE_TEXT);
        break;
    case 's': step_once(a); break;
    case '+': case '=':
        a->speed *= 1.5;
        if (a->speed > 20) a->speed = 20;
        lsn_set_speed(a->lsn, a->speed);
        a->dirty |= UI_PANE_BIT(UI_PANE_HEADER);
        break;
    case '-': case '_':
        a->speed /= 1.5;
        if (a->speed < 0.05) a->speed = 0.05;
        lsn_set_speed(a->lsn, a->speed);
        a->dirty |= UI_PANE_BIT(UI_PANE_HEADER);
        break;
    case 'f': {
        int nf = lsn_flag_count(a->lsn);
        const lsn_flag *sf = nf > 0 ? lsn_flag_at(a->lsn, a->vst.flag_sel < nf ? a->vst.flag_sel : 0) : NULL;
        if (sf) app_status(a, UI_R_DIM, "Flags: %s selected (up/down picks another)", sf->name);
        a->key_focus = UI_PANE_FLAGS;
        app_relayout(a, 0);
        a->dirty |= UI_PANE_BIT(UI_PANE_FLAGS) | UI_PANE_BIT(UI_PANE_FOOTER);
        break;
    }
    case '\t': cycle_view(a); break;
    case 'h': give_hint(a); break;
    case 'v': keep_plan(a); break;
    case 'r': app_open_overlay(a, APP_OV_CONFIRM_RESET); break;
    case 'l': a->vst.list_sel = lsn_current(a->lsn) - 1; app_open_overlay(a, APP_OV_LESSONS); break;
    case '?': app_open_overlay(a, APP_OV_HELP); break;
    case 't':
        app_frame_update(a);
        a->sel_req = ui_reqs_next(&a->frame, a->sel_req);
        app_relayout(a, 0);
        a->dirty |= UI_PANE_BIT(UI_PANE_POOL) | UI_PANE_BIT(UI_PANE_REQUESTS);
        break;
    case KEY_UP: case 'k': ui_text_scroll(&a->vst, -1); a->dirty |= UI_PANE_BIT(UI_PANE_TEXT); break;
    case KEY_DOWN: case 'j': ui_text_scroll(&a->vst, 1); a->dirty |= UI_PANE_BIT(UI_PANE_TEXT); break;
    case KEY_PPAGE: ui_text_scroll(&a->vst, -(a->vst.text_rows > 2 ? a->vst.text_rows - 1 : 1)); a->dirty |= UI_PANE_BIT(UI_PANE_TEXT); break;
    case KEY_NPAGE: ui_text_scroll(&a->vst, a->vst.text_rows > 2 ? a->vst.text_rows - 1 : 1); a->dirty |= UI_PANE_BIT(UI_PANE_TEXT); break;
    case 27:
        if (a->vst.sel_block >= 0 || a->sel_req >= 0) {
            a->vst.sel_block = -1;
            a->sel_req = -1;
            app_relayout(a, 0);
            a->dirty = ~0u;
        }
        break;
    default: break;
    }
}
