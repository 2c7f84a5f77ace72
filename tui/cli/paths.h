/* Where kvlab finds its data (assets/ and lessons/). */
#ifndef KVLAB_PATHS_H
#define KVLAB_PATHS_H

/* The folder holding assets/ and lessons/, searched in this order:
 * $KVLAB_DATA_DIR; <exe dir>/../share/kvlab (installed); the source tree the
 * binary was built from; the configured install data dir. Never NULL. */
const char *kvlab_data_dir(void);

/* kvlab_data_dir()/assets and kvlab_data_dir()/lessons. */
const char *kvlab_assets_dir(void);
const char *kvlab_lessons_dir(void);

#endif
