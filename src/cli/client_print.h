/* Output of the CLI client verbs. See client_print.c. */
#ifndef SC_CLI_CLIENT_PRINT_H
#define SC_CLI_CLIENT_PRINT_H

#include <jansson.h>

/* The string at obj.a (or obj.a.b when b is set), or "" (never NULL);
 * borrowed from obj. */
const char *sc_cli_str_at(json_t *obj, const char *a, const char *b);
/* Prints v as YAML on stdout. */
void sc_cli_yaml_print(json_t *v, int indent, int in_list);
/* Prints doc (one object or a list with "items") of resource res as
 * output says: "json", "yaml", "wide" or a table. */
void sc_cli_print_doc(const char *output, const char *res, json_t *doc);

#endif
