/* Placeholder until the owning issue lands; replaced by the real command. */
#include <stdio.h>
#include "commands.h"
int cmd_simulate(int argc, char **argv)
{
    (void)argc; (void)argv;
    fprintf(stderr, "kvlab simulate: not built yet\n");
    return 2;
}
