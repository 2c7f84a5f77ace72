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

/* The lessons folder to use: given (--lessons DIR) if not NULL, else
 * $KVLAB_LESSONS_DIR if set, else kvlab_lessons_dir(). */
const char *kvlab_lessons_dir_for(const char *given);

#endif
