/* presets.h: named model shapes (the hyperparameters of well-known models),
 * shared by the compiler (specialized builds) and `minfer synth`. */
#ifndef MINFER_PRESETS_H
#define MINFER_PRESETS_H

#include <stdbool.h>
#include <stdint.h>

struct preset_value {
    const char *name; /* hyperparameter name in the description */
    double value;
};

struct preset {
    const char *name;      /* "qwen3-8b" */
    const char *arch;      /* description file stem: "qwen3" */
    const char *doc;
    bool tied;             /* output.weight is the token embedding (not stored) */
    struct preset_value v[16];
    int n;
};

const struct preset *preset_find(const char *name);
const char *preset_names(void); /* comma-separated, for messages */

#endif
