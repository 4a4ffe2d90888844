//! `--network allowlist` (Full level, and Standard where the runner answers connect): the runner's proxy lets the command reach allowed hosts
//! and nothing else. Every "blocked" is checked at the upstream, a listener on the host side
//! that records what reached it; the upstreams are local (no internet in CI), reached through an
//! explicit `allow_cidrs` entry where a test means to reach one.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use support::*;

/// A host-side HTTP upstream on 127.0.0.1 that answers `upstream-page` and records every byte
/// that reached it.
struct Upstream {
    port: u16,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Upstream {
    fn start(port: u16) -> Option<Upstream> {
        let l = TcpListener::bind(("127.0.0.1", port)).ok()?;
        let port = l.local_addr().ok()?.port();
        let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let s = Arc::clone(&seen);
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let s = Arc::clone(&s);
                std::thread::spawn(move || {
                    let mut c = c;
                    let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                    let mut got = Vec::new();
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = c.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&buf[..n]);
                        if got.windows(4).any(|w| w == b"\r\n\r\n") || got.first() == Some(&22) {
                            break;
                        }
                    }
                    s.lock().unwrap().push(got);
                    let _ = c.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 13\r\n\r\nupstream-page");
                });
            }
        });
        Some(Upstream { port, seen })
    }

    /// The request paths that reached it (the first line's second word), in order.
    fn paths(&self) -> Vec<String> {
        std::thread::sleep(std::time::Duration::from_millis(200));
        self.seen.lock().unwrap().iter().map(|r| String::from_utf8_lossy(r).split(' ').nth(1).unwrap_or("?").to_string()).collect()
    }

    fn count(&self) -> usize {
        // Give an in-flight connection's thread a moment to record it.
        std::thread::sleep(std::time::Duration::from_millis(200));
        self.seen.lock().unwrap().len()
    }
}

/// The allowlist runs at the suite's level: Full (the sandbox's own network namespace) or
/// Standard (the host's, where the runner answers every connect and lets TCP reach only its
/// proxy and the sandbox's own listeners).
fn full_or_skip(name: &str, _w: &World) -> bool {
    if which("curl").is_none() {
        skip(name, "curl is not installed");
        return false;
    }
    true
}

/// The proxy's `host:port` inside the sandbox, from the variables the plan sets (`3128` on the
/// sandbox's own loopback at Full, a free port of the host's loopback at Standard).
const PROXY: &str = "PROXY_HP=${http_proxy#http://}; ";

fn config(w: &World, toml: &str) {
    let dir = w.xdg.join("localgpt");
    std::fs::create_dir_all(&dir).unwrap();
    // The allowlist's lists need the mode (`status`, which tells the suite's level, reads this
    // config too).
    std::fs::write(dir.join("config.toml"), format!("[sandbox]\nnetwork = \"allowlist\"\n{toml}")).unwrap();
}

fn allowlisted(w: &World, flags: &[&str], script: &str) -> Out {
    let level = suite_level(w);
    let mut opts = vec!["--level", level.as_str(), "--network", "allowlist"];
    opts.extend_from_slice(flags);
    let script = format!("{PROXY}{script}");
    run(w.sandbox_cmd(&opts, &[&script]), &script)
}

#[test]
fn allowlist_reaches_allowed_hosts_and_refuses_the_rest_with_a_403() {
    let name = "allowlist_reaches_allowed_hosts_and_refuses_the_rest_with_a_403";
    let w = World::new();
    if !full_or_skip(name, &w) {
        return;
    }
    let up = Upstream::start(0).unwrap();
    let p = up.port;
    config(&w, &format!("allow_ports = [{p}]\nallow_cidrs = [\"127.0.0.1/32\"]\n"));
    // Allowed, by name (HTTP and SOCKS5 with remote names) and by address in allow_cidrs.
    let o = allowlisted(&w, &["--allow-domain", "localhost"], &format!(
        "curl -sS --noproxy '' http://localhost:{p}/a; echo; curl -sS --noproxy '' -x socks5h://$PROXY_HP http://localhost:{p}/b; echo; curl -sS --noproxy '' http://127.0.0.1:{p}/c"));
    assert_eq!(o.code(), Some(0), "{}", o.describe());
    assert_eq!(o.stdout, "upstream-page\nupstream-page\nupstream-page", "{}", o.describe());
    assert_eq!(up.count(), 3);
    // Not allowed: another name, a denied one (deny wins), another port, an address outside
    // allow_cidrs, numeric forms. The 403 names the host and how to allow it; the upstream sees
    // nothing.
    for (flags, url, hint) in [
        (vec!["--allow-domain", "localhost"], format!("http://other.invalid:{p}/"), "--allow-domain other.invalid"),
        (vec!["--allow-domain", "**.localhost", "--deny-domain", "localhost"], format!("http://localhost:{p}/"), "localhost is in deny_domains"),
        (vec!["--allow-domain", "localhost"], "http://localhost:9/".to_string(), "add 9 to allow_ports"),
        (vec!["--allow-domain", "localhost"], format!("http://127.0.0.2:{p}/"), "allow_cidrs"),
        (vec!["--allow-domain", "localhost"], format!("http://2130706434:{p}/"), "allow_cidrs"),
        (vec!["--allow-domain", "localhost"], format!("http://0177.0.0.2:{p}/"), "allow_cidrs"),
        (vec!["--allow-domain", "localhost"], format!("http://[::1]:{p}/"), "allow_cidrs"),
    ] {
        let o = allowlisted(&w, &flags, &format!("curl -sS --noproxy '' {url}"));
        assert!(o.stdout.contains("the sandbox's network policy blocked") && o.stdout.contains("To allow it: ") && o.stdout.contains(hint), "{url}: {hint}{}", o.describe());
        assert!(!o.stdout.contains("upstream-page"), "{url}{}", o.describe());
    }
    assert_eq!(up.count(), 3, "a refused request reached the upstream");
}

