/* libFuzzer target for the lesson host (lessons/host/): the input is the
 * body of a lesson's run(lab), run headless by kvlab check's driver against
 * the whole lab API, under small limits (heap, instructions, wall time,
 * pattern work, waits, engine steps). Whatever the code does, the host must
 * end the lesson with a result, never crash, leak, hang or exceed a limit
 * by much. tests/fuzz/lesson.dict gives the fuzzer the API's words. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lsn.h"

static lsn_runner *runner;
static char lesson_path[512];

static void write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    fwrite(text, 1, len, f);
    fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static char dir[] = "/tmp/kvlab-fuzz-lesson-XXXXXX";
    if (!mkdtemp(dir))
        abort();
    char p[600];
    snprintf(p, sizeof p, "%s/lessons", dir);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/lessons/lib", dir);
    if (symlink(KVLAB_SOURCE_DIR "/lessons/lib", p) < 0)
        abort();
    static const char manifest[] =
        "{\"format_version\": 1, \"chapters\": [{\"number\": 1, \"title\": \"Fuzz\"}],\n"
        " \"lessons\": [{\"number\": 1, \"chapter\": 1, \"file\": \"01-fuzz.lua\", \"title\": \"Fuzz\"}]}\n";
    snprintf(p, sizeof p, "%s/lessons/manifest.json", dir);
    write_file(p, manifest, sizeof manifest - 1);
    snprintf(lesson_path, sizeof lesson_path, "%s/lessons/01-fuzz.lua", dir);
    write_file(lesson_path, "return {id = 1, run = function(lab) end}\n", 41);
    char lessons[600];
    snprintf(lessons, sizeof lessons, "%s/lessons", dir);
    lsn_config cfg = {
        .lessons_dir = lessons, .assets_dir = KVLAB_SOURCE_DIR "/assets", .state_dir = "", .headless = 1,
        .limits = {.heap_bytes = 16u << 20, .instructions = 2000000, .seconds = 1.0, .pattern_work = 1e6,
                   .check_waits = 200, .check_engine_steps = 2000},
    };
    char err[512];
    runner = lsn_new(&cfg, err, sizeof err);
    if (!runner) {
        fprintf(stderr, "fuzz_lesson: %s\n", err);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    static const char head[] = "local fmt, ask = require('lib.fmt'), require('lib.ask')\n"
                               "return {id = 1, flags = '*', run = function(lab)\n";
    static const char tail[] = "\nend}\n";
    char *text = malloc(sizeof head + size + sizeof tail);
    if (!text)
        return 0;
    memcpy(text, head, sizeof head - 1);
    memcpy(text + sizeof head - 1, data, size);
    memcpy(text + sizeof head - 1 + size, tail, sizeof tail - 1);
    write_file(lesson_path, text, sizeof head - 1 + size + sizeof tail - 1);
    free(text);
    int rc = lsn_check(runner, 1, NULL);
    if (rc != 0 && rc != 1)
        abort();
    /* unloaded: nothing of the lesson is left for the next input */
    if (lsn_current(runner) != 0 || lsn_engine(runner))
        abort();
    return 0;
}
