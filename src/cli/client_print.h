/* Output of the CLI client verbs: tables of each resource as `get` prints
 * them (kubectl's columns and manners: STATUS, READY, AGE, columns sized
 * to content, queues as a tree), YAML, JSON, `-o name` and
 * `-o jsonpath=TEMPLATE`, for a whole list and, for `get -w`, one change at
 * a time. See client_print.c. */
#ifndef SC_CLI_CLIENT_PRINT_H
#define SC_CLI_CLIENT_PRINT_H

#include <jansson.h>

#include "cli/jsonpath.h"

/* Prints v as YAML on stdout. */
void sc_cli_yaml_print(json_t *v, int indent, int in_list);

/* An output format: table, wide, json, yaml, name, or jsonpath. */
typedef struct sc_cli_out {
	char format[16];
	sc_jsonpath_t *jsonpath; /* owned, for "jsonpath" */
	int no_headers;
} sc_cli_out_t;

/* Parses -o's value ("wide", "jsonpath={.items[*].metadata.name}",
 * "jsonpath='...'"); an empty one is "table". 0, or < 0 with the reason in
 * err. */
int sc_cli_out_parse(const char *spec, sc_cli_out_t *o, char *err, size_t errsz);
void sc_cli_out_free(sc_cli_out_t *o);

/* A printer for one resource (the API's plural). Borrows o. */
typedef struct sc_cli_printer sc_cli_printer_t;
sc_cli_printer_t *sc_cli_printer_new(const sc_cli_out_t *o, const char *res);
void sc_cli_printer_free(sc_cli_printer_t *p);
/* Prints doc: one object, or a list with "items" (events sorted by time,
 * queues as a tree). */
void sc_cli_printer_doc(sc_cli_printer_t *p, json_t *doc);
/* `get -w`: prints one watch event's object (type ADDED, MODIFIED or
 * DELETED) as a row padded to the table already printed, or as a document
 * of its own in the other formats. */
void sc_cli_printer_event(sc_cli_printer_t *p, const char *type, json_t *obj);

/* Prints doc in a format that does not depend on the resource (json, yaml,
 * name, jsonpath); 0 when it did, -1 for a table format. */
int sc_cli_print_generic(const sc_cli_out_t *o, const char *res, json_t *doc);

#endif