#[test]
fn an_allowed_name_resolving_to_loopback_reaches_nothing_without_allow_cidrs() {
    let name = "an_allowed_name_resolving_to_loopback_reaches_nothing_without_allow_cidrs";
    let w = World::new();
    if !full_or_skip(name, &w) {
        return;
    }
    let up = Upstream::start(0).unwrap();
    let p = up.port;
    config(&w, &format!("allow_ports = [{p}]\n"));
    let o = allowlisted(&w, &["--allow-domain", "localhost", "--json"], &format!("curl -sS --noproxy '' http://localhost:{p}/"));
    let v = parse_one_json(&o);
    let out = v["stdout"].as_str().unwrap_or_default();
    assert!(out.contains("blocked localhost") && out.contains("loopback"), "{}", o.describe());
    assert_eq!(v["network"][0]["allowed"], false, "{}", o.describe());
    assert_eq!(up.count(), 0, "DNS rebinding: an allowed name reached a loopback listener");
}

#[test]
fn nothing_bypasses_the_proxy() {
    let name = "nothing_bypasses_the_proxy";
    let w = World::new();
    if !full_or_skip(name, &w) {
        return;
    }
    let up = Upstream::start(0).unwrap();
    let p = up.port;
    config(&w, &format!("allow_ports = [{p}]\nallow_cidrs = [\"127.0.0.1/32\"]\n"));
    // Direct TCP and UDP to the host's listener (the namespace has only lo), and a tunnel to a
    // port outside allow_ports.
    let script = format!(
        "curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{p}/; (exec 3<>/dev/tcp/127.0.0.1/{p} && echo escaped >&3); \
         echo escaped > /dev/udp/127.0.0.1/{p}; \
         printf 'CONNECT 127.0.0.1:22 HTTP/1.1\\r\\n\\r\\n' | curl -sS --max-time 5 telnet://$PROXY_HP ; true");
    let o = allowlisted(&w, &["--allow-domain", "localhost"], &script);
    assert!(!o.stdout.contains("upstream-page"), "{}", o.describe());
    assert_eq!(up.count(), 0, "a direct connection left the namespace");
}

#[test]
fn a_tls_tunnel_whose_server_name_differs_from_the_connect_host_is_refused() {
    let name = "a_tls_tunnel_whose_server_name_differs_from_the_connect_host_is_refused";
    let w = World::new();
    if !full_or_skip(name, &w) {
        return;
    }
    let Some(up) = Upstream::start(443) else {
        skip(name, "cannot listen on 127.0.0.1:443 here (not root, or in use)");
        return;
    };
    config(&w, "allow_ports = [443]\nallow_cidrs = [\"127.0.0.1/32\"]\n");
    for (sni, reaches) in [("evil.example", false), ("localhost", true)] {
        std::fs::write(w.ws.join("hello.bin"), client_hello(Some(sni))).unwrap();
        let script = "exec 3<>/dev/tcp/127.0.0.1/${PROXY_HP#*:} && printf 'CONNECT localhost:443 HTTP/1.1\\r\\n\\r\\n' >&3 && head -c 39 <&3 && cat hello.bin >&3 && timeout 3 cat <&3; true";
        let before = up.count();
        let o = allowlisted(&w, &["--allow-domain", "localhost", "--json"], script);
        let v = parse_one_json(&o);
        assert!(v["stdout"].as_str().unwrap_or_default().contains("200 Connection established"), "{}", o.describe());
        assert_eq!(up.count() - before, usize::from(reaches), "SNI {sni}{}", o.describe());
        if !reaches {
            assert!(v["network"][0]["rule"].as_str().unwrap_or_default().contains("domain fronting"), "{}", o.describe());
        }
    }
}

