//! `net_tap` ports, in a network namespace of the test's own. Two endpoints on taps joined by a
//! kernel bridge: DPDK's tap port takes its kernel interface's Ethernet address, and a bridge
//! takes frames to the address of one of its ports for itself: a reply to the port's address
//! stopped at the bridge and never went out on the tap (the association never came up).
//! `--mac` gives the endpoint an address of its own; the port is promiscuous. And a tap whose
//! kernel queue overflows: its drops are counted.

use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

#[path = "common/procs.rs"]
mod procs;

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");

/// A namespace holding bridge `br0`, without IPv6; removed however the test ends, with the
/// processes in it.
struct Net {
    ns: String,
    procs: Vec<Child>,
    /// One namespace at a time: its name is the test process's, and two pairs at once would
    /// be four polling processes on this machine's CPUs.
    _one: std::sync::MutexGuard<'static, ()>,
}

static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Net {
    fn new() -> Net {
        let id = Command::new("id").arg("-u").output().expect("id");
        assert_eq!(
            String::from_utf8_lossy(&id.stdout).trim(),
            "0",
            "this test makes a network namespace: run it as root"
        );
        let net = Net {
            ns: format!("ddpdk-tapbr-{}", std::process::id()),
            procs: Vec::new(),
            _one: ONE
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        };
        net.ip(&["netns", "add", &net.ns]);
        let o = Command::new("ip")
            .args(["netns", "exec", &net.ns, "sysctl", "-qw"])
            .args([
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])
            .output()
            .expect("sysctl");
        assert!(o.status.success(), "sysctl: {}", text(&o));
        net.ip(&["-n", &net.ns, "link", "add", "br0", "type", "bridge"]);
        net.ip(&["-n", &net.ns, "link", "set", "br0", "up"]);
        net
    }

    fn ip(&self, args: &[&str]) {
        let o = Command::new("ip").args(args).output().expect("ip");
        assert!(o.status.success(), "ip {args:?}: {}", text(&o));
    }

    /// `ddpdk` in the namespace on a tap port `tap`, which joins the bridge once it exists.
    fn ddpdk(&mut self, job: &[&str], tap: &str, lcores: &str, app: &[&str]) -> usize {
        let pid = std::process::id();
        let mut eal: Vec<String> = ["netns", "exec", &self.ns, BIN]
            .iter()
            .chain(job)
            .map(|s| s.to_string())
            .collect();
        eal.extend(procs::vdev_eal(
            lcores,
            &format!("ddpdk-tapbr-{tap}-{pid}"),
            &format!("net_tap0,iface={tap}"),
            1024,
            false,
        ));
        self.procs.push(procs::spawn("ip", &eal, app));
        let deadline = Instant::now() + Duration::from_secs(10);
        let n = self.ns.clone();
        while !Command::new("ip")
            .args(["-n", &n, "link", "show", tap])
            .output()
            .is_ok_and(|o| o.status.success())
        {
            assert!(Instant::now() < deadline, "{tap} never appeared");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.ip(&["-n", &n, "link", "set", tap, "master", "br0", "up"]);
        self.procs.len() - 1
    }

    fn take(&mut self, k: usize) -> Child {
        self.procs.remove(k)
    }

    /// `ddpdk perf server` on tap `dtaps` with `mac` (or the tap's own), listening; it stays
    /// the last of `procs`. Returns its stderr so far and a reader of the rest.
    fn perf_server(&mut self, mac: Option<&str>) -> (String, std::thread::JoinHandle<String>) {
        let mut app = vec!["--ip", "198.18.0.2", "--json", "--run-for", "60"];
        if let Some(m) = mac {
            app.extend(["--mac", m]);
        }
        let s = self.ddpdk(&["perf", "server"], "dtaps", "0@0", &app);
        let mut server = self.take(s);
        let up = procs::read_until(server.stderr.take().expect("stderr"), "the server", |l| {
            l.contains("(listening)")
        });
        self.procs.push(server);
        up
    }

    /// `ddpdk perf client` on tap `dtapc` with `extra` options, run to its end.
    fn perf_client(&mut self, extra: &[&str]) -> Output {
        let mut app = vec!["--ip", "198.18.0.1", "--run-for", "2", "--json"];
        app.extend_from_slice(extra);
        let c = self.ddpdk(&["perf", "client", "198.18.0.2"], "dtapc", "0@1", &app);
        self.take(c).wait_with_output().expect("client")
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for c in &mut self.procs {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
    }
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// With `--mac` on both ends (`ddpdk perf server` and `perf client`, as a user runs them), a
/// transfer over two taps on a bridge goes through whole.
#[test]
fn endpoints_on_bridged_taps_talk_with_addresses_of_their_own() {
    let mut net = Net::new();
    let (head, rest) = net.perf_server(Some("02:00:5e:10:00:02"));
    let client = net.perf_client(&["--mac", "02:00:5e:10:00:01"]);
    let server = net
        .procs
        .pop()
        .expect("server")
        .wait_with_output()
        .expect("server");
    let server_text = head + &rest.join().unwrap_or_default() + &text(&server);
    let client_text = text(&client);
    procs::every_write_delivered(&client, &client_text, &server, &server_text, 100);
}

/// Without `--mac` on bridged taps the association cannot come up, and the client says what
/// to give: its error names `--mac` and why (before: "timed out waiting for the association"
/// or no answer to INIT, with nothing about the bridge).
#[test]
fn a_client_on_a_bridged_tap_without_its_own_address_is_told_to_give_one() {
    let mut net = Net::new();
    let _server = net.perf_server(None);
    let client = net.perf_client(&[]);
    let client_text = text(&client);
    assert_eq!(client.status.code(), Some(1), "{client_text}");
    assert!(
        client_text.contains("give the endpoint an Ethernet address of its own with --mac"),
        "{client_text}"
    );
}

/// A tap's kernel queue that overflows drops frames the tap PMD never counts (DPDK 22.11: 3000
/// frames into an unread port, 2006 dropped, RX-missed 0); the port counts the interface's
/// transmit drops as RX-missed. Ports started, forwarding stopped, 3000 frames sent out of the
/// tap by the kernel: RX-missed is what the interface dropped, and once forwarding drains the
/// queue every frame the kernel sent to the tap is either received or missed.
#[test]
fn frames_a_full_tap_queue_drops_are_counted_as_missed() {
    let net = Net::new();
    let tap = "dtapq";
    let mut shell = procs::NetnsShell::start(
        BIN,
        &net.ns,
        &format!("ddpdk-tapq-{}", std::process::id()),
        &format!("net_tap0,iface={tap}"),
    );
    let (received, missed) = shell.rx_stats();
    assert_eq!(missed, 0, "nothing dropped yet");
    // What the kernel sent out of the tap: to our queue, or dropped at it.
    let counter = |name: &str| -> u64 {
        let o = Command::new("ip")
            .args(["netns", "exec", &net.ns, "cat"])
            .arg(format!("/sys/class/net/{tap}/statistics/{name}"))
            .output()
            .expect("cat");
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}: {}", text(&o)))
    };
    let dropped_before = counter("tx_dropped");
    const SENT: u64 = 3000;
    procs::send_frames(&net.ns, tap, SENT);
    let dropped = counter("tx_dropped") - dropped_before;
    assert!(
        dropped > 1000,
        "the tap's queue dropped {dropped} of {SENT} frames"
    );
    let (_, missed) = shell.rx_stats();
    assert_eq!(missed, dropped, "RX-missed is what the tap's queue dropped");
    shell.command("start");
    std::thread::sleep(Duration::from_millis(500));
    shell.command("stop");
    let (received_after, missed_after) = shell.rx_stats();
    assert_eq!(
        received_after - received + missed_after,
        counter("tx_packets") + dropped,
        "every frame the kernel sent to the tap is received or counted as missed"
    );
}

/// `fwd --mtu` sets each port's MTU where the device has the setting, as testpmd's `port config
/// mtu` does (it was taken and ignored: a NIC kept dropping the frames above 1500 bytes it was
/// asked to forward; an outside-in review), and a device's refusal names the option.
#[test]
fn fwd_sets_the_mtu_it_is_given_on_its_ports() {
    let net = Net::new();
    let cmds = std::env::temp_dir().join(format!("ddpdk-fwd-mtu-{}.txt", std::process::id()));
    std::fs::write(&cmds, "show port info 0\nquit\n").expect("write the command file");
    let run = |mtu: &str| -> Output {
        let mut args: Vec<String> = ["netns", "exec", &net.ns, BIN, "fwd"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(procs::vdev_eal(
            "0-1",
            &format!("ddpdk-tapmtu-{}", std::process::id()),
            "net_tap0,iface=dtapm",
            256,
            false,
        ));
        Command::new("ip")
            .args(&args)
            .arg("--")
            .args(["--mtu", mtu, "--cmdline-file"])
            .arg(&cmds)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("ddpdk fwd")
    };
    let o = run("1400");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("  MTU: 1400\n"),
        "{}",
        text(&o)
    );
    // DPDK 22.11's tap takes frames of 1522 bytes at most.
    let o = run("9000");
    let _ = std::fs::remove_file(&cmds);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("net_tap0: --mtu 9000: rte_eth_dev_set_mtu"),
        "{}",
        text(&o)
    );
}
