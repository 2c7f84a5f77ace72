/* Placeholder until the foundation issue lands. */
#include <stdio.h>
#include "commands.h"
int cmd_models(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "kvlab models: not built yet\n"); return 2; }
int cmd_gpus(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "kvlab gpus: not built yet\n"); return 2; }
