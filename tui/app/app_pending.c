/* Placeholder until the lesson-app issue lands. */
#include <stdio.h>
#include <string.h>
#include "commands.h"
int app_main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--version")) { printf("kvlab %s\n", KVLAB_VERSION); return 0; }
    fprintf(stderr, "kvlab: the lesson app is not built yet; try kvlab serve --help\n");
    return 2;
}
