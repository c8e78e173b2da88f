//! `rte_flow` rules that steer one SCTP association to one RX queue (issue 6 item 3): for
//! devices that match SCTP ports in flow rules but cannot hash SCTP for RSS, so each
//! association's packets still arrive at the queue of the core that owns it.
//!
//! The rule is `eth / ipv4|ipv6 src is PEER dst is LOCAL / sctp src is PPORT dst is LPORT /
//! end actions queue index Q / end`, ingress, group 0, priority 0.

use std::ffi::CStr;
use std::net::IpAddr;

use dpdk_sys as sys;

use crate::port::SctpFlow;

/// The specs and masks of one rule's pattern, kept alive while DPDK reads them.
struct Pattern {
    v4: [sys::rte_flow_item_ipv4; 2],
    v6: [sys::rte_flow_item_ipv6; 2],
    sctp: [sys::rte_flow_item_sctp; 2],
    queue: sys::rte_flow_action_queue,
}

impl Pattern {
    fn new(flow: &SctpFlow, queue: u16) -> Pattern {
        let mut p = Pattern {
            v4: [sys::rte_flow_item_ipv4::default(); 2],
            v6: [sys::rte_flow_item_ipv6::default(); 2],
            sctp: [sys::rte_flow_item_sctp::default(); 2],
            queue: sys::rte_flow_action_queue { index: queue },
        };
        match (flow.peer, flow.local) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                // Big-endian in memory, as on the wire: the octets in order.
                p.v4[0].hdr.src_addr = u32::from_ne_bytes(src.octets());
                p.v4[0].hdr.dst_addr = u32::from_ne_bytes(dst.octets());
                p.v4[1].hdr.src_addr = u32::MAX;
                p.v4[1].hdr.dst_addr = u32::MAX;
            }
            (src, dst) => {
                let v6 = |a: IpAddr| match a {
                    IpAddr::V6(a) => a.octets(),
                    IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
                };
                p.v6[0].hdr.src_addr = v6(src);
                p.v6[0].hdr.dst_addr = v6(dst);
                p.v6[1].hdr.src_addr = [0xff; 16];
                p.v6[1].hdr.dst_addr = [0xff; 16];
            }
        }
        p.sctp[0].hdr.src_port = u16::from_ne_bytes(flow.peer_port.to_be_bytes());
        p.sctp[0].hdr.dst_port = u16::from_ne_bytes(flow.local_port.to_be_bytes());
        p.sctp[1].hdr.src_port = u16::MAX;
        p.sctp[1].hdr.dst_port = u16::MAX;
        p
    }

    /// The item list; it points into `self`, which must outlive its use.
    fn items(&self, v4: bool) -> [sys::rte_flow_item; 4] {
        let none = core::ptr::null();
        let ip = ip_item(v4, &self.v4, &self.v6);
        [
            item(sys::RTE_FLOW_ITEM_TYPE_ETH, none, none),
            ip,
            item(
                sys::RTE_FLOW_ITEM_TYPE_SCTP,
                (&self.sctp[0] as *const sys::rte_flow_item_sctp).cast(),
                (&self.sctp[1] as *const sys::rte_flow_item_sctp).cast(),
            ),
            item(sys::RTE_FLOW_ITEM_TYPE_END, none, none),
        ]
    }

    fn actions(&self) -> [sys::rte_flow_action; 2] {
        [
            sys::rte_flow_action {
                type_: sys::RTE_FLOW_ACTION_TYPE_QUEUE,
                conf: (&self.queue as *const sys::rte_flow_action_queue).cast(),
            },
            sys::rte_flow_action {
                type_: sys::RTE_FLOW_ACTION_TYPE_END,
                conf: core::ptr::null(),
            },
        ]
    }
}

/// A pattern item of type `t` with `spec` and `mask` (no range).
fn item(
    t: sys::rte_flow_item_type,
    spec: *const core::ffi::c_void,
    mask: *const core::ffi::c_void,
) -> sys::rte_flow_item {
    sys::rte_flow_item {
        type_: t,
        spec,
        last: core::ptr::null(),
        mask,
    }
}

