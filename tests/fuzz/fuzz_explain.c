/* libFuzzer target: reading a pasted vLLM log (engine/kv_logread.h), as
 * `kvlab explain` and the app's --log view do: any bytes, then the args the
 * log gives, the release it names and the line saying how sure that is.
 * Must never crash, hang or read out of bounds; every string it fills must
 * stay NUL-terminated. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kv_args.h"
#include "kv_logread.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kv_logread lr;
    char err[256], buf[256], unread[1024];
    if (size > (1u << 20))
        return 0;
    if (kv_logread_parse((const char *)data, size, &lr, err, sizeof err) != 0) {
        if (!memchr(err, '\0', sizeof err))
            __builtin_trap();
        return 0;
    }
    kv_args a;
    kv_args_init(&a);
    kv_logread_to_args(&lr, &a, unread, sizeof unread);
    kv_logread_release(&lr, buf, sizeof buf);
    kv_logread_release_how(&lr, buf, sizeof buf);
    if (!memchr(lr.model, '\0', sizeof lr.model) || !memchr(lr.error, '\0', sizeof lr.error) ||
        !memchr(unread, '\0', sizeof unread) || !memchr(buf, '\0', sizeof buf))
        __builtin_trap();
    for (int i = 0; i < lr.num_args; i++)
        if (!memchr(lr.args[i].key, '\0', sizeof lr.args[i].key))
            __builtin_trap();
    return 0;
}
