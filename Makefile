# Starcloud build. Plain make: one static library (libstarcloud: base, core,
# simulator), one binary (`starcloud`), cmocka unit tests, scenario tests.
#
#   make run      install missing packages, build, run the main job
#   make test     install, build, run every test (also under ASan+UBSan)
#   make bench    run the benchmarks in bench/
#
# BUILD selects the output folder; SAN=1 builds with AddressSanitizer and
# UndefinedBehaviorSanitizer into build-san/.

SAN ?= 0
ifeq ($(SAN),1)
BUILD ?= build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT := -O1 -g
else
BUILD ?= build
SANFLAGS :=
OPT := -O2 -g
endif

CC ?= cc
PKGS := jansson yaml-0.1 libuv sqlite3 libcurl openssl zlib
CFLAGS := -std=c11 -D_GNU_SOURCE $(OPT) -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wno-unused-parameter -Wvla -Iinclude -Isrc $(SANFLAGS) \
	$(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(XCFLAGS)
LDLIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lhttp_parser -lglpk -ldl -lm -lpthread
# XCFLAGS/XLDFLAGS: extra flags from outside (debian/rules: dpkg-buildflags).
LDFLAGS := $(SANFLAGS) $(XLDFLAGS)

LIB_SRC := $(wildcard src/base/*.c src/core/*.c src/manifest/*.c src/sim/*.c)
# Daemons and the CLI live in the binary only; the library stays I/O free
# apart from the simulator's trace readers. Each of them is a folder of src/
# (every folder but the library's) built as its own static library,
# $(BUILD)/lib/libsc_<folder>.a, that the binary and the unit tests link.
LIB_DIRS := base core manifest sim
COMPONENTS := $(filter-out $(LIB_DIRS),$(notdir $(patsubst %/,%,$(sort $(dir $(wildcard src/*/*.c))))))
MAIN_SRC := src/cli/main.c
comp_src = $(filter-out $(MAIN_SRC),$(wildcard src/$(1)/*.c))
CLI_SRC := $(MAIN_SRC) $(foreach c,$(COMPONENTS),$(call comp_src,$(c)))
UNIT_SRC := $(wildcard tests/unit/test_*.c)
# The dashboard (ui/) is embedded into the binary by a generated C file.
UI_FILES := $(sort $(wildcard ui/*.html ui/*.css ui/*.js))
UI_GEN := $(BUILD)/gen/ui_assets.c
BENCH_SRC := $(wildcard bench/*.c)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o) $(UI_GEN:.c=.o)
COMP_LIBS := $(foreach c,$(COMPONENTS),$(BUILD)/lib/libsc_$(c).a)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
LIB := $(BUILD)/libstarcloud.a
BIN := $(BUILD)/starcloud
# Component libraries call each other in both directions (the CLI starts the
# daemons, daemons share net and store): link them as one group.
ALL_LIBS := -Wl,--start-group $(COMP_LIBS) $(LIB) -Wl,--end-group

.PHONY: install install-files package test-install all deps node-deps build run check-src test test-unit test-scenarios test-san test-e2e test-e2e-san test-k8s test-repro test-fuzz fuzz bench bench-ha bench-sim bench-server bench-api bench-gateway bench-tls bench-agent bench-k8s bench-autoscale soak clean format

all: build

deps:
	@scripts/deps.sh

build: deps
	@$(MAKE) --no-print-directory $(BIN) $(UNIT_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(UI_GEN): $(UI_FILES) scripts/embed-ui.py
	@mkdir -p $(dir $@)
	/usr/bin/python3 scripts/embed-ui.py -o $@ $(UI_FILES)

$(UI_GEN:.c=.o): $(UI_GEN)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# libsc_<component>.a; the server's carries the embedded dashboard.
define comp_lib
$(BUILD)/lib/libsc_$(1).a: $$(patsubst %.c,$(BUILD)/%.o,$$(call comp_src,$(1))) \
		$(if $(filter server,$(1)),$(UI_GEN:.c=.o))
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach c,$(COMPONENTS),$(eval $(call comp_lib,$(c))))

$(BIN): $(BUILD)/$(MAIN_SRC:.c=.o) $(COMP_LIBS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(BUILD)/$(MAIN_SRC:.c=.o) $(ALL_LIBS) $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(COMP_LIBS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $(shell pkg-config --cflags cmocka) -o $@ $< $(ALL_LIBS) $(LDFLAGS) \
		$(LDLIBS) $(shell pkg-config --libs cmocka)

run: build
	./$(BIN) schedule -f examples/cluster.yaml -f examples/jobs.yaml
	@scripts/run-dev.sh ./$(BIN)

# Source rules first (format, banned functions, unused exports), then unit
# tests, scenario tests, ..., then the same under the sanitizers.
test: build
	@$(MAKE) --no-print-directory check-src test-unit test-scenarios test-prometheus test-e2e test-k8s test-install test-repro test-fuzz
	@$(MAKE) --no-print-directory SAN=1 test-san

test-unit: $(UNIT_BIN)
	@scripts/run-unit.sh $(UNIT_BIN)

test-scenarios: $(BIN)
	@/usr/bin/python3 tests/scenarios/run.py --bin $(BIN) tests/scenarios

# End-to-end: each test starts a real `starcloud server` on a free port.
# Kubernetes mode has its own target (test-k8s).
test-e2e: $(BIN) node-deps
	@STARCLOUD_BIN=$(BIN) /usr/bin/python3 -m pytest -q tests/e2e --ignore-glob='*/test_k8s_*'

# Kubernetes mode against a real kube-apiserver and etcd on loopback. The
# API server is built once from Debian's `kubernetes` source package by
# scripts/kube-build.sh into $(KUBE_CACHE) (outside the checkout; ~15
# CPU-minutes the first time, nothing after). Where it cannot be built the
# tests skip and say why.
KUBE_CACHE ?= /var/cache/starcloud/kube
test-k8s: $(BIN)
	@STARCLOUD_KUBE_CACHE=$(KUBE_CACHE) nice scripts/kube-build.sh kube-apiserver >/dev/null || \
	 echo "test-k8s: no kube-apiserver (see $(KUBE_CACHE)/failed); the tests skip"
	@STARCLOUD_BIN=$(BIN) STARCLOUD_KUBE_CACHE=$(KUBE_CACHE) /usr/bin/python3 -m pytest -q \
	 tests/e2e/test_k8s_*.py

# The e2e tests' real clients (the official openai npm package), installed
# from the npm registry at the versions of tests/e2e/node/package-lock.json.
node-deps:
	@scripts/node-deps.sh tests/e2e/node

# Alert rules and scrape config of deploy/prometheus (promtool check + test).
test-prometheus:
	@scripts/check-prometheus.sh

test-san: $(BIN) $(UNIT_BIN)
	@echo "== again under AddressSanitizer + UndefinedBehaviorSanitizer"
	@$(MAKE) --no-print-directory SAN=1 test-unit test-scenarios test-e2e-san

# The control plane's end-to-end tests against the sanitizer build (a
# representative subset: the API, the scheduling loop, auth, bad input and
# kill -9); any ASan/UBSan/LSan report in a server's stderr fails the test.
E2E_SAN := tests/e2e/test_api.py tests/e2e/test_sched.py tests/e2e/test_auth_input.py \
	tests/e2e/test_api_config.py tests/e2e/test_cli_ops.py \
	tests/e2e/test_list.py tests/e2e/test_k8s_reclaim.py tests/e2e/test_compaction.py
test-e2e-san:
	@$(MAKE) --no-print-directory SAN=1 build-san/starcloud
	@STARCLOUD_BIN=build-san/starcloud STARCLOUD_SAN=1 \
	 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	 /usr/bin/python3 -m pytest -q $(E2E_SAN)

# The simulator against the FGD reference results and `default` against FGD
# at every 1 % of arrived demand on all 24 OpenB lists, with the bound
# (optimised build only: 464 packing simulations and 107 bounds), then time
# mode over the whole Gavel, OpenB and Tiresias traces (about 35 s); both
# skip when ../shared/traces is absent.
test-repro: $(BIN)
	@/usr/bin/python3 tests/repro/check_repro.py --bin $(BIN) --shared ../shared
	@/usr/bin/python3 tests/repro/check_time_traces.py --bin $(BIN) --shared ../shared

# HA control plane: etcd versus SQLite, leader failover (docs/BENCHMARKS.md).
bench-ha: $(BIN)
	@STARCLOUD_BIN=$(BIN) /usr/bin/python3 bench/ha_bench.py

bench-sim: $(BIN)
	@bench/sim_bench.sh $(BIN)

# Node agent: failover after a node kill (default lease), liveness restart,
# RSS and CPU with 100 pods (docs/BENCHMARKS.md). About four minutes.
bench-agent: $(BIN)
	@/usr/bin/python3 bench/agent_bench.py --bin $(BIN) all

bench: build
	./$(BIN) bench core --cycles 5
	./$(BIN) bench preempt --nodes 10000 --pending 10000
	./$(BIN) bench server --nodes 1000 --rounds 10 --idle 10

# The control plane at 1,000, 5,000 and 10,000 nodes (10 jobs per node), one
# JSON line each (docs/BENCHMARKS.md). About ten minutes on 2 cores.
bench-server: build
	./$(BIN) bench server --nodes 1000
	./$(BIN) bench server --nodes 5000
	./$(BIN) bench server --nodes 10000 --idle 30

# The headline run (issue 23, docs/SOAK.md): 8 agents x 8 declared GPUs, a
# P/D Llama-style Deployment behind the gateway under open-loop traffic,
# training gangs from the Gavel trace, notebooks, and faults on a schedule;
# writes build/soak/report.md with its plots. About 10 minutes
# (SOAK_SHORT=1: about 3, the mode `make test` runs as tests/e2e/test_soak.py).
soak: build
	@/usr/bin/python3 bench/soak/soak.py --bin $(BIN) --shared ../shared --out build/soak \
	 $(if $(SOAK_SHORT),--short)

# Control-plane API benchmark: starts its own servers on free loopback ports.
bench-api: build
	@$(MAKE) --no-print-directory $(BUILD)/bench/api_bench
	./$(BUILD)/bench/api_bench --bin $(BIN)

# Kubernetes mode: pods bound per second against a real kube-apiserver,
# starcloud k8s and the stock kube-scheduler alternating on the same world
# (1,000 nodes, 10,000 pending pods; about 15 minutes). docs/BENCHMARKS.md.
bench-k8s: $(BIN)
	@STARCLOUD_BIN=$(BIN) STARCLOUD_KUBE_CACHE=$(KUBE_CACHE) /usr/bin/python3 bench/k8s_bench.py

# Serving autoscaling: a 10x load step in 10 s against an autoscaled
# Deployment of real workers behind a real gateway (about two minutes).
bench-autoscale: build
	@/usr/bin/python3 bench/autoscale_bench.py --bin $(BIN)

# TLS against plain HTTP on the API server: keep-alive requests/s and new
# connections (handshakes)/s, same run (wrk); see docs/BENCHMARKS.md.
bench-tls: $(BIN)
	@STARCLOUD_BIN=$(BIN) bench/tls_bench.sh

# Gateway against nginx on the same backends (wrk); see docs/BENCHMARKS.md.
bench-gateway: build
	STARCLOUD_BIN=$(BIN) bench/gateway_bench.sh

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDFLAGS) $(LDLIBS)

# Fuzz targets for every parser (libFuzzer, clang), with ASan + UBSan.
FUZZ_BUILD := build-fuzz
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -fsanitize=fuzzer,address,undefined \
	$(shell pkg-config --cflags $(PKGS) 2>/dev/null)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o)