/// Issue 58, no fronting: a tunnel on any port (CONNECT or SOCKS5) is dialled only once what
/// the client sends first names the requested host — a TLS server name, or the Host of an HTTP
/// request —, unless the domain is in `allow_opaque_tunnels`. Judged at the upstream: a refused
/// tunnel reaches nothing.
/// Requests another parser could read differently (a second Host hidden behind a bare LF, two
/// Hosts, a folded line, Content-Length with Transfer-Encoding) are refused with a 400, sent to
/// the proxy and sent past it (captured); judged at the upstream, which none of them reaches,
/// while the same request written plainly does, both ways.
#[test]
fn a_request_other_parsers_could_read_differently_reaches_no_upstream() {
    let name = "a_request_other_parsers_could_read_differently_reaches_no_upstream";
    let w = World::new();
    if !full_or_skip(name, &w) {
        return;
    }
    let up = Upstream::start(0).unwrap();
    let p = up.port;
    config(&w, &format!("allow_ports = [{p}]\nallow_cidrs = [\"127.0.0.1/32\"]\n"));
    let host = format!("localhost:{p}");
    let cases: [(&str, String); 5] = [
        ("plain", format!("Host: {host}\r\n")),
        ("bare-lf", format!("Host: {host}\nHost: evil.example\r\n")),
        ("two-hosts", format!("Host: {host}\r\nHost: evil.example\r\n")),
        ("folded", format!("Host: {host}\r\nX-A: b\r\n  Host: evil.example\r\n")),
        ("cl-te", format!("Host: {host}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n")),
    ];
    let mut script = String::new();
    for (way, target, dial) in [("proxied", format!("http://{host}"), "127.0.0.1/${PROXY_HP#*:}".to_string()), ("captured", String::new(), format!("203.0.113.7/{p}"))] {
        for (case, headers) in &cases {
            let req = format!("GET {target}/{way}-{case} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n");
            std::fs::write(w.ws.join(format!("{way}-{case}.req")), req).unwrap();
            script += &format!("echo '== {way}-{case}'; (exec 3<>/dev/tcp/{dial} && cat {way}-{case}.req >&3 && timeout 3 head -c 200 <&3); echo; ");
        }
    }
    script += "true";
    let o = allowlisted(&w, &["--allow-domain", "localhost", "--json"], &script);
    let v = parse_one_json(&o);
    let out = v["stdout"].as_str().unwrap_or_default();
    assert_eq!(up.paths(), ["/proxied-plain", "/captured-plain"], "only the plain requests reach the upstream{}", o.describe());
    // Each refusal is told in HTTP: a 400 where the proxy cannot read the request, a 403 where
    // it reads it and refuses what it carries (a captured connection's Content-Length with
    // Transfer-Encoding, judged once its one Host named the host).
    for way in ["proxied", "captured"] {
        for (case, _) in cases.iter().skip(1) {
            let part = out.split(&format!("== {way}-{case}\n")).nth(1).and_then(|r| r.split("== ").next()).unwrap_or_default();
            assert!(part.contains("400 Bad Request") || part.contains("403 Forbidden"), "{way} {case}: not refused in HTTP{}", o.describe());
        }
    }
}

#[test]
fn a_tunnel_is_dialled_only_when_what_it_carries_names_the_allowed_host() {
    let name = "a_tunnel_is_dialled_only_when_what_it_carries_names_the_allowed_host";
    let w = World::new();
    if !full_or_skip(name, &w) {
        return;
    }
    let up = Upstream::start(0).unwrap();
    let p = up.port;
    let base = format!("allow_ports = [{p}]\nallow_cidrs = [\"127.0.0.1/32\"]\n");
    let http = |host: &str| format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes();
    for (what, opening, opaque, reaches) in [
        ("HTTP naming another site", http("evil.example"), false, false),
        ("HTTP naming the host", http(&format!("localhost:{p}")), false, true),
        ("an absolute URI naming another site", format!("GET http://evil.example/ HTTP/1.1\r\nHost: localhost:{p}\r\n\r\n").into_bytes(), false, false),
        ("TLS without a server name", client_hello(None), false, false),
        ("TLS naming the host", client_hello(Some("localhost")), false, true),
        ("ssh's banner", b"SSH-2.0-OpenSSH_9.2p1\r\n\r\n".to_vec(), false, false),
        ("ssh's banner to an opaque domain", b"SSH-2.0-OpenSSH_9.2p1\r\n\r\n".to_vec(), true, true),
        ("TLS without a server name to an opaque domain", client_hello(None), true, true),
    ] {
        config(&w, &format!("{base}{}", if opaque { "allow_opaque_tunnels = [\"localhost\"]\n" } else { "" }));
        std::fs::write(w.ws.join("opening.bin"), &opening).unwrap();
        let script = format!("exec 3<>/dev/tcp/127.0.0.1/${{PROXY_HP#*:}} && printf 'CONNECT localhost:{p} HTTP/1.1\\r\\n\\r\\n' >&3 && head -c 39 <&3 && cat opening.bin >&3 && timeout 3 cat <&3; true");
        let before = up.count();
        let o = allowlisted(&w, &["--allow-domain", "localhost", "--json"], &script);
        let v = parse_one_json(&o);
        let out = v["stdout"].as_str().unwrap_or_default();
        assert!(out.contains("200 Connection established"), "{what}{}", o.describe());
        assert_eq!(up.count() - before, usize::from(reaches), "{what}{}", o.describe());
        let ev = &v["network"][0];
        assert_eq!(ev["allowed"].as_bool(), Some(reaches), "{what}{}", o.describe());
        if !reaches {
            assert_eq!(ev["refusal"].as_str(), Some("protocol"), "{what}{}", o.describe());
            assert!(!out.contains("upstream-page"), "{what}{}", o.describe());
        }
        if opening.starts_with(b"GET") && !reaches {
            assert!(out.contains("403 Forbidden") && out.contains("refused what the tunnel"), "{what}{}", o.describe());
        }
    }
    // SOCKS5 the same way: curl naming another site in Host reaches nothing; naming the host does.
    config(&w, &base);
    for (header, reaches) in [("evil.example", false), ("localhost", true)] {
        let before = up.count();
        let o = allowlisted(&w, &["--allow-domain", "localhost"], &format!("curl -sS --noproxy '' -x socks5h://$PROXY_HP -H 'Host: {header}:{p}' http://localhost:{p}/; true"));
        assert_eq!(up.count() - before, usize::from(reaches), "SOCKS5 with Host {header}{}", o.describe());
        assert_eq!(o.stdout.contains("upstream-page"), reaches, "{}", o.describe());
    }
}

