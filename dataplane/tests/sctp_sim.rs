//! The association engine between two endpoints over a seeded, hostile simulated network.
//!
//! `many_seeds_over_a_hostile_network` runs thousands of seeds; a failure prints the seed and
//! the command that replays it alone:
//! `SIM_SEED=<seed> cargo test -p ddpdk-dataplane --test sctp_sim -- one_seed --nocapture`.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

mod sim;

use std::collections::HashSet;
use std::time::Duration;

use ddpdk_dataplane::sctp::{max_message, CloseReason, Config, Event, State, Stats};
use sim::{check_message, make_message, NetConfig, Rng, Sim};

/// Values that make a simulation finish: retransmission limits high enough that 30 % loss in
/// both directions cannot exhaust them by bad luck (0.51^31 per stall), so that a failed run
/// is a bug, not chance. `one_path_cut_fails_the_association` checks the limits themselves.
fn sim_config(mtu: usize, rng: &mut Rng) -> Config {
    Config {
        path_mtu: mtu,
        streams: 1 + rng.below(16) as u16,
        rto_initial: Duration::from_millis(200),
        rto_min: Duration::from_millis(50),
        rto_max: Duration::from_secs(2),
        assoc_max_retrans: 30,
        max_init_retransmits: 30,
        shutdown_guard: Duration::from_secs(120),
        send_slots: 8 + rng.below(120) as usize,
        hb_interval: Some(Duration::from_millis(500 + rng.below(3000))),
        ..Config::default()
    }
}

#[derive(Debug)]
#[allow(dead_code)] // printed by one_seed
struct Outcome {
    delivered_c2s: usize,
    delivered_s2c: usize,
    retransmits: u64,
    messages: usize,
    total: Stats,
}

/// One seeded run: handshake, messages both ways on random streams with random sizes, then a
/// graceful shutdown. Returns an error describing the first broken invariant.
fn run_seed(seed: u64) -> Result<Outcome, String> {
    let mut rng = Rng::new(seed);
    let net = NetConfig::hostile(&mut rng);
    let ccfg = sim_config(net.mtu, &mut rng);
    let scfg = sim_config(net.mtu, &mut rng);
    let mut sim = Sim::new(net, ccfg, scfg, &mut rng);
    let streams = ccfg.streams.min(scfg.streams);
    let max = max_message(net.mtu);
    let n_c2s = 1 + rng.below(60) as u32;
    let n_s2c = rng.below(30) as u32;
    let mut sent_c2s = Vec::new();
    for i in 0..n_c2s {
        let len = 8 + rng.below((max - 8) as u64 + 1) as usize;
        let stream = rng.below(u64::from(streams)) as u16;
        let ppid = 16 + (i % 2);
        sim.client
            .outbox
            .push_back((stream, ppid, make_message(i, len)));
        sent_c2s.push((stream, ppid));
    }
    let mut sent_s2c = Vec::new();
    for i in 0..n_s2c {
        let len = 8 + rng.below((max - 8) as u64 + 1) as usize;
        let stream = rng.below(u64::from(streams)) as u16;
        sim.server
            .outbox
            .push_back((stream, 17, make_message(i, len)));
        sent_s2c.push((stream, 17));
    }
    sim.connect();
    let limit = sim.now + Duration::from_secs(3600);
    let mut shut = false;
    let done = sim.run_until(limit, |s| {
        // The client closes once it has everything from the server and its own messages are
        // all acknowledged.
        if !shut && s.client.received.len() == n_s2c as usize && s.client.outbox.is_empty() {
            if let Some(a) = s.client.assoc.as_mut() {
                if a.state() == State::Established && a.queued() == 0 {
                    a.shutdown(s.now);
                    shut = true;
                }
            }
        }
    });
    if !done {
        return Err(format!(
            "did not finish within an hour of virtual time: client {:?} server {:?}, \
             delivered c2s {}/{} s2c {}/{}",
            sim.client.assoc.as_ref().map(|a| a.state()),
            sim.server.assoc.as_ref().map(|a| a.state()),
            sim.server.received.len(),
            n_c2s,
            sim.client.received.len(),
            n_s2c
        ));
    }
    // Every message exactly once, intact, with its stream and PPID.
    for (dir, received, sent) in [
        ("c2s", &sim.server.received, &sent_c2s),
        ("s2c", &sim.client.received, &sent_s2c),
    ] {
        let mut seen = HashSet::new();
        for m in received {
            let i = check_message(&m.data).ok_or_else(|| format!("{dir}: corrupt message"))?;
            if !seen.insert(i) {
                return Err(format!("{dir}: message {i} delivered twice"));
            }
            let (stream, ppid) = sent[i as usize];
            if (m.stream, m.ppid) != (stream, ppid) {
                return Err(format!("{dir}: message {i} on the wrong stream or PPID"));
            }
        }
        if seen.len() != sent.len() {
            return Err(format!("{dir}: {} of {} delivered", seen.len(), sent.len()));
        }
    }
    // Both ends closed, each exactly once: gracefully, except for one legal race. Once the
    // client has sent SHUTDOWN COMPLETE its association is gone, so a late packet from the
    // server (a reordered SACK) is out of the blue and is answered with ABORT (RFC 9260 §8.4
    // rule 8); if the SHUTDOWN COMPLETE is lost or overtaken, that ABORT ends the server's
    // association in SHUTDOWN-ACK-SENT, after everything was delivered.
    for p in [&sim.client, &sim.server] {
        let closes: Vec<_> = p
            .events
            .iter()
            .filter(|e| matches!(e, Event::Closed(_)))
            .collect();
        let shutdown_race = p.name == "server"
            && p.events.contains(&Event::ShutdownReceived)
            && closes == [&Event::Closed(CloseReason::PeerAbort { cause: None })];
        if closes != [&Event::Closed(CloseReason::Shutdown)] && !shutdown_race {
            return Err(format!("{}: ended with {:?}", p.name, p.events));
        }
        if p.assoc.is_some() {
            return Err(format!("{}: association still alive", p.name));
        }
    }
    if sim.net.stats.too_big != 0 {
        return Err(format!(
            "{} packets exceeded the path MTU",
            sim.net.stats.too_big
        ));
    }
    // Retransmissions bounded: every retransmission answers a lost, corrupted or late packet;
    // allow four per message plus slack for the handshake and shutdown.
    let stats: Vec<_> = sim
        .client
        .stats()
        .into_iter()
        .chain(sim.server.stats())
        .collect();
    let retransmits: u64 = stats
        .iter()
        .map(|s| s.t3_retransmits + s.fast_retransmits)
        .sum();
    let messages = (n_c2s + n_s2c) as usize;
    let bound = 4 * messages as u64 + 4 * (sim.net.stats.lost + sim.net.stats.corrupted) + 20;
    if retransmits > bound {
        return Err(format!(
            "{retransmits} retransmissions for {messages} messages"
        ));
    }
    let mut total = Stats::default();
    for s in &stats {
        total.fast_retransmits += s.fast_retransmits;
        total.t3_retransmits += s.t3_retransmits;
        total.bad_checksum += s.bad_checksum;
        total.dup_tsns += s.dup_tsns;
        total.heartbeats_out += s.heartbeats_out;
        total.sacks_out += s.sacks_out;
    }
    Ok(Outcome {
        delivered_c2s: sim.server.received.len(),
        delivered_s2c: sim.client.received.len(),
        retransmits,
        messages,
        total,
    })
}

