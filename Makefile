# The two commands of the README's quick start: `make run` and `make test`. Each runs the host
# set-up first (idempotent: it installs only what is missing).
SHELL := /bin/bash
CARGO ?= cargo
RUN_SECS ?= 5
# Where cargo builds it: under CARGO_TARGET_DIR when that is set (it was looked for in target/
# regardless, and `make run` failed with "No such file or directory" or ran a stale binary).
DDPDK := $(or $(CARGO_TARGET_DIR),target)/release/ddpdk

.PHONY: run run-fwd test setup build lint bench bench-goodput bench-sctp bench-ddp fuzz fuzz-ci soak attacks clean

setup:
	@bash deploy/setup.sh

build: setup
	$(CARGO) build --release --bin ddpdk

# The main job on the embedded default: two DDP/SCTP endpoints on two net_ring ports wired back
# to back (one process) set up an association and a DDP session, move tagged and untagged
# messages of several sizes with every placed byte verified, tear down, and print throughput
# and latency. DDP_BYTES is the payload per message size.
DDP_BYTES ?= 67108864
# RUN_ARGS: more of the loopback's options (`ddpdk loopback --help`), e.g. --data-cores 2.
RUN_ARGS ?=
run: build
	$(DDPDK) loopback $$(deploy/eal-args.sh 0-1 512 ddpdk-run private) -- --ddp-bytes $(DDP_BYTES) $(RUN_ARGS)

# The raw forwarding engines instead (the foundation's embedded default): io forwarding between
# the two net_ring ports seeded with one burst, statistics every second, then a clean stop.
run-fwd: build
	$(DDPDK) fwd $$(deploy/eal-args.sh 0-1 512 ddpdk-run private) -- --ring-pair --tx-first -a \
		--run-for $(RUN_SECS) --stats-period 1

# Unit, DPDK and end-to-end tests; ends with one line totalling every test binary's results.
test: setup
	@mkdir -p target
	set -o pipefail; $(CARGO) test --workspace --all-targets 2>&1 | tee target/test-output.txt
	@awk '/^test result:/ {p += $$4; f += $$6} END {printf "tests: %d passed, %d failed\n", p, f}' target/test-output.txt

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p ddpdk-dataplane --features trace -- -D warnings

# Raw-I/O rate next to dpdk-testpmd over net_memif (see benches/README.md).
bench: setup
	$(CARGO) build --release --bin ddpdk -p ddpdk-cli
	$(CARGO) run --release -p ddpdk-benches --bin raw-io-bench -- --ddpdk $(DDPDK)

# DDP tagged-write goodput between two ddpdk processes over net_memif, next to the raw
# txonly -> rxonly rate of the same link, as a ratio (see benches/README.md).
bench-goodput: setup
	$(CARGO) build --release --bin ddpdk -p ddpdk-cli
	$(CARGO) run --release -p ddpdk-benches --bin ddp-goodput-bench -- --ddpdk $(DDPDK)

# The SCTP engine next to usrsctp, in memory, same messages, same run (see benches/README.md).
bench-sctp: setup
	$(CARGO) run --release -p ddpdk-benches --bin sctp-bench -- $(SCTP_BENCH_ARGS)

# The DDP receive path next to memcpy into the same 1 GiB region (see benches/README.md).
bench-ddp: setup
	$(CARGO) run --release -p ddpdk-benches --bin ddp-rx-bench -- $(DDP_BENCH_ARGS)

# Coverage-guided fuzzing (cargo fuzz, libFuzzer; ASan on the parser targets), corpus seeded from
# the golden captures. RUSTC_BOOTSTRAP lets the machine's stable toolchain take the sanitizer
# flags cargo fuzz passes. FUZZ_TARGET=all runs every target for FUZZ_SECS each.
FUZZ_TARGET ?= all
FUZZ_SECS ?= 600
# Fuzzing (RELIABILITY.md): every target (or FUZZ_TARGET) for FUZZ_SECS each, from the corpus
# kept in dataplane/fuzz/corpus; the figures recorded and the corpus minimised. fuzz-ci: 30 s
# each, nothing recorded, a crash fails.
fuzz:
	bash dataplane/fuzz/run.sh --record --minimize $(FUZZ_SECS) $(filter-out all,$(FUZZ_TARGET))

fuzz-ci:
	bash dataplane/fuzz/run.sh 30

# The soak (issue 12 item 4, RELIABILITY.md): two endpoints over net_memif with every fault
# injected, checked traffic for SOAK_SECS, then a killed and a restarted peer. `make test` runs
# the same test for 20 s.
# Release code with its debug assertions on: the long run also checks what the suite checks
# in debug builds (a data core's skipped transmit opportunities owed nothing: control::quiet).
SOAK_SECS ?= 600
soak: setup
	CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true DDPDK_SOAK_SECS=$(SOAK_SECS) \
		$(CARGO) test --release -p ddpdk-cli --test soak -- --nocapture

# The attack matrix (issue 12 item 2, RELIABILITY.md): ddpdk-attack against a live perf
# server, each attack's answer and the server's counters printed. `make test` runs it with 10^5
# INITs; this with 10^6.
ATTACK_INITS ?= 1000000
attacks: setup
	DDPDK_ATTACK_INITS=$(ATTACK_INITS) $(CARGO) test --release -p ddpdk-cli --test attacks -- --nocapture

clean:
	$(CARGO) clean
