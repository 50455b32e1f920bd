/* /ui: the web dashboard. Serves the files of ui/ that the build embedded
 * (src/server/ui.h). The files are public (the dashboard asks for a token
 * and sends it on every API call itself), so no authentication here. */
#include <string.h>

#include "server/server.h"
#include "server/ui.h"

static const sc_ui_asset_t *find_asset(const char *name)
{
	for (size_t i = 0; i < sc__ui_nassets; i++)
		if (strcmp(sc__ui_assets[i].name, name) == 0)
			return &sc__ui_assets[i];
	return NULL;
}

static void handle_ui(sc_http_req_t *r, void *ud)
{
	const char *path = sc_http_path(r);
	const char *name = NULL;
	/* The route is a prefix: "/uiX" must not match. */
	if (strcmp(path, "/ui") == 0 || strcmp(path, "/ui/") == 0)
		name = "index.html";
	else if (strncmp(path, "/ui/", 4) == 0 && !strchr(path + 4, '/'))
		name = path + 4;
	const sc_ui_asset_t *a = name ? find_asset(name) : NULL;
	if (!a) {
		static const char msg[] = "not found\n";
		sc_http_respond(r, 404, "text/plain", msg, sizeof(msg) - 1);
		return;
	}
	sc_http_respond(r, 200, a->content_type, a->data, a->len);
}

int sc__ui_register(sc_server_t *s)
{
	return sc_http_route(s->http, "GET", "/ui", handle_ui, s);
}
