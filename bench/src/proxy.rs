//! `localgpt-proxy-bench`: what the network allowlist's proxy costs (issue 14's benchmark).
//!
//! A local upstream (threads of this process, on `127.0.0.1`) serves a large body and a small
//! one. `curl` fetches them bare (direct) and from inside `localgpt sandbox run --network
//! allowlist` at each level given (through the runner's proxy, which the plan's variables
//! name), interleaved so that the machine's noise falls on both alike. From curl's own timers:
//!
//! - **throughput**: `speed_download` of the large body, median of the repeats; the figure is
//!   the ratio proxied / direct (goal ≥ 0.9), for a body sent at a 1 Gbit/s link's pace (a
//!   download from the network) and for one sent as fast as loopback goes (which measures the
//!   relay's CPU cost: on a small machine the proxy's copies compete with curl and the upstream
//!   for the same cores);
//! - **added latency per request**: `time_starttransfer` of the small body (name, connect,
//!   request, first byte — no process start-up), many requests in one sandboxed loop, p50 and
//!   p99 against the same loop bare (goal: p99 added ≤ 1 ms).
//!
//! Informative: the section has no gate (a shared 2-core machine's p99 is noise-prone; the goals
//! are printed beside the figures). Writes `<out>/sections/proxy.json` and `<out>/proxy.md`.
//!
//! ```text
//! localgpt-proxy-bench --bin target/release/localgpt [--out DIR] [--mb 100] [--repeats 5] [--requests 300] [--levels full,standard]
//! ```

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;

use localgpt_bench::stats::{median, r3, Summary};
use serde_json::{json, Value};

struct Opts {
    bin: PathBuf,
    out: PathBuf,
    mb: usize,
    repeats: usize,
    requests: usize,
    levels: Vec<String>,
}

fn opts() -> Result<Opts, String> {
    let mut o = Opts { bin: PathBuf::from("target/release/localgpt"), out: PathBuf::from("target/release-report"), mb: 100, repeats: 5, requests: 300, levels: vec!["full".into(), "standard".into()] };
    if let Some(d) = std::env::var_os("LOCALGPT_REPORT_DIR").filter(|d| !d.is_empty()) {
        o.out = PathBuf::from(d);
    }
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let mut v = || a.next().ok_or_else(|| format!("{k} needs a value"));
        match k.as_str() {
            "--bin" => o.bin = PathBuf::from(v()?),
            "--out" => o.out = PathBuf::from(v()?),
            "--mb" => o.mb = v()?.parse().map_err(|e| format!("--mb: {e}"))?,
            "--repeats" => o.repeats = v()?.parse().map_err(|e| format!("--repeats: {e}"))?,
            "--requests" => o.requests = v()?.parse().map_err(|e| format!("--requests: {e}"))?,
            "--levels" => o.levels = v()?.split(',').map(str::to_string).collect(),
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    Ok(o)
}

/// The upstream: `GET /big` answers `mb` MiB, anything else `ok`; one thread per connection.
fn upstream(mb: usize) -> std::io::Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let port = l.local_addr()?.port();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || serve(c, mb));
        }
    });
    Ok(port)
}