/// `fetch.py HOST PORT PATH HOST-HEADER [thread]`: one HTTP/1.0 GET straight to HOST:PORT, as a
/// client without proxy support makes it; prints the body, or the error.
const FETCH_PY: &str = r#"import socket, sys, threading
host, port, path, hh = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def go():
    try:
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(("GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (path, hh)).encode())
        data = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
        print(data.decode(errors="replace").split("\r\n\r\n", 1)[-1])
    except Exception as e:
        print("error:", e)
if len(sys.argv) > 5:
    t = threading.Thread(target=go)
    t.start()
    t.join()
else:
    go()
"#;

/// A JVM client that ignores every proxy setting (the JVM's own HTTP client with `NO_PROXY`, as
/// Gradle's and many libraries' clients are configured): the URL's address, the Host given.
const FETCH_JAVA: &str = r#"import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

public class Fetch {
    public static void main(String[] a) {
        try {
            HttpClient c = HttpClient.newBuilder().proxy(HttpClient.Builder.NO_PROXY).version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(5)).build();
            HttpRequest r = HttpRequest.newBuilder(URI.create(a[0])).header("Host", a[1]).timeout(Duration.ofSeconds(5)).build();
            System.out.println(c.send(r, HttpResponse.BodyHandlers.ofString()).body());
        } catch (Exception e) {
            System.out.println("error: " + e);
        }
    }
}
"#;

/// A Go HTTP client that ignores the proxy variables: `go-fetch URL [HOST]` prints the body.
const FETCH_GO: &str = r#"package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	c := &http.Client{Transport: &http.Transport{Proxy: nil}}
	req, err := http.NewRequest("GET", os.Args[1], nil)
	if err != nil {
		fmt.Println("go-error", err)
		return
	}
	if len(os.Args) > 2 {
		req.Host = os.Args[2]
	}
	r, err := c.Do(req)
	if err != nil {
		fmt.Println("go-failed", err)
		return
	}
	b, _ := io.ReadAll(r.Body)
	fmt.Println(string(b))
}
"#;

/// Builds `go-fetch-cgo` and `go-fetch-static` ([`FETCH_GO`]) into `dir`, bare; `Ok(false)` where
/// go is not installed. The build cache is per user in the temporary directory (the pure-Go
/// build compiles the `net` package again: a few seconds the first time).
fn go_fetchers(dir: &std::path::Path) -> Result<bool, String> {
    let Some(go) = which("go") else { return Ok(false) };
    let src = dir.join("gofetch");
    std::fs::create_dir_all(&src).map_err(|e| e.to_string())?;
    std::fs::write(src.join("main.go"), FETCH_GO).map_err(|e| e.to_string())?;
    std::fs::write(src.join("go.mod"), "module gofetch\n\ngo 1.19\n").map_err(|e| e.to_string())?;
    // SAFETY: getuid cannot fail.
    let cache = std::env::temp_dir().join(format!("localgpt-tests-go-cache-{}", unsafe { libc::getuid() }));
    for (out, cgo) in [("go-fetch-cgo", "1"), ("go-fetch-static", "0")] {
        let o = std::process::Command::new(&go)
            .args(["build", "-o"])
            .arg(dir.join(out))
            .arg(".")
            .current_dir(&src)
            .env("CGO_ENABLED", cgo)
            .env("GOCACHE", &cache)
            .env("HOME", &cache)
            .env("GOFLAGS", "-mod=mod")
            .env("GOTOOLCHAIN", "local")
            .output()
            .map_err(|e| e.to_string())?;
        if !o.status.success() {
            return Err(format!("go build ({out}): {}", String::from_utf8_lossy(&o.stderr)));
        }
    }
    Ok(true)
}

