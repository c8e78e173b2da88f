//! The forwarding table: which lcore polls which (port, RX queue) and transmits on which
//! (port, TX queue). It is data, validated as a whole before any port starts or lcore launches.

use std::collections::BTreeMap;
use std::fmt;

/// Queue counts of one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortQueues {
    pub nb_rxq: u16,
    pub nb_txq: u16,
}

/// What the table is checked against: the configured ports (indexed by port id) and the lcores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub ports: BTreeMap<u16, PortQueues>,
    /// Enabled lcores, the main one included.
    pub lcores: Vec<u32>,
    pub main_lcore: u32,
}

impl Topology {
    /// Enabled lcores other than the main one, in id order.
    pub fn worker_lcores(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .lcores
            .iter()
            .copied()
            .filter(|&l| l != self.main_lcore)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// One forwarding stream: an lcore receives on (rx_port, rx_queue) and transmits on
/// (tx_port, tx_queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FwdStream {
    pub lcore: u32,
    pub rx_port: u16,
    pub rx_queue: u16,
    pub tx_port: u16,
    pub tx_queue: u16,
}

/// Why a forwarding table was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    NoStreams,
    NoSuchPort {
        port: u16,
    },
    RxQueueOutOfRange {
        port: u16,
        queue: u16,
        nb_rxq: u16,
    },
    TxQueueOutOfRange {
        port: u16,
        queue: u16,
        nb_txq: u16,
    },
    LcoreNotEnabled {
        lcore: u32,
    },
    LcoreIsMain {
        lcore: u32,
    },
    RxQueueShared {
        port: u16,
        queue: u16,
        lcores: (u32, u32),
    },
    TxQueueShared {
        port: u16,
        queue: u16,
        lcores: (u32, u32),
    },
    LcoreTxQueues {
        lcore: u32,
        port: u16,
        queues: (u16, u16),
    },
    NoWorkerLcores,
    NotEnoughTxQueues {
        port: u16,
        nb_txq: u16,
        needed: u16,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ConfigError::*;
        match *self {
            NoStreams => write!(f, "the forwarding table is empty: no (port, queue) is polled by any lcore"),
            NoSuchPort { port } => write!(f, "port {port} does not exist or is not configured"),
            RxQueueOutOfRange { port, queue, nb_rxq } => {
                write!(f, "port {port} has RX queues 0..{nb_rxq}, queue {queue} is out of range")
            }
            TxQueueOutOfRange { port, queue, nb_txq } => {
                write!(f, "port {port} has TX queues 0..{nb_txq}, queue {queue} is out of range")
            }
            LcoreNotEnabled { lcore } => {
                write!(f, "lcore {lcore} is not enabled in the EAL (see -l / --lcores)")
            }
            LcoreIsMain { lcore } => write!(
                f,
                "lcore {lcore} is the main lcore, which runs the CLI and statistics; use a worker lcore"
            ),
            RxQueueShared { port, queue, lcores: (a, b) } => write!(
                f,
                "RX queue {queue} of port {port} is polled by lcores {a} and {b}; one lcore per queue"
            ),
            TxQueueShared { port, queue, lcores: (a, b) } => write!(
                f,
                "TX queue {queue} of port {port} is used by lcores {a} and {b}; one lcore per queue"
            ),
            LcoreTxQueues { lcore, port, queues: (a, b) } => write!(
                f,
                "lcore {lcore} transmits on port {port} through TX queues {a} and {b}; one TX queue per (lcore, port)"
            ),
            NoWorkerLcores => write!(
                f,
                "no worker lcore to forward on: give the EAL at least two lcores (e.g. -l 0-1)"
            ),
            NotEnoughTxQueues { port, nb_txq, needed } => write!(
                f,
                "port {port} has {nb_txq} TX queues but {needed} forwarding lcores transmit on it (use --txq {needed})"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A set of forwarding streams.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct FwdTable {
    pub streams: Vec<FwdStream>,
}

impl FwdTable {
    /// Checks every rule; the first violation is returned.
    ///
    /// Rules: ports exist and queue ids are in range; lcores are enabled workers; every RX queue
    /// is polled by one lcore; every lcore transmits on a port through exactly one TX queue, and
    /// that TX queue is nobody else's (DPDK burst functions are not thread-safe per queue).
    pub fn validate(&self, topo: &Topology) -> Result<(), ConfigError> {
        if self.streams.is_empty() {
            return Err(ConfigError::NoStreams);
        }
        let mut rx_owner: BTreeMap<(u16, u16), u32> = BTreeMap::new();
        let mut tx_owner: BTreeMap<(u16, u16), u32> = BTreeMap::new();
        let mut lcore_txq: BTreeMap<(u32, u16), u16> = BTreeMap::new();
        for s in &self.streams {
            let rx = topo
                .ports
                .get(&s.rx_port)
                .ok_or(ConfigError::NoSuchPort { port: s.rx_port })?;
            let tx = topo
                .ports
                .get(&s.tx_port)
                .ok_or(ConfigError::NoSuchPort { port: s.tx_port })?;
            if s.rx_queue >= rx.nb_rxq {
                return Err(ConfigError::RxQueueOutOfRange {
                    port: s.rx_port,
                    queue: s.rx_queue,
                    nb_rxq: rx.nb_rxq,
                });
            }
            if s.tx_queue >= tx.nb_txq {
                return Err(ConfigError::TxQueueOutOfRange {
                    port: s.tx_port,
                    queue: s.tx_queue,
                    nb_txq: tx.nb_txq,
                });
            }
            if !topo.lcores.contains(&s.lcore) {
                return Err(ConfigError::LcoreNotEnabled { lcore: s.lcore });
            }
            if s.lcore == topo.main_lcore {
                return Err(ConfigError::LcoreIsMain { lcore: s.lcore });
            }
            if let Some(&other) = rx_owner.get(&(s.rx_port, s.rx_queue)) {
                return Err(ConfigError::RxQueueShared {
                    port: s.rx_port,
                    queue: s.rx_queue,
                    lcores: (other, s.lcore),
                });
            }
            rx_owner.insert((s.rx_port, s.rx_queue), s.lcore);
            match lcore_txq.get(&(s.lcore, s.tx_port)) {
                Some(&q) if q != s.tx_queue => {
                    return Err(ConfigError::LcoreTxQueues {
                        lcore: s.lcore,
                        port: s.tx_port,
                        queues: (q, s.tx_queue),
                    })
                }
                _ => {
                    lcore_txq.insert((s.lcore, s.tx_port), s.tx_queue);
                }
            }
            match tx_owner.get(&(s.tx_port, s.tx_queue)) {
                Some(&l) if l != s.lcore => {
                    return Err(ConfigError::TxQueueShared {
                        port: s.tx_port,
                        queue: s.tx_queue,
                        lcores: (l, s.lcore),
                    })
                }
                _ => {
                    tx_owner.insert((s.tx_port, s.tx_queue), s.lcore);
                }
            }
        }
        Ok(())
    }

    /// The streams of each lcore, by lcore id.
    pub fn by_lcore(&self) -> BTreeMap<u32, Vec<FwdStream>> {
        let mut m: BTreeMap<u32, Vec<FwdStream>> = BTreeMap::new();
        for s in &self.streams {
            m.entry(s.lcore).or_default().push(*s);
        }
        m
    }

    /// testpmd's default layout: ports paired 0↔1, 2↔3 ... (an odd last port forwards to
    /// itself); every RX queue of every port becomes a stream; streams are dealt round-robin to
    /// the first `nb_cores` worker lcores; the k-th forwarding lcore transmits on TX queue k.
    /// The result is validated.
    pub fn testpmd_default(topo: &Topology, nb_cores: usize) -> Result<FwdTable, ConfigError> {
        let workers = topo.worker_lcores();
        if workers.is_empty() || nb_cores == 0 {
            return Err(ConfigError::NoWorkerLcores);
        }
        let lcores = &workers[..nb_cores.min(workers.len())];
        let port_ids: Vec<u16> = topo.ports.keys().copied().collect();
        let peer = |i: usize| -> u16 {
            let j = if i.is_multiple_of(2) { i + 1 } else { i - 1 };
            port_ids.get(j).copied().unwrap_or(port_ids[i])
        };
        let mut streams = Vec::new();
        for (i, &p) in port_ids.iter().enumerate() {
            for q in 0..topo.ports[&p].nb_rxq {
                let k = streams.len() % lcores.len();
                streams.push(FwdStream {
                    lcore: lcores[k],
                    rx_port: p,
                    rx_queue: q,
                    tx_port: peer(i),
                    tx_queue: k as u16,
                });
            }
        }
        let used = lcores.len().min(streams.len()) as u16;
        for (&p, pq) in &topo.ports {
            if streams.iter().any(|s| s.tx_port == p) && pq.nb_txq < used {
                return Err(ConfigError::NotEnoughTxQueues {
                    port: p,
                    nb_txq: pq.nb_txq,
                    needed: used,
                });
            }
        }
        let t = FwdTable { streams };
        t.validate(topo)?;
        Ok(t)
    }
}

impl fmt::Display for FwdTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (lcore, streams) in self.by_lcore() {
            writeln!(
                f,
                "Logical Core {lcore} forwards packets on {} streams:",
                streams.len()
            )?;
            for s in streams {
                writeln!(
                    f,
                    "  RX P={}/Q={} -> TX P={}/Q={}",
                    s.rx_port, s.rx_queue, s.tx_port, s.tx_queue
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(ports: &[(u16, u16, u16)], lcores: &[u32]) -> Topology {
        Topology {
            ports: ports
                .iter()
                .map(|&(p, r, t)| {
                    (
                        p,
                        PortQueues {
                            nb_rxq: r,
                            nb_txq: t,
                        },
                    )
                })
                .collect(),
            lcores: lcores.to_vec(),
            main_lcore: lcores[0],
        }
    }

    fn s(lcore: u32, rx: (u16, u16), tx: (u16, u16)) -> FwdStream {
        FwdStream {
            lcore,
            rx_port: rx.0,
            rx_queue: rx.1,
            tx_port: tx.0,
            tx_queue: tx.1,
        }
    }

    fn check(streams: Vec<FwdStream>, t: &Topology) -> Result<(), ConfigError> {
        FwdTable { streams }.validate(t)
    }

    #[test]
    fn a_legal_two_core_table_passes() {
        let t = topo(&[(0, 2, 2), (1, 2, 2)], &[0, 1, 2]);
        let streams = vec![
            s(1, (0, 0), (1, 0)),
            s(1, (1, 0), (0, 0)),
            s(2, (0, 1), (1, 1)),
            s(2, (1, 1), (0, 1)),
        ];
        assert_eq!(check(streams, &t), Ok(()));
    }

    #[test]
    fn each_rule_is_enforced_with_its_own_error() {
        let t = topo(&[(0, 2, 2), (1, 1, 1)], &[0, 1, 2]);
        assert_eq!(check(vec![], &t), Err(ConfigError::NoStreams));
        assert_eq!(
            check(vec![s(1, (5, 0), (0, 0))], &t),
            Err(ConfigError::NoSuchPort { port: 5 })
        );
        assert_eq!(
            check(vec![s(1, (0, 0), (7, 0))], &t),
            Err(ConfigError::NoSuchPort { port: 7 })
        );
        assert_eq!(
            check(vec![s(1, (1, 1), (0, 0))], &t),
            Err(ConfigError::RxQueueOutOfRange {
                port: 1,
                queue: 1,
                nb_rxq: 1
            })
        );
        assert_eq!(
            check(vec![s(1, (0, 0), (1, 3))], &t),
            Err(ConfigError::TxQueueOutOfRange {
                port: 1,
                queue: 3,
                nb_txq: 1
            })
        );
        assert_eq!(
            check(vec![s(9, (0, 0), (0, 0))], &t),
            Err(ConfigError::LcoreNotEnabled { lcore: 9 })
        );
        assert_eq!(
            check(vec![s(0, (0, 0), (0, 0))], &t),
            Err(ConfigError::LcoreIsMain { lcore: 0 })
        );
        assert_eq!(
            check(vec![s(1, (0, 0), (0, 0)), s(2, (0, 0), (0, 1))], &t),
            Err(ConfigError::RxQueueShared {
                port: 0,
                queue: 0,
                lcores: (1, 2)
            })
        );
        assert_eq!(
            check(vec![s(1, (0, 0), (1, 0)), s(2, (0, 1), (1, 0))], &t),
            Err(ConfigError::TxQueueShared {
                port: 1,
                queue: 0,
                lcores: (1, 2)
            })
        );
        assert_eq!(
            check(vec![s(1, (0, 0), (0, 0)), s(1, (0, 1), (0, 1))], &t),
            Err(ConfigError::LcoreTxQueues {
                lcore: 1,
                port: 0,
                queues: (0, 1)
            })
        );
    }

    #[test]
    fn errors_read_as_one_clear_sentence() {
        let e = ConfigError::RxQueueShared {
            port: 0,
            queue: 1,
            lcores: (1, 2),
        };
        assert_eq!(
            e.to_string(),
            "RX queue 1 of port 0 is polled by lcores 1 and 2; one lcore per queue"
        );
        assert!(ConfigError::LcoreIsMain { lcore: 0 }
            .to_string()
            .contains("main lcore"));
    }

    #[test]
    fn testpmd_default_pairs_ports_and_deals_queues_round_robin() {
        let t = topo(&[(0, 2, 2), (1, 2, 2)], &[0, 1, 2]);
        let table = FwdTable::testpmd_default(&t, 2).expect("valid");
        assert_eq!(
            table.streams,
            vec![
                s(1, (0, 0), (1, 0)),
                s(2, (0, 1), (1, 1)),
                s(1, (1, 0), (0, 0)),
                s(2, (1, 1), (0, 1))
            ]
        );
        // A single port forwards to itself.
        let one = topo(&[(0, 1, 1)], &[0, 1]);
        assert_eq!(
            FwdTable::testpmd_default(&one, 1).expect("valid").streams,
            vec![s(1, (0, 0), (0, 0))]
        );
    }

    #[test]
    fn testpmd_default_refuses_what_cannot_work() {
        let t = topo(&[(0, 2, 1), (1, 2, 1)], &[0, 1, 2]);
        assert_eq!(
            FwdTable::testpmd_default(&t, 2),
            Err(ConfigError::NotEnoughTxQueues {
                port: 0,
                nb_txq: 1,
                needed: 2
            })
        );
        let main_only = topo(&[(0, 1, 1)], &[0]);
        assert_eq!(
            FwdTable::testpmd_default(&main_only, 1),
            Err(ConfigError::NoWorkerLcores)
        );
    }
}
