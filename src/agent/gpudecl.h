/* Declared GPUs for machines without NVML: "NxMODEL[:mig]" (the agent's
 * --gpus). Pure parsing, apart from the agent so unit tests reach it. */
#ifndef SC_AGENT_GPUDECL_H
#define SC_AGENT_GPUDECL_H

#include <stdint.h>

#define SC_GPU_DECL_MAX 64

typedef struct sc_gpu_decl {
	int count;       /* 0..SC_GPU_DECL_MAX */
	char model[96];  /* letters, digits, '-', '.', '_' */
	uint64_t memory; /* bytes from a "-NNGB" suffix (GiB), 0 when none */
	int mig;         /* ":mig" given */
} sc_gpu_decl_t;

/* Parses decl (borrowed) into out. 0, or SC_EINVAL with out zeroed. */
int sc_gpu_decl_parse(const char *decl, sc_gpu_decl_t *out);
/* "...-80GB" or "...-80G" at the end of a model name -> bytes (GiB, as
 * devices are sold); 0 when there is none or it is over 4096. */
uint64_t sc_gpu_model_memory(const char *model);

#endif