# -MMD: a header that changed (a rebase) rebuilds the objects that use it;
# a stale object with an older struct layout made a false crash once.
$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@clang $(subst fuzzer$(comma),fuzzer-no-link$(comma),$(FUZZ_CFLAGS)) -MMD -MP -c $< -o $@

# Targets that reach into a component name its objects here.
FUZZ_EXTRA_kv := $(FUZZ_BUILD)/src/worker/kvstore.o $(FUZZ_BUILD)/src/worker/model.o
FUZZ_EXTRA_hclient := $(FUZZ_BUILD)/src/net/hclient.o $(FUZZ_BUILD)/src/net/hclient_parse.o \
	$(FUZZ_BUILD)/src/net/hurl.o $(FUZZ_BUILD)/src/net/tls.o
FUZZ_EXTRA_jsonpath := $(FUZZ_BUILD)/src/cli/jsonpath.o
.SECONDEXPANSION:
$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c $(FUZZ_LIB_OBJ) $$(FUZZ_EXTRA_$$*)
	clang $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_EXTRA_$*) $(FUZZ_LIB_OBJ) $(LDLIBS)

comma := ,
.SECONDARY: $(FUZZ_LIB_OBJ) $(FUZZ_EXTRA_kv) $(FUZZ_EXTRA_hclient) $(FUZZ_EXTRA_jsonpath)
FUZZ_TARGETS := manifest trace httphead flags jscan kv hclient pbtxt jsonpath
fuzz: deps $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

