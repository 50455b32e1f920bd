/* `starcloud agent`: the node agent (docs/AGENT.md). agent.c starts the
 * modules of src/agent/ (state.h draws them) and runs the heartbeat and the
 * status reports. */
#ifndef SC_AGENT_AGENT_H
#define SC_AGENT_AGENT_H

int sc_agent_main(int argc, char **argv);

#endif
