/* libFuzzer target for the lesson answer checker (lessons/host/lsn_answer.c):
 * whatever a learner types, the checker returns one of its verdicts with a
 * non-empty message, never reads past the text, and a parsed number is finite. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lsn_answer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[512];
    if (size >= sizeof text)
        size = sizeof text - 1;
    memcpy(text, data, size);
    text[size] = '\0';
    char msg[512];
    lsn_quantity q;
    if (lsn_answer_parse(text, &q, msg, sizeof msg) == 0) {
        if (!isfinite(q.number) && !isinf(q.number))
            abort();
    } else if (!msg[0]) {
        abort();
    }
    static const char *const units[] = {"", "tokens", "GiB", "GB", "bytes", "KiB", "%", "x", "vectors"};
    const lsn_near near[] = {{65536, "half"}, {2.83, "gb"}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        lsn_numq nq = {.answer = 131072, .unit = units[i], .rel_tol = 0.01, .nnear = 2, .near = near};
        double v;
        msg[0] = '\0';
        lsn_check_result r = lsn_answer_check_number(&nq, text, &v, msg, sizeof msg);
        if (r > LSN_CHECK_UNREADABLE || !msg[0])
            abort();
        if (r == LSN_CHECK_CORRECT && !(fabs(v - 131072) <= 1310.72))
            abort();
    }
    const char *choices[] = {"MHA", "GQA", "MQA"};
    int picked = -1;
    msg[0] = '\0';
    lsn_check_result r = lsn_answer_check_choice(3, choices, 2, NULL, text, &picked, msg, sizeof msg);
    if (!msg[0] || picked < 0 || picked > 3 || (r == LSN_CHECK_CORRECT) != (picked == 2))
        abort();
    char buf[64];
    lsn_answer_format(q.number, "tokens", buf, sizeof buf);
    return 0;
}