test-fuzz: fuzz
	@fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_RUNS)

# Installation (docs/DEPLOY.md): PREFIX, DESTDIR, SYSCONFDIR, UNITDIR, as
# scripts/install.sh describes; `make package` builds the Debian package
# with dpkg-buildpackage into $(BUILD)/package/ (scripts/package.sh).
install-files: $(BIN) $(BUILD)/gen/docs.stamp
# Man pages and completion from the binary's flag tables (scripts/gen-docs.sh).
$(BUILD)/gen/docs.stamp: $(BIN) scripts/gen-docs.sh
	@rm -rf $(BUILD)/gen/man $(BUILD)/gen/completion
	@scripts/gen-docs.sh $(BIN) $(BUILD)/gen && touch $@
install: install-files
	@BIN=$(BIN) GEN=$(BUILD)/gen PREFIX="$(PREFIX)" SYSCONFDIR="$(SYSCONFDIR)" \
	 UNITDIR="$(UNITDIR)" SYSUSERSDIR="$(SYSUSERSDIR)" DESTDIR="$(DESTDIR)" scripts/install.sh
package:
	@scripts/package.sh $(BUILD)/package
# make install's layout, the units (systemd-analyze), the package in a fresh
# Debian 12 root booted with its own systemd (tests/install, root only).
test-install: $(BIN)
	@$(MAKE) --no-print-directory package
	@STARCLOUD_BIN=$(BIN) STARCLOUD_DEB=$$(ls $(BUILD)/package/starcloud_*.deb) \
	 /usr/bin/python3 -m pytest -q tests/install

# Every C file of the tree, as `make check-src` checks it.
C_FILES = $(shell find src include tests/unit tests/e2e bench fuzz -name '*.[ch]' 2>/dev/null)

format:
	clang-format -i $(C_FILES)

# clang-format in check mode, banned functions, unused exported functions
# (scripts/check-src.py says why each rule exists).
check-src:
	@/usr/bin/python3 scripts/check-src.py

clean:
	rm -rf build build-san build-fuzz build-dev

-include $(shell find $(BUILD) $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