/// The IPv4 (`v4`) or IPv6 item over a spec and mask pair; it points into them.
fn ip_item(
    v4: bool,
    ipv4: &[sys::rte_flow_item_ipv4; 2],
    ipv6: &[sys::rte_flow_item_ipv6; 2],
) -> sys::rte_flow_item {
    if v4 {
        item(
            sys::RTE_FLOW_ITEM_TYPE_IPV4,
            (&ipv4[0] as *const sys::rte_flow_item_ipv4).cast(),
            (&ipv4[1] as *const sys::rte_flow_item_ipv4).cast(),
        )
    } else {
        item(
            sys::RTE_FLOW_ITEM_TYPE_IPV6,
            (&ipv6[0] as *const sys::rte_flow_item_ipv6).cast(),
            (&ipv6[1] as *const sys::rte_flow_item_ipv6).cast(),
        )
    }
}

fn attr() -> sys::rte_flow_attr {
    let mut a = sys::rte_flow_attr::default();
    a.set_ingress(1);
    a
}

/// The device's reason from an `rte_flow_error`, or the errno's; when the error names one of
/// `items`, which (0 ETH, 1 IP, 2 SCTP).
fn reason(e: &sys::rte_flow_error, rc: i32, items: &[sys::rte_flow_item]) -> String {
    // SAFETY: DPDK sets `message` to null or to a NUL-terminated static string.
    let msg = unsafe { e.message.as_ref().map(|m| CStr::from_ptr(m)) };
    let text = match msg {
        Some(m) => m.to_string_lossy().into_owned(),
        None => super::DpdkError::new("rte_flow", rc).to_string(),
    };
    let item = (e.type_ == sys::RTE_FLOW_ERROR_TYPE_ITEM)
        .then(|| items.iter().position(|i| core::ptr::eq(i, e.cause.cast())))
        .flatten();
    match item {
        Some(k) => format!("{text} (pattern item {k})"),
        None => text,
    }
}

/// A packet's two addresses are of one family; a rule mixing them would match nothing we send
/// (and the IPv4 item would be left empty, a wildcard).
fn same_family(flow: &SctpFlow) -> Result<(), String> {
    if flow.peer.is_ipv4() == flow.local.is_ipv4() {
        Ok(())
    } else {
        Err(format!(
            "{} and {} are of different address families",
            flow.peer, flow.local
        ))
    }
}

/// Whether `port` would accept the rule for `flow` to `queue` (`rte_flow_validate`).
pub(crate) fn validate(port: u16, flow: &SctpFlow, queue: u16) -> Result<(), String> {
    same_family(flow)?;
    let p = Pattern::new(flow, queue);
    let (items, actions) = (p.items(flow.peer.is_ipv4()), p.actions());
    let mut err = sys::rte_flow_error::default();
    // SAFETY: attr, items and actions are valid, END-terminated and point into `p`, which
    // lives across the call; DPDK only reads them and writes `err`.
    let rc = unsafe {
        sys::rte_flow_validate(port, &attr(), items.as_ptr(), actions.as_ptr(), &mut err)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(reason(&err, rc, &items))
    }
}

/// Installs the rule for `flow` to `queue` (`rte_flow_create`); the handle as an address.
pub(crate) fn create(port: u16, flow: &SctpFlow, queue: u16) -> Result<usize, String> {
    same_family(flow)?;
    let p = Pattern::new(flow, queue);
    let (items, actions) = (p.items(flow.peer.is_ipv4()), p.actions());
    // SAFETY: END-terminated lists pointing into `p`, which lives across the call.
    unsafe { install(port, &items, &actions) }
}

/// `rte_flow_create` of `items` and `actions` on `port`, ingress; the handle as an address.
///
/// # Safety
/// Both lists are END-terminated, and every spec, mask and action configuration they point
/// at is valid and lives across the call.
unsafe fn install(
    port: u16,
    items: &[sys::rte_flow_item],
    actions: &[sys::rte_flow_action],
) -> Result<usize, String> {
    let mut err = sys::rte_flow_error::default();
    // SAFETY: the caller's promise for items and actions; attr and err are ours. The device
    // copies what it needs of them and writes `err`.
    let rule =
        unsafe { sys::rte_flow_create(port, &attr(), items.as_ptr(), actions.as_ptr(), &mut err) };
    if rule.is_null() {
        Err(reason(&err, dpdk_sys::rte_errno(), items))
    } else {
        Ok(rule as usize)
    }
}