/// Tools that ignore the proxy variables (a JVM, Go or Rust client without proxy support, a
/// client on a worker thread) are captured: their connect reaches the proxy, which judges it as a
/// tunnel to the name behind the address (the DNS stub's own address for it, Full) or to the
/// name the request carries (any other address), and dials the name's own addresses. Judged at
/// the upstream: exactly the allowed requests reach it.
#[test]
fn clients_that_ignore_the_proxy_variables_are_captured_and_judged() {
    let name = "clients_that_ignore_the_proxy_variables_are_captured_and_judged";
    let w = World::new();
    if !full_or_skip(name, &w) {
        return;
    }
    let Some(py) = python3_or_skip(name) else { return };
    let py = py.display();
    if which("curl").is_none() {
        skip(name, "curl is not installed");
        return;
    }
    let up = Upstream::start(0).unwrap();
    let p = up.port;
    config(&w, &format!("allow_ports = [{p}]\nallow_cidrs = [\"127.0.0.1/32\"]\n"));
    // A client without any proxy support: one HTTP/1.0 GET, optionally from a worker thread.
    std::fs::write(w.ws.join("fetch.py"), FETCH_PY).unwrap();
    // `localhost.` is not in /etc/hosts as written, so Python asks the sandbox's DNS for it (at
    // Full over UDP, in the sandbox's own network namespace; at Standard over TCP, which the
    // broker captures to the same stub); 203.0.113.7 is an address no one has (a documentation
    // block), named by the Host header.
    let named = "localhost.";
    let mut allowed = vec!["/by-name"];
    // Refused: another site's Host on the name's address (fronting), a port not allowed.
    let mut script = format!("{py} fetch.py localhost. {p} /by-name localhost:{p}; {py} fetch.py localhost. {p} /fronted evil.example:{p}; {py} fetch.py localhost. 9 /port localhost:9; ");
    // Node's built-in fetch, which ignores the proxy variables (Node 20) and resolves the name
    // itself: allowed by name, and a name not allowed fails at its resolution.
    if which("node").is_some() {
        script += &format!("node -e 'fetch(\"http://localhost.:{p}/node\").then(r => r.text()).then(t => console.log(t)).catch(e => console.log(\"node-failed\", e.cause && e.cause.code))'; node -e 'fetch(\"http://other.invalid:{p}/node-denied\").then(r => console.log(r.status)).catch(e => console.log(\"node-denied\", e.cause && e.cause.code))'; ");
        allowed.push("/node");
    } else {
        eprintln!("SKIP {name} (Node part): node is not installed");
    }
    allowed.extend(["/by-address", "/curl", "/thread"]);
    script += &format!("{py} fetch.py 203.0.113.7 {p} /by-address localhost:{p}; curl -sS --noproxy '*' --max-time 5 -H 'Host: localhost:{p}' http://203.0.113.7:{p}/curl; echo; {py} fetch.py {named} {p} /thread localhost:{p} thread; ");
    // Refused: a name not allowed, a request naming no host, bytes that are no request.
    script += &format!("{py} fetch.py 203.0.113.7 {p} /denied other.invalid:{p}; (exec 3<>/dev/tcp/203.0.113.7/{p} && printf 'GET /nohost HTTP/1.0\\r\\n\\r\\n' >&3 && timeout 3 cat <&3); (exec 3<>/dev/tcp/203.0.113.7/{p} && echo raw-bytes >&3 && timeout 3 cat <&3); true");
    // A JVM's own client, where a JDK is installed (its connects come from the JVM's threads):
    // the allowed request reaches the upstream, the denied one does not.
    if which("java").is_some() && which("javac").is_some() {
        std::fs::write(w.ws.join("Fetch.java"), FETCH_JAVA).unwrap();
        let java = "java -Djdk.httpclient.allowRestrictedHeaders=host Fetch.java";
        script += &format!("; {java} http://203.0.113.7:{p}/java localhost:{p}; {java} http://203.0.113.7:{p}/java-denied other.invalid:{p}; true");
        allowed.push("/java");
    } else {
        eprintln!("SKIP {name} (JVM part): no JDK (java and javac) installed");
    }
    // Go clients that ignore the proxy variables (`Transport{Proxy: nil}`), built here bare: one
    // linked with the C library (Go's default where a C compiler is installed) and one pure-Go
    // static binary (`CGO_ENABLED=0`, as most released Go tools are), which resolves names with
    // Go's own resolver.
    match go_fetchers(&w.ws) {
        Ok(true) => {
            script += &format!("; ./go-fetch-cgo http://localhost.:{p}/go-cgo; ./go-fetch-static http://203.0.113.7:{p}/go-static localhost:{p}; ./go-fetch-static http://localhost.:{p}/go-static-by-name; ./go-fetch-cgo http://other.invalid:{p}/go-denied; ./go-fetch-static http://203.0.113.7:{p}/go-denied other.invalid:{p}; true");
            allowed.extend(["/go-cgo", "/go-static"]);
            // Go's own resolver asks the nameserver of /etc/resolv.conf over UDP, or over TCP only
            // where that file says `options use-vc`: the sandbox's file at Full; at Standard the
            // host's, and the command has no UDP there (the C library is told `use-vc` by
            // RES_OPTIONS, which Go's own resolver does not read). So a pure-Go client resolves
            // names itself at Full only (documented in docs/network.md); by address, and with
            // the proxy variables (Go's default transport), it works at every level.
            if suite_level(&w) == "full" {
                allowed.push("/go-static-by-name");
            }
        }
        Ok(false) => eprintln!("SKIP {name} (Go part): go is not installed"),
        Err(e) => panic!("building the Go clients: {e}"),
    }
    let o = allowlisted(&w, &["--allow-domain", "localhost", "--json"], &script);
    let v = parse_one_json(&o);
    let out = v["stdout"].as_str().unwrap_or_default();
    assert_eq!(out.matches("upstream-page").count(), allowed.len(), "{}", o.describe());
    assert_eq!(up.paths(), allowed, "{}", o.describe());
    let captured: Vec<(String, bool)> = v["network"].as_array().into_iter().flatten().filter(|e| e["via"] == "captured").map(|e| (e["host"].as_str().unwrap_or_default().to_string(), e["allowed"] == true)).collect();
    assert_eq!(captured.iter().filter(|(h, a)| h == "localhost" && *a).count(), allowed.len(), "{captured:?}");
    assert!(captured.iter().any(|(h, a)| h == "other.invalid" && !*a), "{captured:?}");
}

