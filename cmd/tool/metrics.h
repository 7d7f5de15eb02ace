/*
 * metrics: node_exporter textfile metrics (the Prometheus text exposition
 * format), written atomically: a private temporary file in the target's
 * directory, synced, made 0644, then renamed over the target, so the
 * collector never reads half a file (PRODUCT 4, 7).
 */
#ifndef NYX_METRICS_H
#define NYX_METRICS_H

#include "nyx_buf.h"
#include "nyx_err.h"

struct nyx_metrics {
	struct nyx_buf b;
	bool oom;
};

void nyx_metrics_init(struct nyx_metrics *m);
void nyx_metrics_free(struct nyx_metrics *m);

/* "# HELP" and "# TYPE" (gauge or counter) of a family, once. */
void nyx_metrics_family(struct nyx_metrics *m, const char *name,
    const char *type, const char *help);

/* One sample; label may be NULL, else one label name and its value
 * (escaped here). */
void nyx_metrics_sample(struct nyx_metrics *m, const char *name,
    const char *label, const char *value, double v);

/* Write the file atomically; -1 with err (73). */
int nyx_metrics_write(
    struct nyx_metrics *m, const char *path, struct nyx_err *err);

#endif
