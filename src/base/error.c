#include "starcloud/error.h"

const char *sc_strerror(int err)
{
	switch (err) {
	case SC_OK:
		return "success";
#define SC__ERR_CASE(name, msg)                                                                    \
	case SC_E##name:                                                                           \
		return msg;
		SC_ERRNO_MAP(SC__ERR_CASE)
#undef SC__ERR_CASE
	default:
		return "unknown error";
	}
}