#[test]
fn names_resolve_from_the_allowlist_alone_and_a_refused_one_is_reported() {
    let name = "names_resolve_from_the_allowlist_alone_and_a_refused_one_is_reported";
    let w = World::new();
    if !full_or_skip(name, &w) || which("getent").is_none() {
        return;
    }
    config(&w, "");
    let script = "getent hosts pkg.example.com; echo \"rc=$?\"; getent hosts evil.example.com; echo \"rc=$?\"; getent hosts lgexfil.secret.invalid; echo \"rc=$?\"";
    let o = allowlisted(&w, &["--allow-domain", "**.example.com", "--deny-domain", "evil.example.com", "--json"], script);
    let v = parse_one_json(&o);
    let out = v["stdout"].as_str().unwrap_or_default();
    let dns: Vec<(String, bool, String)> = v["network"].as_array().into_iter().flatten().filter(|e| e["via"] == "dns")
        .map(|e| (e["host"].as_str().unwrap_or_default().to_string(), e["allowed"] == true, e["rule"].as_str().unwrap_or_default().to_string())).collect();
    // No name leaves the sandbox: refused names do not resolve, whatever the host's resolver
    // knows; the reason is the runner's record.
    assert!(out.contains("rc=2\n") && !out.contains("rc=0\nrc=0\n") && out.ends_with("rc=2\n"), "{}", o.describe());
    // The runner's DNS stub (at Full over UDP in the sandbox's own network namespace; at
    // Standard, where the command has no UDP, over TCP: `RES_OPTIONS=use-vc`, the connect to the
    // host's resolver captured to the stub): an allowed name gets its own address in
    // 198.18.0.0/15, which the runner captures to the proxy; the others are refused and recorded
    // with the rule.
    assert!(out.starts_with("198.18.0.1 ") && out.contains("pkg.example.com\nrc=0\nrc=2\nrc=2"), "{}", o.describe());
    assert!(dns.iter().any(|(h, a, r)| h == "pkg.example.com" && *a && r.contains("answered 198.18.0.1, captured to the proxy")), "{dns:?}");
    assert!(dns.iter().any(|(h, a, r)| h == "pkg.example.com" && *a && r.contains("allow_domains **.example.com")), "{dns:?}");
    assert!(dns.iter().any(|(h, a, r)| h == "evil.example.com" && !*a && r.contains("deny_domains evil.example.com")), "{dns:?}");
    assert!(dns.iter().any(|(h, a, _)| h == "lgexfil.secret.invalid" && !*a), "{dns:?}");
    assert_eq!(dns.iter().filter(|(h, ..)| h == "pkg.example.com").count(), 1, "the first answer per name only: {dns:?}");
}

