/*
 * control: nyx-sandboxd's /_nyx/ control plane (with --control): swap the
 * world and the fault plan, read or clear the request log, count the
 * durable operations' runs, decide NyxID approvals, without a restart.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nyx_config.h"
#include "nyx_hash.h"
#include "nyx_json.h"
#include "nyx_log.h"
#include "nyx_time.h"
#include "srv_int.h"

/* Parse a YAML or JSON request body. */
static int
body_doc(const struct req *r, jv *out, char *why, size_t whysz)
{
	struct nyx_err err = NYX_ERR_ZERO;

	if (nyx_yaml_load_buf(r->body.data ? r->body.data : "", r->body.len,
	        "request body", out, &err) < 0) {
		snprintf(why, whysz, "%s", err.message);
		return -1;
	}
	return 0;
}

static void
log_lines(struct nyx_srv *s, struct answer *a)
{
	struct nyx_buf b = NYX_BUF_ZERO;
	int i, n = jv_array_length(jv_copy(s->log));

	for (i = 0; i < n; i++) {
		char *line = nyx_json_dump(jv_array_get(jv_copy(s->log), i));

		if (line != NULL) {
			nyx_buf_addstr(&b, line);
			nyx_buf_addstr(&b, "\n");
		}
		free(line);
	}
	a->status = 200;
	a->len = b.len;
	a->body = nyx_buf_take(&b);
	nyx_buf_free(&b);
	a->headers = jv_object_set(a->headers, jv_string("Content-Type"),
	    jv_string("application/x-ndjson"));
}

/* /_nyx/ control endpoints.  Caller holds the lock. */
void
srv_handle_control(struct nyx_srv *s, const char *method, const char *path,
    const struct req *r, struct answer *a)
{
	char why[512];
	jv doc;

	if (strcmp(path, "/_nyx/requests") == 0 && strcmp(method, "GET") == 0) {
		log_lines(s, a);
	} else if (strncmp(path, "/_nyx/approvals/", 16) == 0 &&
	    strcmp(method, "POST") == 0) {
		/* a human decides: /_nyx/approvals/{id}/approve or /deny */
		const char *id = path + 16, *verb = strrchr(path, '/');
		int i, n = jv_array_length(jv_copy(s->approvals));

		a->status = 404;
		for (i = 0; verb != NULL && verb > id && i < n; i++) {
			jv e = jv_array_get(jv_copy(s->approvals), i);
			const char *eid = nyx_json_peek_str(e, "id");

			if (eid != NULL && strlen(eid) == (size_t)(verb - id) &&
			    strncmp(eid, id, (size_t)(verb - id)) == 0 &&
			    (strcmp(verb, "/approve") == 0 ||
			        strcmp(verb, "/deny") == 0)) {
				e = jv_object_set(e, jv_string("state"),
				    jv_string(verb[1] == 'a' ? "approved"
				                             : "denied"));
				s->approvals = jv_array_set(s->approvals, i, e);
				a->status = 204;
				break;
			}
			jv_free(e);
		}
	} else if (strcmp(path, "/_nyx/executions") == 0 &&
	    strcmp(method, "GET") == 0) {
		a->status = 200;
		a->body = nyx_chronod_list(s->chrono);
		a->len = a->body ? strlen(a->body) : 0;
	} else if (strcmp(path, "/_nyx/requests") == 0 &&
	    strcmp(method, "DELETE") == 0) {
		jv_free(s->log);
		s->log = jv_array();
		a->status = 204;
	} else if ((strcmp(path, "/_nyx/world") == 0 ||
	               strcmp(path, "/_nyx/faults") == 0) &&
	    strcmp(method, "PUT") == 0) {
		int rc;

		if (body_doc(r, &doc, why, sizeof(why)) < 0) {
			srv_answer_error(a, 400, "bad_request", 1000, why);
			return;
		}
		rc = path[6] == 'w'
		    ? nyx_srv_set_world(s, doc, why, sizeof(why))
		    : nyx_srv_set_faults(s, doc, why, sizeof(why));
		if (rc < 0)
			srv_answer_error(a, 400, "bad_request", 1000, why);
		else
			a->status = 204;
	} else {
		srv_answer_error(a, 404, "not_found", 1003, "Not found");
	}
}
