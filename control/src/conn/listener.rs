//! Making connections: actively, or from a peer's COOKIE ECHO, all sharing one
//! pending-Initiate limit (RFC 5043 §6.4).

use std::net::IpAddr;

use ddpdk_dataplane::net::Interface;
use ddpdk_dataplane::sctp::{Association, Endpoint, Instant, Message as SctpMessage, Outcome};

use crate::memory::Place;
use crate::session::PendingLimit;

use super::api::*;
use super::*;

/// The DDP side of an SCTP endpoint: makes [`Connection`]s, actively ([`Listener::connect`])
/// or from a peer's COOKIE ECHO ([`Listener::handle`]), all sharing one pending-Initiate
/// limit (RFC 5043 §6.4).
#[derive(Debug)]
pub struct Listener {
    pub(super) endpoint: Endpoint,
    pub(super) cfg: ConnConfig,
    pub(super) limit: PendingLimit,
    pub(super) early: Vec<(u16, u32, u32, Vec<u8>)>,
    /// The link new associations run on ([`Listener::set_link`]); `None`: the endpoint's
    /// configured path MTU, whatever the peer's family.
    link: Option<Link>,
}

/// A link's MTU and the headroom this end keeps in each packet for ESP.
#[derive(Debug, Clone, Copy)]
struct Link {
    mtu: usize,
    esp_headroom: usize,
}

/// What [`Listener::handle`] made of a packet that matched no connection.
#[derive(Debug)]
pub enum Accept {
    /// Nothing to send (the endpoint counts why).
    Ignored,
    /// A reply of this many bytes is in the output buffer, to the packet's source.
    Reply(usize),
    /// A new connection; it holds its COOKIE ACK to send.
    Connection(Box<Connection>),
}

impl Listener {
    /// The sizes every connection it makes is given.
    pub fn config(&self) -> ConnConfig {
        self.cfg
    }

    pub fn new(endpoint: Endpoint, cfg: ConnConfig, limit: PendingLimit) -> Listener {
        Listener {
            endpoint,
            cfg,
            limit,
            early: Vec::new(),
            link: None,
        }
    }

    /// New associations run on a link of `mtu` bytes, with `esp_headroom` bytes of each packet
    /// kept for ESP: each one's path MTU is the link's less the IP header of its peer's family
    /// and the headroom, which the receive side takes back (a peer that adds less ESP, or none,
    /// sends segments that large unfragmented). Set before the association exists, so that the
    /// MULPDU its ULP is told (RFC 5043 §9) and the limit the first segments meet (a COOKIE
    /// ECHO's bundled Initiate) are the path's.
    pub fn set_link(&mut self, mtu: usize, esp_headroom: usize) {
        self.link = Some(Link { mtu, esp_headroom });
    }

    /// `assoc` with its path MTU, in a connection with its receive slack.
    fn connection(&self, mut assoc: Association, peer: IpAddr) -> Connection {
        if let Some(link) = self.link {
            // RFC 8899 §5.1.2: the link's size is also the largest PLPMTUD probes.
            assoc.set_link_mtu(link.mtu - Interface::ip_header_len(peer) - link.esp_headroom);
            if peer.is_ipv6() && link.esp_headroom > 0 {
                // RFC 8899 §5.1.2 with RFC 8200 §5: BASE_PLPMTU sealed must still cross a
                // 1280-byte IPv6 hop, which any path may have; an IPsec port sends no source
                // fragments (a black hole down to a size no silent hop passes never ends).
                assoc.set_plpmtud_base(
                    ddpdk_dataplane::net::IPV6_MIN_MTU
                        .saturating_sub(Interface::ip_header_len(peer) + link.esp_headroom),
                );
            }
        }
        let mut c = Connection::new(assoc, self.cfg, self.limit.clone());
        if let Some(link) = self.link {
            c.set_receive_slack(link.esp_headroom);
        }
        c
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The pending-Initiate limit its connections share (RFC 5043 §6.4).
    pub fn pending_limit(&self) -> &PendingLimit {
        &self.limit
    }

    /// The endpoint, to change its settings ([`Endpoint::set_config`]).
    pub fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }

    /// Starts an association to `peer`.
    pub fn connect(&mut self, now: Instant, peer: IpAddr, port: u16) -> Connection {
        let assoc = self.endpoint.connect(now, peer, port);
        self.connection(assoc, peer)
    }

    /// A packet from `peer` that matched no connection. DDP chunks bundled with a COOKIE ECHO
    /// (an Initiate sent from COOKIE-WAIT) reach the new connection's sessions.
    pub fn handle<'m>(
        &mut self,
        now: Instant,
        peer: IpAddr,
        packet: &[u8],
        out: &mut [u8],
        place: impl Into<Place<'m>>,
    ) -> Accept {
        let memory = place.into();
        // A reply fits one packet of the path the association would have (the link's, less
        // the IP header of the peer's family and the ESP headroom, as `connection` sets it):
        // the endpoint's Config has one path MTU for both families, and an INIT ACK leaves out
        // the Unrecognized Parameter reports that do not fit its buffer (RFC 9260 §6.10).
        let room = self.link.map_or(out.len(), |l| {
            l.mtu
                .saturating_sub(Interface::ip_header_len(peer) + l.esp_headroom)
                .min(out.len())
        });
        let out = &mut out[..room];
        let early = &mut self.early;
        early.clear();
        let outcome = self
            .endpoint
            .handle(now, peer, packet, out, &mut |m: SctpMessage<'_>| {
                early.push((m.stream, m.ppid, m.tsn, m.data.to_vec()))
            });
        match outcome {
            Outcome::Ignored(_) => Accept::Ignored,
            Outcome::Reply(n) => Accept::Reply(n),
            Outcome::Accepted(assoc) => {
                let mut c = self.connection(*assoc, peer);
                for (stream, ppid, tsn, data) in self.early.drain(..) {
                    c.route_one(stream, ppid, tsn, &data, memory);
                }
                Accept::Connection(Box::new(c))
            }
        }
    }
}