/// The specs and masks of an ESP ingress rule's pattern and its SECURITY action's session,
/// kept alive while DPDK reads them.
struct EspPattern {
    v4: [sys::rte_flow_item_ipv4; 2],
    v6: [sys::rte_flow_item_ipv6; 2],
    esp: [sys::rte_flow_item_esp; 2],
    security: sys::rte_flow_action_security,
}

/// Installs `eth / ipv4|ipv6 dst is LOCAL [src is PEER] / esp spi is SPI / end actions
/// security SESSION / end`, ingress: the rule through which ixgbe and txgbe install an inbound
/// SA in their NIC (they read the IP item's addresses and take the SPI from the session;
/// ipsec-secgw's pattern, whose ESP item other NICs match on). The action list is SECURITY
/// alone: ixgbe refuses any action after it.
pub(crate) fn create_esp(
    port: u16,
    esp: &crate::port::EspIngress,
    session: std::ptr::NonNull<core::ffi::c_void>,
) -> Result<usize, String> {
    if esp.peer.is_some_and(|p| p.is_ipv4() != esp.local.is_ipv4()) {
        return Err(format!(
            "{} and {:?} are of different address families",
            esp.local, esp.peer
        ));
    }
    let mut p = EspPattern {
        v4: [sys::rte_flow_item_ipv4::default(); 2],
        v6: [sys::rte_flow_item_ipv6::default(); 2],
        esp: [sys::rte_flow_item_esp::default(); 2],
        security: sys::rte_flow_action_security {
            security_session: session.as_ptr(),
        },
    };
    match esp.local {
        IpAddr::V4(dst) => {
            // Big-endian in memory, as on the wire: the octets in order.
            p.v4[0].hdr.dst_addr = u32::from_ne_bytes(dst.octets());
            p.v4[1].hdr.dst_addr = u32::MAX;
            if let Some(IpAddr::V4(src)) = esp.peer {
                p.v4[0].hdr.src_addr = u32::from_ne_bytes(src.octets());
                p.v4[1].hdr.src_addr = u32::MAX;
            }
        }
        IpAddr::V6(dst) => {
            p.v6[0].hdr.dst_addr = dst.octets();
            p.v6[1].hdr.dst_addr = [0xff; 16];
            if let Some(IpAddr::V6(src)) = esp.peer {
                p.v6[0].hdr.src_addr = src.octets();
                p.v6[1].hdr.src_addr = [0xff; 16];
            }
        }
    }
    p.esp[0].hdr.spi = u32::from_ne_bytes(esp.spi.to_be_bytes());
    p.esp[1].hdr.spi = u32::MAX;
    let none = core::ptr::null();
    let ip = ip_item(esp.local.is_ipv4(), &p.v4, &p.v6);
    let items = [
        item(sys::RTE_FLOW_ITEM_TYPE_ETH, none, none),
        ip,
        item(
            sys::RTE_FLOW_ITEM_TYPE_ESP,
            (&p.esp[0] as *const sys::rte_flow_item_esp).cast(),
            (&p.esp[1] as *const sys::rte_flow_item_esp).cast(),
        ),
        item(sys::RTE_FLOW_ITEM_TYPE_END, none, none),
    ];
    let actions = [
        sys::rte_flow_action {
            type_: sys::RTE_FLOW_ACTION_TYPE_SECURITY,
            conf: (&p.security as *const sys::rte_flow_action_security).cast(),
        },
        sys::rte_flow_action {
            type_: sys::RTE_FLOW_ACTION_TYPE_END,
            conf: core::ptr::null(),
        },
    ];
    // SAFETY: END-terminated lists pointing into `p`, which lives across the call; the
    // session is the caller's, live on this port's context.
    unsafe { install(port, &items, &actions) }
}

/// Removes a rule `create` or `create_esp` installed on `port`.
pub(crate) fn destroy(port: u16, rule: usize) -> Result<(), String> {
    let mut err = sys::rte_flow_error::default();
    // SAFETY: `rule` came from rte_flow_create on this port and is destroyed once (the
    // FlowRule that carried it was consumed).
    let rc = unsafe { sys::rte_flow_destroy(port, rule as *mut sys::rte_flow, &mut err) };
    if rc == 0 {
        Ok(())
    } else {
        Err(reason(&err, rc, &[]))
    }
}
