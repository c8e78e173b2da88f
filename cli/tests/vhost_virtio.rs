//! Two `ddpdk` processes over a vhost-user / virtio-user pair (`net_vhost` on the server,
//! `net_virtio_user` on the client: how a dataplane in a container meets one on its host),
//! without huge pages.
//!
//! virtio keeps receive buffers posted, and sent frames unreclaimed, until the port closes:
//! 512 mbufs a queue, some of them attached to the client's registered region (the zero-copy
//! sender). An endpoint that counted its pool and dropped its regions before closing the port
//! called a verified transfer a failure ("512 mbufs not back in their pool", status 1) and
//! leaked its region ("region dropped while 84 mbuf(s) reference it").

#[path = "common/procs.rs"]
mod procs;

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");

fn eal(lcores: &str, prefix: &str, vdev: String, extra: &[&str]) -> Vec<String> {
    let mut v = procs::vdev_eal(lcores, prefix, &vdev, 1024, false);
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

/// What a perf pair over vhost-user with `queues` queue pairs a side left: the client's
/// `ddp_goodput`, the server's `ddp_server`, and everything both printed. Both ended 0 and
/// every write was delivered; neither left a buffer out of its pool or a region referenced.
fn transfer(queues: u16, app: &[&str]) -> (serde_json::Value, serde_json::Value, String) {
    transfer_with(queues, app, ("0@0", &[]))
}

/// The same with the server's EAL on `lcores` and `extra` options of its own.
fn transfer_with(
    queues: u16,
    app: &[&str],
    (lcores, extra): (&str, &[&str]),
) -> (serde_json::Value, serde_json::Value, String) {
    // One pair at a time: two pairs would be four polling processes on this machine's CPUs.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-vhost-{pid}-{queues}"));
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("vhost.sock");
    let sock = sock.to_str().expect("utf-8");
    let mut server_app = vec![
        "--ddp-listen",
        "--ip",
        "198.18.0.2",
        "--json",
        "--run-for",
        "30",
    ];
    server_app.extend_from_slice(app);
    server_app.extend_from_slice(extra);
    let mut server = procs::spawn(
        BIN,
        &eal(
            lcores,
            &format!("ddpdk-vh-srv-{pid}-{queues}"),
            format!("net_vhost0,iface={sock},queues={queues}"),
            &[],
        ),
        &server_app,
    );
    // The vhost socket exists once the server is listening (its notes go to stderr under
    // --json).
    let (head, rest) =
        procs::read_until(server.stderr.take().expect("stderr"), "the server", |l| {
            l.contains("(listening)")
        });
    let mut client_app = vec![
        "--ddp-connect",
        "198.18.0.2",
        "--ip",
        "198.18.0.1",
        "--json",
        "--run-for",
        "2",
    ];
    client_app.extend_from_slice(app);
    // virtio-user shares its memory with the vhost side by file descriptor: one file.
    let client = procs::spawn(
        BIN,
        &eal(
            "0@1",
            &format!("ddpdk-vh-cli-{pid}-{queues}"),
            format!("net_virtio_user0,path={sock},queues={queues}"),
            &["--single-file-segments"],
        ),
        &client_app,
    );
    let c = client.wait_with_output().expect("the client");
    // The server ends when its association does (the client's SHUTDOWN).
    let s = server.wait_with_output().expect("the server");
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let (ct, st) = (
        text(&c),
        text(&s) + &head + &rest.join().unwrap_or_default(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    let (goodput, done) = procs::every_write_delivered(&c, &ct, &s, &st, 100);
    for (who, t) in [("client", &ct), ("server", &st)] {
        assert!(!t.contains("not back in their pool"), "{who}:\n{t}");
        assert!(!t.contains("region dropped while"), "{who}:\n{t}");
    }
    (goodput, done, ct + &st)
}

/// A zero-copy perf transfer from the virtio-user client into the vhost server's region, two
/// queue pairs a side (one for the data core, one for the control thread): the server's region
/// holds what the client wrote (the same CRC32c), payload left by reference from the client's
/// region, and every mbuf and region comes back once the ports are closed.
#[test]
fn a_transfer_over_vhost_user_ends_with_every_buffer_back() {
    let (goodput, done, _) = transfer(2, &[]);
    assert!(
        goodput["spans_by_reference"].as_u64() > Some(0),
        "{goodput}"
    );
    assert_eq!(goodput["spans_copied"].as_u64(), Some(0), "{goodput}");
    let region = &done["regions"][0];
    assert_eq!(
        region["crc32c"], goodput["region_crc32c"],
        "the server's region holds what the client wrote: {region} / {goodput}"
    );
}

/// vhost-user and virtio-user open one queue pair unless told otherwise: an endpoint's control
/// thread then sends through its data core's queue (`PortConf::share_last_pair`), and a checked
/// transfer (`--ddp-verify`: every message's bytes, RDMA Reads back) goes through whole.
#[test]
fn one_queue_pair_a_side_carries_a_checked_transfer() {
    let (goodput, done, all) = transfer(1, &["--ddp-verify"]);
    assert!(
        all.matches("the device has 1 queue pair(s), so the control thread sends through")
            .count()
            == 2,
        "both ends say they share their queue pair:\n{all}"
    );
    assert!(
        goodput["read_back"]["reads"].as_u64() > Some(0),
        "{goodput}"
    );
    assert_eq!(done["errors"].as_u64(), Some(0), "{done}");
}

/// Ends with different data cores on vhost-user, `queues=3` on both: a server on two, a client
/// on one. Each end opens every pair its device has, so the queue the server's owning core
/// answers on is one the client opened (before: the client opened two of its three, the
/// server's answers on the third were lost, and the association never came up).
#[test]
fn ends_with_different_data_cores_agree_on_vhost_user_queues() {
    let (goodput, done, _) = transfer_with(
        3,
        &["--ddp-verify"],
        ("0@0,1@0,2@0", &["--data-cores", "2"]),
    );
    assert!(
        goodput["read_back"]["reads"].as_u64() > Some(0),
        "{goodput}"
    );
    assert_eq!(done["errors"].as_u64(), Some(0), "{done}");
}