/// A host-side static file server on 127.0.0.1 (HTTP/1.0, one request per connection) that
/// records the path of every request that reached it.
fn static_upstream(root: std::path::PathBuf) -> (u16, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = Arc::clone(&seen);
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let (s, root) = (Arc::clone(&s), root.clone());
            std::thread::spawn(move || {
                let mut c = c;
                let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(10)));
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string();
                let path = line.split(' ').nth(1).unwrap_or("/").split('?').next().unwrap_or("/").to_string();
                s.lock().unwrap().push(path.clone());
                let mut file = root.join(path.trim_start_matches('/'));
                if file.is_dir() {
                    file = file.join("index.html");
                }
                let reply = match std::fs::read(&file) {
                    Ok(body) => {
                        let ty = match body.first() {
                            Some(b'{') => "application/json",
                            Some(b'<') => "text/html",
                            _ => "application/octet-stream",
                        };
                        let mut r = format!("HTTP/1.0 200 OK\r\nContent-Type: {ty}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len()).into_bytes();
                        r.extend_from_slice(&body);
                        r
                    }
                    Err(_) => b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
                };
                let _ = c.write_all(&reply);
            });
        }
    });
    (port, seen)
}

/// Runs `cmd` on the host (fixtures), panicking with its output when it fails.
fn host(cmd: &mut std::process::Command) {
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{cmd:?}: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
}

#[test]
fn git_pip_and_npm_fetch_through_the_proxy() {
    let name = "git_pip_and_npm_fetch_through_the_proxy";
    let w = World::new();
    if !full_or_skip(name, &w) {
        return;
    }
    let (Some(git), Some(py), Some(npm), Some(tar)) = (which("git"), python3(), which("npm"), which("tar")) else {
        skip(name, "needs git, a system python3, npm and tar");
        return;
    };
    let pip_ok = std::process::Command::new(py).args(["-m", "pip", "--version"]).output().is_ok_and(|o| o.status.success());
    if !pip_ok {
        skip(name, "the system python3 has no pip (python3-pip)");
        return;
    }
    // The upstream's files: a git repository served the dumb way, a PyPI simple index with one
    // wheel, an npm packument with one tarball.
    let www = w.outside.join("www");
    let src = w.outside.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("hello.txt"), "fetched-through-the-proxy\n").unwrap();
    host(std::process::Command::new(&git).args(["init", "-q"]).current_dir(&src));
    host(std::process::Command::new(&git).args(["add", "hello.txt"]).current_dir(&src));
    host(std::process::Command::new(&git).args(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one"]).current_dir(&src));
    host(std::process::Command::new(&git).args(["clone", "-q", "--bare"]).arg(&src).arg(www.join("repo.git")));
    host(std::process::Command::new(&git).args(["update-server-info"]).current_dir(www.join("repo.git")));
    std::fs::create_dir_all(www.join("simple/lgdemo")).unwrap();
    std::fs::create_dir_all(www.join("files")).unwrap();
    std::fs::write(www.join("simple/lgdemo/index.html"), "<!DOCTYPE html><html><body><a href=\"/files/lgdemo-1.0-py3-none-any.whl\">lgdemo-1.0-py3-none-any.whl</a></body></html>\n").unwrap();
    host(std::process::Command::new(py).args(["-c", "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1], 'w')\nz.writestr('lgdemo/__init__.py', '')\nz.writestr('lgdemo-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: lgdemo\\nVersion: 1.0\\n')\nz.writestr('lgdemo-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\nz.writestr('lgdemo-1.0.dist-info/RECORD', '')\nz.close()"]).arg(www.join("files/lgdemo-1.0-py3-none-any.whl")));
    let pkg = w.outside.join("npmsrc/package");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("package.json"), "{\"name\":\"lgdemo\",\"version\":\"1.0.0\"}\n").unwrap();
    host(std::process::Command::new(&tar).arg("czf").arg(www.join("files/lgdemo-1.0.0.tgz")).arg("-C").arg(w.outside.join("npmsrc")).arg("package"));
    let (p, seen) = static_upstream(www.clone());
    std::fs::create_dir_all(www.join("npm")).unwrap();
    std::fs::write(www.join("npm/lgdemo"), format!("{{\"name\":\"lgdemo\",\"dist-tags\":{{\"latest\":\"1.0.0\"}},\"versions\":{{\"1.0.0\":{{\"name\":\"lgdemo\",\"version\":\"1.0.0\",\"dist\":{{\"tarball\":\"http://localhost:{p}/files/lgdemo-1.0.0.tgz\"}}}}}}}}\n")).unwrap();
    config(&w, &format!("allow_ports = [{p}]\nallow_cidrs = [\"127.0.0.1/32\"]\n"));
    // The upstream is on loopback, which NO_PROXY names: the clients are told to use the proxy
    // for it too (the proxy still decides, by name, port and address).
    let script = format!(
        "export NO_PROXY= no_proxy= npm_config_noproxy= npm_config_cache=$PWD/.npm-cache npm_config_update_notifier=false; \
         git clone -q http://localhost:{p}/repo.git cloned && cat cloned/hello.txt && \
         {py} -m pip download -q --no-deps --no-cache-dir --disable-pip-version-check --index-url http://localhost:{p}/simple/ -d dl lgdemo && ls dl && \
         {npm} pack --silent --registry http://localhost:{p}/npm/ lgdemo && ls lgdemo-1.0.0.tgz",
        py = py.display(), npm = npm.display());
    let o = allowlisted(&w, &["--allow-domain", "localhost", "--json"], &script);
    let v = parse_one_json(&o);
    let out = v["stdout"].as_str().unwrap_or_default();
    assert_eq!(v["exit_code"], 0, "{}", o.describe());
    assert!(out.contains("fetched-through-the-proxy") && out.contains("lgdemo-1.0-py3-none-any.whl") && out.contains("lgdemo-1.0.0.tgz"), "{}", o.describe());
    // From outside: the files are in the workspace, each fetch reached the upstream, and every
    // connection was one of the proxy's allowed decisions.
    assert!(w.ws.join("cloned/hello.txt").is_file() && w.ws.join("dl/lgdemo-1.0-py3-none-any.whl").is_file() && w.ws.join("lgdemo-1.0.0.tgz").is_file());
    let seen = seen.lock().unwrap().clone();
    for path in ["/repo.git/info/refs", "/simple/lgdemo/", "/files/lgdemo-1.0-py3-none-any.whl", "/npm/lgdemo", "/files/lgdemo-1.0.0.tgz"] {
        assert!(seen.iter().any(|s| s == path), "{path} never reached the upstream: {seen:?}");
    }
    let net = v["network"].as_array().cloned().unwrap_or_default();
    let allowed = net.iter().filter(|e| e["allowed"] == true && e["via"] != "dns").count();
    assert!(allowed >= seen.len(), "{allowed} allowed proxy decisions for {} requests: {net:?}", seen.len());
}

