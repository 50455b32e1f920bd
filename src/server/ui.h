/* The web dashboard's static files, built into the binary.
 *
 * scripts/embed-ui.py turns every file of ui/ into one entry of
 * sc__ui_assets (generated into $(BUILD)/gen/ui_assets.c by the Makefile),
 * so the server needs no files at run time and the dashboard always
 * matches the API it was built with. */
#ifndef SC_SERVER_UI_H
#define SC_SERVER_UI_H

#include <stddef.h>

typedef struct sc_ui_asset {
	const char *name; /* file name inside ui/, e.g. "app.js" */
	const char *content_type;
	const unsigned char *data; /* static, never freed */
	size_t len;
} sc_ui_asset_t;

extern const sc_ui_asset_t sc__ui_assets[];
extern const size_t sc__ui_nassets;

#endif
