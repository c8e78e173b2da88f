# The two commands of the README's quick start: `make run` and `make test`. Each runs the host
# set-up first (idempotent: it installs only what is missing).
SHELL := /bin/bash
CARGO ?= cargo
RUN_SECS ?= 5
DDPDK := target/release/ddpdk

.PHONY: run test setup build lint bench clean

setup:
	@bash deploy/setup.sh

build: setup
	$(CARGO) build --release --bin ddpdk

# The embedded default: two net_ring ports wired back to back, io forwarding seeded with one
# burst, statistics every second, then a clean stop with forwarding statistics.
run: build
	$(DDPDK) $$(deploy/eal-args.sh 0-1 512 ddpdk-run) -- --ring-pair --tx-first -a \
		--run-for $(RUN_SECS) --stats-period 1

# Unit, DPDK and end-to-end tests; ends with one line totalling every test binary's results.
test: setup
	@mkdir -p target
	set -o pipefail; $(CARGO) test --workspace --all-targets 2>&1 | tee target/test-output.txt
	@awk '/^test result:/ {p += $$4; f += $$6} END {printf "tests: %d passed, %d failed\n", p, f}' target/test-output.txt

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Raw-I/O rate next to dpdk-testpmd over net_memif (see benches/README.md).
bench: setup
	$(CARGO) build --release --bin ddpdk -p ddpdk-cli
	$(CARGO) run --release -p ddpdk-benches --bin raw-io-bench -- --ddpdk $(DDPDK)

clean:
	$(CARGO) clean
