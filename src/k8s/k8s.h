/* `starcloud k8s`: the scheduler of a Kubernetes cluster (docs/KUBERNETES.md). */
#ifndef SC_K8S_K8S_H
#define SC_K8S_K8S_H

/* The verb: argv[0] is "k8s". Returns an exit status (cli.h). */
int sc_k8s_main(int argc, char **argv);

#endif