fn serve(mut c: TcpStream, mb: usize) {
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let has = |p: &[u8]| req.windows(p.len()).any(|w| w == p);
    let (big, paced) = (has(b"/big "), has(b"/paced "));
    let len = if big || paced { mb << 20 } else { 2 };
    let _ = write!(c, "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n");
    if big || paced {
        let chunk = vec![b'x'; 1 << 20];
        let start = std::time::Instant::now();
        for i in 0..mb {
            if paced {
                // A 1 Gbit/s link: 1 MiB every 8.4 ms.
                let due = std::time::Duration::from_micros(8_389 * i as u64);
                if let Some(wait) = due.checked_sub(start.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            if c.write_all(&chunk).is_err() {
                return;
            }
        }
    } else {
        let _ = c.write_all(b"ok");
    }
}

/// Runs `script` bare or sandboxed at `level` (with the allowlist), returning stdout.
fn run(o: &Opts, ws: &Path, xdg: &Path, level: Option<&str>, script: &str) -> Result<String, String> {
    let mut c = match level {
        None => {
            let mut c = Command::new("bash");
            c.args(["-c", script]).env_remove("http_proxy").env_remove("HTTP_PROXY").env_remove("ALL_PROXY").env_remove("all_proxy");
            c
        }
        Some(l) => {
            let mut c = Command::new(&o.bin);
            c.args(["sandbox", "run", "--quiet", "--level", l, "--network", "allowlist", "--allow-domain", "localhost", "--workspace"])
                .arg(ws)
                .args(["--", script])
                .env("XDG_CONFIG_HOME", xdg);
            c
        }
    };
    let out = c.current_dir(ws).output().map_err(|e| format!("spawn: {e}"))?;
    if !out.status.success() {
        return Err(format!("{} exited {}: {}", level.unwrap_or("bare"), out.status, String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn numbers(s: &str) -> Vec<f64> {
    s.split_whitespace().filter_map(|x| x.parse::<f64>().ok()).collect()
}

fn main() {
    match bench() {
        Ok(()) => {}
        Err(e) => {
            eprintln!("localgpt-proxy-bench: {e}");
            std::process::exit(2);
        }
    }
}

fn bench() -> Result<(), String> {
    let mut o = opts()?;
    o.bin = std::fs::canonicalize(&o.bin).map_err(|e| format!("{}: {e}", o.bin.display()))?;
    if Command::new("curl").arg("--version").output().is_err() {
        return Err("curl is not installed".into());
    }
    let port = upstream(o.mb).map_err(|e| format!("upstream: {e}"))?;
    let tmp = std::env::temp_dir().join(format!("lg-proxy-bench-{}", std::process::id()));
    let (ws, xdg) = (tmp.join("ws"), tmp.join("xdg"));
    std::fs::create_dir_all(&ws).and_then(|()| std::fs::create_dir_all(xdg.join("localgpt"))).map_err(|e| format!("{}: {e}", tmp.display()))?;
    // The upstream is on loopback, a special range the proxy dials only with an allow_cidrs entry.
    std::fs::write(xdg.join("localgpt/config.toml"), format!("[sandbox]\nallow_ports = [{port}]\nallow_cidrs = [\"127.0.0.1/32\"]\n")).map_err(|e| format!("config: {e}"))?;
    let fetch = |path: &str| format!("curl -sS --noproxy '' -o /dev/null -w '%{{speed_download}}\\n' http://localhost:{port}/{path}");
    let (big, paced) = (fetch("big"), fetch("paced"));
    let small = format!("for i in $(seq {}); do curl -sS --noproxy '' -o /dev/null -w '%{{time_starttransfer}}\\n' http://localhost:{port}/small; done", o.requests);
    let started = std::time::Instant::now();
    let (mut direct_bps, mut direct_paced) = (Vec::new(), Vec::new());
    let mut proxied_bps: Vec<Vec<f64>> = vec![Vec::new(); o.levels.len()];
    let mut proxied_paced: Vec<Vec<f64>> = vec![Vec::new(); o.levels.len()];
    for _ in 0..o.repeats {
        direct_bps.extend(numbers(&run(&o, &ws, &xdg, None, &big)?));
        direct_paced.extend(numbers(&run(&o, &ws, &xdg, None, &paced)?));
        for (i, l) in o.levels.iter().enumerate() {
            proxied_bps[i].extend(numbers(&run(&o, &ws, &xdg, Some(l), &big)?));
            proxied_paced[i].extend(numbers(&run(&o, &ws, &xdg, Some(l), &paced)?));
        }
    }
    let direct_ttfb: Vec<f64> = numbers(&run(&o, &ws, &xdg, None, &small)?).iter().map(|s| s * 1000.0).collect();
    let mut levels = Vec::new();
    let mut md = format!(
        "Upstream on 127.0.0.1 (threads of the benchmark); `curl` bare (direct) and inside `localgpt sandbox run --network allowlist` (through the runner's proxy), {} MiB × {} repeats, {} small requests per loop. Goals: throughput ≥ 0.9× direct for a download at a 1 Gbit/s link's pace; added time to first byte ≤ 1 ms at p99. The unpaced loopback figure is the relay's CPU cost, not a goal.\n\n| level | 1 Gbit/s link: direct → proxy | ratio | loopback unpaced: direct → proxy | ratio | TTFB p50 direct → proxy | TTFB p99 direct → proxy | added p99 |\n|---|---|---|---|---|---|---|---|\n",
        o.mb, o.repeats, o.requests);
    let d_mbs = median(&direct_bps) / 1e6;
    let dp_mbs = median(&direct_paced) / 1e6;
    let dsum = Summary::of(&direct_ttfb).ok_or("no direct samples")?;
    for (i, l) in o.levels.iter().enumerate() {
        let p_mbs = median(&proxied_bps[i]) / 1e6;
        let pp_mbs = median(&proxied_paced[i]) / 1e6;
        let paced_ratio = if dp_mbs > 0.0 { pp_mbs / dp_mbs } else { f64::NAN };
        let ttfb: Vec<f64> = numbers(&run(&o, &ws, &xdg, Some(l), &small)?).iter().map(|s| s * 1000.0).collect();
        let psum = Summary::of(&ttfb).ok_or("no proxied samples")?;
        let ratio = if d_mbs > 0.0 { p_mbs / d_mbs } else { f64::NAN };
        let added = psum.p99 - dsum.p99;
        let _ = writeln!(
            md,
            "| {l} | {:.0} → {:.0} MB/s | {:.2} {} | {:.0} → {:.0} MB/s | {:.2} | {:.3} → {:.3} ms | {:.3} → {:.3} ms | {:.3} ms {} |",
            dp_mbs, pp_mbs, paced_ratio, if paced_ratio >= 0.9 { "✓" } else { "✗ (goal 0.9)" }, d_mbs, p_mbs, ratio,
            dsum.p50, psum.p50, dsum.p99, psum.p99, added, if added <= 1.0 { "✓" } else { "✗ (goal 1 ms)" }
        );
        levels.push(json!({
            "level": l, "paced_direct_mb_s": r3(dp_mbs), "paced_proxied_mb_s": r3(pp_mbs), "paced_ratio": r3(paced_ratio),
            "loopback_direct_mb_s": r3(d_mbs), "loopback_proxied_mb_s": r3(p_mbs), "loopback_ratio": r3(ratio),
            "ttfb_direct_ms": dsum, "ttfb_proxied_ms": psum, "ttfb_added_p99_ms": r3(added),
            "goals_met": paced_ratio >= 0.9 && added <= 1.0,
        }));
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let cmdline: Vec<String> = std::env::args().collect();
    md.push_str(&format!("\nCommand: `{}` ({:.0} s).\n", cmdline.join(" "), started.elapsed().as_secs_f64()));
    let section: Value = json!({
        "name": "proxy",
        "title": "Network allowlist proxy",
        "gate": null,
        "figures": {"mib": o.mb, "repeats": o.repeats, "requests": o.requests, "levels": levels, "command": cmdline.join(" ")},
        "markdown": md,
    });
    let sec_dir = o.out.join("sections");
    std::fs::create_dir_all(&sec_dir).map_err(|e| format!("{}: {e}", sec_dir.display()))?;
    std::fs::write(sec_dir.join("proxy.json"), serde_json::to_string_pretty(&section).unwrap_or_default()).map_err(|e| format!("write: {e}"))?;
    std::fs::write(o.out.join("proxy.md"), format!("## Network allowlist proxy\n\n{md}")).map_err(|e| format!("write: {e}"))?;
    print!("{md}");
    Ok(())
}
