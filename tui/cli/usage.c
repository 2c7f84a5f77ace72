/* kvlab's usage text: one text for `kvlab --help`, the app's --help and the
 * hint after an unknown option (commands.h). */
#include <stdio.h>

#include "commands.h"

void kvlab_usage(FILE *f)
{
    fprintf(f,
        "usage: kvlab [--lesson N] [--lessons DIR] [--ascii] [--no-color] [--fps N]\n"
        "             [--vllm-version V] [--accounting release|textbook]\n"
        "                                 the lesson app (resumes where you left off), following\n"
        "                                 vLLM release V (default the newest; remembered)\n"
        "       kvlab --log FILE [--model NAME] [--gpu NAME]\n"
        "                                 the app on a vLLM log: memory bar, start-up log and flags\n"
        "                                 beside what the log says (kvlab explain in the app)\n"
        "       kvlab --present [ROOM] [--allow-group GROUP] | --follow [ROOM]\n"
        "                                 teach a class: present the app to a room, or follow one\n"
        "       kvlab serve MODEL [vLLM flags] [--gpu NAME] [--json]\n"
        "                                 will this `vllm serve` start, and with how many KV tokens?\n"
        "       kvlab simulate MODEL --trace FILE|gen:... [vLLM flags] [--gpu NAME] [--json] [--metrics]\n"
        "                                 run the engine on a request trace, headless\n"
        "       kvlab explain [FILE|-] [--json] [--model NAME] [--gpu NAME] [vLLM flags]\n"
        "                                 read a vLLM log: what it states beside kvlab's plan, and why\n"
        "       kvlab fit MODEL [--context N] [--concurrency C] [--gpus LIST] [--tp LIST] [--json]\n"
        "                                 which cards and tensor-parallel sizes serve this workload\n"
        "       kvlab models | gpus | lessons\n"
        "       kvlab check [N ...] [--vllm-version V]\n"
        "                                 run lessons headless; non-zero exit on a failed check\n"
        "       kvlab probe                what the CUDA backend measures on this machine\n"
        "       kvlab rooms                classroom rooms on this machine (who presents, who may join)\n"
        "       kvlab --version | --help\n");
}