#[test]
fn bad_network_flags_are_refused_and_nothing_runs() {
    let w = World::new();
    // Domains without the allowlist mode, and a bare wildcard, are refused. (Where the proxy
    // could be bypassed — no namespace and no runner answering connect — the plan refuses the
    // allowlist: `plan::tests::allowlist_holds_only_where_the_proxy_is_the_only_way_out`.)
    for flags in [vec!["--allow-domain", "example.com"], vec!["--network", "allowlist", "--allow-domain", "*"]] {
        let o = run(w.sandbox_cmd(&flags, &["touch ran"]), "bad network flags");
        assert_eq!(o.code(), Some(125), "{flags:?}{}", o.describe());
        assert!(!w.ws.join("ran").exists());
    }
}

/// A TLS ClientHello carrying `name` as its server name (none: no server name).
fn client_hello(name: Option<&str>) -> Vec<u8> {
    localgpt_sandbox::network::client_hello(name)
}

#[test]
fn the_audit_log_has_whole_lines_for_start_each_decision_and_end_under_concurrent_runs() {
    let name = "the_audit_log_has_whole_lines_for_start_each_decision_and_end_under_concurrent_runs";
    let w = World::new();
    if !full_or_skip(name, &w) {
        return;
    }
    let up = Upstream::start(0).unwrap();
    let p = up.port;
    config(&w, &format!("allow_ports = [{p}]\nallow_cidrs = [\"127.0.0.1/32\"]\n"));
    let log = w.outside.join("audit.jsonl");
    let log_s = log.display().to_string();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let o = allowlisted(&w, &["--allow-domain", "localhost", "--audit-log", &log_s], &format!(
                    "curl -sS --noproxy '' http://localhost:{p}/; curl -sS --noproxy '' http://denied.invalid:{p}/ >/dev/null"));
                assert_eq!(o.code(), Some(0), "{}", o.describe());
            });
        }
    });
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    let count = |ev: &str| lines.iter().filter(|v| v["event"] == ev).count();
    assert_eq!((count("start"), count("network"), count("end")), (4, 8, 4), "{text}");
    let allowed = lines.iter().filter(|v| v["event"] == "network" && v["allowed"] == true).count();
    assert_eq!(allowed, 4, "{text}");
    assert!(lines.iter().filter(|v| v["event"] == "network" && v["allowed"] == true).all(|v| v["address"] == "127.0.0.1" && v["bytes_down"].as_u64() > Some(0)));
    assert!(lines.iter().filter(|v| v["event"] == "start").all(|v| v["level"] == suite_level(&w).as_str() && v["policy_digest"].as_str().is_some_and(|d| d.starts_with("fnv1a64:"))));
    assert_eq!(up.count(), 4);
    // An audit log the command could write is refused, however it is spelled (`..`, a link to
    // the workspace): nothing runs.
    std::os::unix::fs::symlink(&w.ws, w.outside.join("ws-link")).unwrap();
    for inside in [w.ws.join("audit.jsonl"), w.outside.join("../ws/audit.jsonl"), w.outside.join("ws-link/audit.jsonl")] {
        let o = run(w.sandbox_cmd(&["--audit-log", &inside.display().to_string()], &["touch ran"]), "audit log in the workspace");
        assert_eq!(o.code(), Some(125), "{}{}", inside.display(), o.describe());
        assert!(!w.ws.join("ran").exists());
    }
}