#[test]
fn many_seeds_over_a_hostile_network() {
    let n: u64 = std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let mut failures = Vec::new();
    let mut delivered = 0;
    let mut total = Stats::default();
    for seed in 0..n {
        match run_seed(seed) {
            Ok(o) => {
                delivered += o.delivered_c2s + o.delivered_s2c;
                total.fast_retransmits += o.total.fast_retransmits;
                total.t3_retransmits += o.total.t3_retransmits;
                total.bad_checksum += o.total.bad_checksum;
                total.dup_tsns += o.total.dup_tsns;
                total.heartbeats_out += o.total.heartbeats_out;
            }
            Err(e) => failures.push((seed, e)),
        }
    }
    if !failures.is_empty() {
        for (seed, e) in failures.iter().take(10) {
            eprintln!("seed {seed}: {e}");
        }
        panic!(
            "{} of {n} seeds failed; replay one with SIM_SEED=<seed> cargo test -p \
             ddpdk-dataplane --test sctp_sim -- one_seed --nocapture",
            failures.len()
        );
    }
    assert!(delivered > n as usize, "the runs moved messages");
    // The network really was hostile, and each recovery path really ran.
    eprintln!("{n} seeds: {delivered} messages, {total:?}");
    if n >= 100 {
        assert!(
            total.fast_retransmits > 0,
            "fast retransmit (§7.2.4) never ran"
        );
        assert!(total.t3_retransmits > 0, "T3-rtx (§6.3.3) never ran");
        assert!(
            total.bad_checksum > 0,
            "no corrupted packet was caught by CRC32c"
        );
        assert!(total.dup_tsns > 0, "no duplicate TSN was seen");
        assert!(
            total.heartbeats_out > 0,
            "no HEARTBEAT on an idle path (§8.3)"
        );
    }
}

/// Replays `SIM_SEED` (default 0) alone.
#[test]
fn one_seed() {
    let seed = std::env::var("SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let o = run_seed(seed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    eprintln!("seed {seed}: {o:?}");
}
