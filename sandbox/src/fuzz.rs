//! Fuzz targets of the parsers that read what a sandboxed command wrote or sent (issue 55, item
//! 5; issue 58, item 2): git's config, a git index, rebase to-do lists, a linked worktree's
//! `gitdir` file, the nested walk's records and the walk service's wire,
//! and the network stubs (DNS questions, SOCKS5 requests, TLS ClientHellos; the HTTP proxy's
//! parser has its own target beside it, `linux::proxy::tests::fuzz_the_http_head_parser`).
//!
//! Each target mutates valid seeds (bytes flipped, inserted, deleted, duplicated, spliced,
//! cut) with a fixed-seed generator, so a failure reproduces; nothing may panic, and each checks
//! a property of what it parsed. Where a reference implementation exists the target is
//! differential: the git index's gitlinks against `git ls-files --stage`, the config parser
//! against `git config --list` on mutated files (beside the generated ones of
//! `gitoracle::tests`). These run in `ci/test` for a few seconds; `LGCI_FUZZ_CASES` raises the
//! count (`ci/nightly` runs 200 000 per target) and `LGCI_FUZZ_SEED` changes the seed. They are
//! plain tests, not `cargo fuzz` targets: the toolchain here is stable, without the sanitizers
//! cargo-fuzz needs, and a mutation fuzzer on stable finds the panics and disagreements these
//! parsers can have (none of them is `unsafe`).

use std::path::{Path, PathBuf};

/// A small xorshift generator (fixed seed: a failure reproduces).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new() -> Rng {
        Rng(std::env::var("LGCI_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x2545_f491_4f6c_dd1d) | 1)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }

    /// `seed` with one to four random mutations.
    pub(crate) fn mutate(&mut self, seed: &[u8]) -> Vec<u8> {
        let mut b = seed.to_vec();
        for _ in 0..self.below(4) + 1 {
            let at = self.below(b.len() + 1);
            match self.below(6) {
                0 if !b.is_empty() => {
                    let i = at.min(b.len() - 1);
                    b[i] ^= 1 << self.below(8);
                }
                1 => b.insert(at, self.below(256) as u8),
                2 if at < b.len() => {
                    let n = self.below(8).min(b.len() - at);
                    b.drain(at..at + n);
                }
                3 if at < b.len() => {
                    let n = self.below(16).min(b.len() - at);
                    let piece = b[at..at + n].to_vec();
                    let to = self.below(b.len() + 1);
                    b.splice(to..to, piece);
                }
                4 => b.truncate(at),
                _ => {
                    const BYTES: &[u8] = b"\0\r\n\t\x0b\x0c \"\\#;=[].!\xff\x80";
                    b.insert(at, BYTES[self.below(BYTES.len())]);
                }
            }
        }
        b
    }
}

/// How many cases each target runs.
pub(crate) fn cases(default: usize) -> usize {
    std::env::var("LGCI_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = std::process::Command::new("git").current_dir(dir).args(args).env("GIT_CONFIG_NOSYSTEM", "1").env("GIT_CONFIG_GLOBAL", "/dev/null").output().ok()?;
    out.status.success().then_some(out.stdout)
}

/// A repository with files and two gitlinks, made by git itself: its index, and the gitlinks
/// `git ls-files --stage` lists.
fn index_seed() -> Option<(Vec<u8>, Vec<PathBuf>, tempfile::TempDir)> {
    let d = crate::test_dir();
    let r = d.path();
    git(r, &["init", "-q"])?;
    std::fs::create_dir_all(r.join("src/deep")).ok()?;
    for f in ["a.txt", "src/b.rs", "src/deep/c"] {
        std::fs::write(r.join(f), f).ok()?;
    }
    git(r, &["add", "."])?;
    for (sha, p) in [("1111111111111111111111111111111111111111", "vendor/lib"), ("2222222222222222222222222222222222222222", "sub")] {
        git(r, &["update-index", "--add", "--cacheinfo", &format!("160000,{sha},{p}")])?;
    }
    let listed = git(r, &["ls-files", "--stage"])?;
    let links = String::from_utf8(listed).ok()?.lines().filter(|l| l.starts_with("160000 ")).filter_map(|l| l.split_once('\t').map(|(_, p)| PathBuf::from(p))).collect();
    let index = std::fs::read(r.join(".git/index")).ok()?;
    Some((index, links, d))
}

#[test]
fn fuzz_the_git_index_parser_against_git() {
    let Some((seed, links, _d)) = index_seed() else {
        eprintln!("skipped: git cannot make the seed index here");
        return;
    };
    // Differential on the seed: the gitlinks are the ones git lists.
    let (mine, _) = crate::guard::gitindex::parse(&seed).expect("git's own index parses");
    let mut mine: Vec<PathBuf> = mine.iter().map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned())).collect();
    mine.sort();
    let mut links = links;
    links.sort();
    assert_eq!(mine, links);
    let mut rng = Rng::new();
    for _ in 0..cases(20_000) {
        let b = rng.mutate(&seed);
        // (The parser reads names as the index holds them, checksum unchecked: an index git
        // would refuse as corrupt can only add gitlinks, which protects more.) Every name the
        // review then uses is a relative path of plain components, inside the repository.
        if let Ok((paths, _)) = crate::guard::gitindex::parse(&b) {
            for p in paths.iter().filter_map(|p| crate::guard::gitindex::rel_path(p)) {
                assert!(p.components().all(|c| matches!(c, std::path::Component::Normal(_))), "{p:?}");
            }
        }
    }
}

#[test]
fn fuzz_the_config_parser_and_compare_with_git() {
    const SEEDS: &[&[u8]] = &[
        b"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n[remote \"origin\"]\n\turl = https://h/x.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
        b"[alias]\n\tst = \"status \\\"-sb\\\"\" ; c\n\tco = \\\n checkout\n[branch.Main]\n\tremote = origin\n",
        b"\xef\xbb\xbf[core]\r\n\tfsmonitor = \"a\\tb\"\r\n[sec \"s\\\\u\"] k\n",
    ];
    let with_git = crate::guard::gitoracle::trusted_git().is_some();
    let mut rng = Rng::new();
    let mut compared = 0usize;
    for i in 0..cases(20_000) {
        let pick = rng.below(SEEDS.len());
        let b = rng.mutate(SEEDS[pick]);
        let ours = crate::guard::gitconfig::parse_bytes(&b);
        // Every 20th case (a process each) is compared with git, when the file is UTF-8 (git's
        // list of another file is not).
        if with_git && i % 20 == 0 && std::str::from_utf8(&b).is_ok() && !b.contains(&0) {
            let git = crate::guard::gitoracle::config_list(&b);
            let ours: Result<crate::guard::gitoracle::ConfigList, _> = ours.map(|c| c.entries.iter().map(|e| (e.name(), e.value.clone())).collect());
            match (&ours, &git) {
                (Ok(a), Ok(g)) => assert_eq!(a, g, "{:?}", String::from_utf8_lossy(&b)),
                (Err(_), Err(_)) => {}
                _ => panic!("{:?}\n ours: {ours:?}\n git: {git:?}", String::from_utf8_lossy(&b)),
            }
            compared += 1;
        }
    }
    eprintln!("{compared} mutated configs compared with git");
}

/// The package.json review's reader ([`crate::guard::jsonkeys`]) against Node's `JSON.parse`
/// (what lint-staged and husky read the file with): a file it reads must be read by Node too,
/// with the same values of the keys a hook reads (so that equal here is equal there). One that it
/// refuses and Node reads is only pending (counted). Without Node, the reader alone.
#[test]
fn fuzz_the_package_json_review_against_node() {
    const SEEDS: &[&[u8]] = &[
        br#"{"name":"x","version":"1.0.0","scripts":{"test":"jest"},"lint-staged":{"*.{js,ts}":["eslint --fix","prettier -w"]},"husky":{"hooks":{"pre-commit":"lint-staged"}}}"#,
        b"{\n  \"lint\\u002dstaged\": {\"*\": \"a\\\\b\\\"c\\u00e9\"},\n  \"n\": [1, -0, 1.5e3, 9007199254740993, null, true]\n}\n",
        br#"{"husky":{"hooks":{}},"husky":{"hooks":{"pre-commit":"x"}},"__proto__":{"lint-staged":{"*":"y"}}}"#,
    ];
    const KEYS: [&str; 2] = ["lint-staged", "husky"];
    let node = ["/usr/bin/node", "/usr/local/bin/node"].into_iter().find(|n| Path::new(n).exists());
    let mut rng = Rng::new();
    let dir = crate::test_dir();
    let mut ours = Vec::new();
    for i in 0..cases(3_000) {
        let pick = rng.below(SEEDS.len());
        let b = rng.mutate(SEEDS[pick]);
        let got = crate::guard::jsonkeys::read_object(&b).map(|m| KEYS.map(|k| m.get(k).cloned()));
        if got.is_ok() {
            // Equal to itself, key by key (nothing in it compares unequal to its own reading).
            assert_eq!(crate::guard::jsonkeys::keys_kept(Some(&b), Some(&b), &KEYS.map(String::from)), Ok(()));
        }
        if node.is_some() {
            std::fs::write(dir.path().join(i.to_string()), &b).unwrap();
        }
        ours.push((b, got));
    }
    let Some(node) = node else {
        eprintln!("no node: the reader alone");
        return;
    };
    // One Node for every case: a line each, the keys' values (JSON.stringify of an array, an
    // absent key as null) or ERR.
    let script = format!(
        "const fs=require('fs');for(let i=0;i<{n};i++){{let o;try{{const p=JSON.parse(fs.readFileSync('{d}/'+i,'utf8'));o=(p!==null&&typeof p==='object'&&!Array.isArray(p))?JSON.stringify([{keys}].map(k=>Object.prototype.hasOwnProperty.call(p,k)?p[k]:null)):'NOTOBJ'}}catch(e){{o='ERR'}}console.log(o)}}",
        n = ours.len(),
        d = dir.path().display(),
        keys = KEYS.map(|k| format!("'{k}'")).join(",")
    );
    let out = std::process::Command::new(node).args(["-e", &script]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), ours.len());
    // Numbers as Node holds them (doubles): `1` and `1.0` are one value there.
    fn canon(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Number(n) => n.as_f64().and_then(serde_json::Number::from_f64).map_or(serde_json::Value::Null, serde_json::Value::Number),
            serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(canon).collect()),
            serde_json::Value::Object(m) => serde_json::Value::Object(m.iter().map(|(k, v)| (k.clone(), canon(v))).collect()),
            other => other.clone(),
        }
    }
    let (mut refused_read_by_node, mut read) = (0usize, 0usize);
    for ((b, got), line) in ours.iter().zip(lines) {
        match got {
            Ok(values) => {
                read += 1;
                assert!(line != "ERR" && line != "NOTOBJ", "read here, not by Node: {:?}", String::from_utf8_lossy(b));
                let theirs: Vec<serde_json::Value> = serde_json::from_str(line).unwrap();
                let mine: Vec<serde_json::Value> = values.iter().map(|v| v.as_ref().map_or(serde_json::Value::Null, canon)).collect();
                let theirs: Vec<serde_json::Value> = theirs.iter().map(canon).collect();
                assert_eq!(mine, theirs, "{:?}", String::from_utf8_lossy(b));
            }
            Err(_) if line != "ERR" && line != "NOTOBJ" => refused_read_by_node += 1,
            Err(_) => {}
        }
    }
    eprintln!("{} cases compared with Node: {read} read by both, the same; {refused_read_by_node} refused here that Node reads (pending: duplicates, lone surrogates)", ours.len());
}

#[test]
fn fuzz_the_todo_reader() {
    const SEEDS: &[&[u8]] = &[b"pick abc subject\nfixup -C def x\n# exec id\nlabel onto\n", b"exec make\n", b"  reword 123 x\r\nbreak\n"];
    let mut rng = Rng::new();
    for _ in 0..cases(50_000) {
        let pick = rng.below(SEEDS.len());
        let b = rng.mutate(SEEDS[pick]);
        if crate::guard::review::todo_is_plain(&b) {
            // What passes has no line git would read as exec or x (git skips spaces and tabs
            // before the command, which ends at any blank or the line's end).
            for line in b.split(|&c| c == b'\n') {
                let l: Vec<u8> = line.iter().copied().skip_while(|c| *c == b' ' || *c == b'\t').collect();
                let word: Vec<u8> = l.iter().copied().take_while(|c| !c.is_ascii_whitespace()).collect();
                assert!(word != b"exec" && word != b"x", "{:?}", String::from_utf8_lossy(&b));
            }
        }
    }
}

#[test]
fn fuzz_the_worktree_gitdir_reader() {
    const SEEDS: &[&[u8]] = &[b"/home/u/ws/wt/.git\n", b"/w/.git", b"../wt/.git\n"];
    let mut rng = Rng::new();
    for _ in 0..cases(50_000) {
        let pick = rng.below(SEEDS.len());
        let b = rng.mutate(SEEDS[pick]);
        if let Some(p) = crate::guard::review::worktree_gitdir_target(&b) {
            // What passes is an absolute path of a `.git`, written out: its text is the input's
            // (one trailing newline at most), and normalising it changes nothing.
            let t = p.to_str().expect("UTF-8");
            assert!(b == t.as_bytes() || b == [t.as_bytes(), b"\n"].concat(), "{:?}", String::from_utf8_lossy(&b));
            assert!(p.is_absolute() && p.file_name().is_some_and(|n| n == ".git"), "{t}");
            assert_eq!(crate::plan::resolve::normalize(&p).to_str(), Some(t), "{t}");
        }
    }
}

/// `git ls-files -z` output as the review reads it (`guard::gitoracle::parse_listed`; the
/// names in it are the command's): a mutated listing is refused, or reads as paths strictly
/// inside the worktree, each once.
#[cfg(unix)]
#[test]
fn fuzz_the_listed_paths_reader() {
    const SEEDS: &[&[u8]] = &[b"package.json\0a/b/.lintstagedrc.json\0", b"build/x/lint-staged.config.js\0", b"a\0"];
    let w = Path::new("/w/t");
    let mut rng = Rng::new();
    for _ in 0..cases(50_000) {
        let pick = rng.below(SEEDS.len());
        let b = rng.mutate(SEEDS[pick]);
        if let Ok(files) = crate::guard::gitoracle::parse_listed(w, &b) {
            for (i, f) in files.iter().enumerate() {
                assert!(f.starts_with(w) && f != w && crate::plan::resolve::normalize(f) == *f, "{f:?} from {:?}", String::from_utf8_lossy(&b));
                assert!(!files[..i].contains(f), "{f:?} twice");
            }
        }
    }
}

/// The walk service's wire (`guard::walkd`): a mutated request or answer decodes to nothing, or
/// to one that encodes back to exactly those bytes (no two readings of one message), its paths
/// absolute and without a NUL.
#[cfg(target_os = "linux")]
#[test]
fn fuzz_the_walk_service_wire() {
    use crate::guard::walkd::{Answer, Request};
    let req = Request::Walk { root: "/w/ws".into(), names: vec![".git".into(), ".vscode".into()], budget: 50_000 }.encode();
    let after = Request::After { root: "/w/ws".into(), names: vec![".git".into()], token: 3 }.encode();
    let list = Request::List { root: "/w/ws".into(), names: vec!["package.json".into()] }.encode();
    let ans = Answer::encode(Some(&Answer { token: 4, found: vec![("/w/ws/a/.git".into(), true)], repos: vec!["/w/ws/r".into()], stopped: Some("/w/ws/big".into()), from_records: 2, looked_at: 3 }));
    let mut rng = Rng::new();
    for i in 0..cases(30_000) {
        let seed = [&req, &after, &list, &ans][i % 4];
        let b = rng.mutate(seed);
        if let Some(r) = Request::decode(&b) {
            assert_eq!(r.encode(), b, "{r:?}");
        }
        if let Some(a) = Answer::decode(&b) {
            assert_eq!(Answer::encode(a.as_ref()), b, "{a:?}");
            for p in a.iter().flat_map(|a| a.found.iter().map(|f| &f.0).chain(&a.repos).chain(&a.stopped)) {
                assert!(p.is_absolute() && !p.as_os_str().as_encoded_bytes().contains(&0), "{p:?}");
            }
        }
    }
}

#[test]
fn fuzz_the_walk_records() {
    use crate::guard::nested::{Entry, Listing, WalkCache};
    let root = Path::new("/w/ws");
    let names = [".git", ".vscode"];
    let listing = |p: &str, depth, entries: &[(&str, bool)]| Listing {
        path: root.join(p),
        depth,
        id: (7, 100 + depth as u64),
        ctime_ns: Some(1_000_000_000),
        read_ns: 9_000_000_000,
        entries: entries.iter().map(|(n, d)| Entry { name: (*n).into(), dir: *d }).collect(),
    };
    let ls = [listing("", 0, &[("a", true), (".git", true)]), listing("a", 1, &[("HEAD", false), ("objects", true), ("refs", true), (".vscode", true)])];
    let seed = WalkCache::encode(root, &names, ls.iter()).expect("encodes");
    assert!(WalkCache::decode(root, &names, &seed).is_some(), "round trip");
    let mut rng = Rng::new();
    for _ in 0..cases(50_000) {
        let b = rng.mutate(&seed);
        // Whatever a mutated record decodes to stays below the root: each directory's path is
        // the root and exactly `depth` plain names, each entry a plain name.
        if let Some(c) = WalkCache::decode(root, &names, &b) {
            for l in c.listings() {
                let below = l.path.strip_prefix(root).expect("below the root");
                assert_eq!(below.components().count(), l.depth, "{:?}", l.path);
                assert!(below.components().all(|c| matches!(c, std::path::Component::Normal(_))), "{:?}", l.path);
                assert!(l.entries.iter().all(|e| !e.name.is_empty() && !e.name.as_encoded_bytes().contains(&b'/') && e.name != ".." && e.name != "."), "{:?}", l.entries);
            }
        }
    }
}

#[cfg(target_os = "linux")]
#[test]
fn fuzz_the_dns_stub() {
    let allow = crate::network::Allowlist::new(&["a.test".into()], &[], &[443], &[]).expect("allowlist");
    // A query for a.test, type A, class IN.
    let seed: &[u8] = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01a\x04test\x00\x00\x01\x00\x01";
    // With and without the capture's addresses (which every allowed name may get).
    let capture = crate::linux::capture::Capture::default();
    let (r, q) = crate::linux::dns::reply(seed, &allow, None);
    assert!(r.is_some() && q.is_some());
    let mut rng = Rng::new();
    for _ in 0..cases(50_000) {
        let b = rng.mutate(seed);
        let capturing = (b.len() % 2 == 0).then_some(&capture);
        if let (Some(out), _) = crate::linux::dns::reply(&b, &allow, capturing) {
            // A reply is a response to this query: its id, the QR bit, a whole header.
            assert!(out.len() >= 12 && out[..2] == b[..2] && out[2] & 0x80 != 0, "{b:?}");
        }
    }
}

/// The client side of a SOCKS5 exchange: what the client sent, and what the proxy wrote back.
#[cfg(target_os = "linux")]
struct Duplex {
    input: std::io::Cursor<Vec<u8>>,
    output: Vec<u8>,
}

#[cfg(target_os = "linux")]
impl std::io::Read for Duplex {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.input.read(buf)
    }
}

#[cfg(target_os = "linux")]
impl std::io::Write for Duplex {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(target_os = "linux")]
#[test]
fn fuzz_the_socks5_reader() {
    const SEEDS: &[&[u8]] = &[
        b"\x05\x01\x00\x05\x01\x00\x03\x06a.test\x01\xbb",
        b"\x05\x02\x00\x02\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50",
        b"\x05\x01\x00\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x50",
    ];
    let mut rng = Rng::new();
    for _ in 0..cases(50_000) {
        let pick = rng.below(SEEDS.len());
        let b = rng.mutate(SEEDS[pick]);
        let mut d = Duplex { input: std::io::Cursor::new(b.clone()), output: Vec::new() };
        if let Some((host, _)) = crate::linux::proxy::socks5_host(&mut d) {
            // A name is at most 255 bytes (its length is one byte); an address is bracketed
            // (IPv6) or dotted (IPv4).
            assert!(host.len() <= 255 + 2, "{b:?}");
            // The proxy answered the method negotiation with exactly "no authentication".
            assert_eq!(&d.output[..2], &[5, 0], "{b:?}");
        }
    }
}

/// The naming of a captured connection (`proxy::opening_name`): a host it reads from mutated
/// hellos and requests is one the opening really carries (the hello's server name, httparse's one
/// `Host`), and the tunnel judge then passes the opening only as a hello or request naming it.
#[cfg(target_os = "linux")]
#[test]
fn fuzz_the_captured_opening() {
    let seeds = [crate::network::client_hello(Some("a.test")), b"GET /x HTTP/1.1\r\nHost: a.test:443\r\nAccept: */*\r\n\r\n".to_vec()];
    assert_eq!(crate::linux::proxy::opening_host(&seeds[0], 443).as_deref(), Some("a.test"));
    assert_eq!(crate::linux::proxy::opening_host(&seeds[1], 443).as_deref(), Some("a.test"));
    let mut rng = Rng::new();
    for i in 0..cases(50_000) {
        let b = rng.mutate(&seeds[i % 2]);
        let Some(h) = crate::linux::proxy::opening_host(&b, 443) else { continue };
        assert!(!h.is_empty(), "{b:?}");
        if b.first() == Some(&22) {
            let whole = b.get(3..5).map(|l| 5 + usize::from(u16::from_be_bytes([l[0], l[1]]))).and_then(|n| b.get(..n));
            assert_eq!(whole.and_then(crate::network::client_hello_sni).as_deref(), Some(h.as_str()), "{b:?}");
        } else {
            let mut headers = [httparse::EMPTY_HEADER; 128];
            let mut req = httparse::Request::new(&mut headers);
            assert!(matches!(req.parse(&b), Ok(httparse::Status::Complete(_))), "{b:?}");
            let hosts: Vec<&[u8]> = req.headers.iter().filter(|x| x.name.eq_ignore_ascii_case("host")).map(|x| x.value).collect();
            assert_eq!(hosts.len(), 1, "{b:?}");
            // The one Host is the name, with nothing after it but a port.
            let rest = std::str::from_utf8(hosts[0]).unwrap_or_default().trim().strip_prefix(h.as_str()).map(str::to_string);
            assert!(rest.is_some_and(|r| r.is_empty() || (r.starts_with(':') && r.len() > 1 && r[1..].bytes().all(|c| c.is_ascii_digit()))), "{b:?}");
        }
        let _ = crate::linux::proxy::opening_passes(&h, 443, &b);
    }
}

#[test]
fn fuzz_the_tls_client_hello_reader() {
    // A ClientHello with one cipher suite and a server name extension for a.test.
    let seed = crate::network::client_hello(Some("a.test"));
    assert_eq!(crate::network::client_hello_sni(&seed).as_deref(), Some("a.test"));
    let mut rng = Rng::new();
    for _ in 0..cases(50_000) {
        let b = rng.mutate(&seed);
        if let Some(n) = crate::network::client_hello_sni(&b) {
            assert!(n.len() <= b.len(), "{b:?}");
        }
        // As a tunnel's opening: it passes only when the hello names the tunnel's host.
        if crate::linux::proxy::opening_passes("a.test", 443, &b) {
            let whole = b.get(3..5).map(|l| 5 + usize::from(u16::from_be_bytes([l[0], l[1]]))).and_then(|n| b.get(..n));
            assert!(whole.and_then(crate::network::client_hello_sni).is_some_and(|n| n.eq_ignore_ascii_case("a.test") || n.eq_ignore_ascii_case("a.test.")), "{b:?}");
        }
    }
}

/// What a terminal's parser (vte, Alacritty's) reads in the screen filter's output: anything but
/// text, the C0 controls a screen uses and the sequences [`crate::text::screen`] allows is
/// recorded as a finding.
#[derive(Default)]
struct ScreenOracle {
    findings: Vec<String>,
    /// Sequences the terminal dispatched (each starts with one ESC in the output).
    dispatched: usize,
}

impl vte::Perform for ScreenOracle {
    fn print(&mut self, c: char) {
        if c.is_control() {
            self.findings.push(format!("printed control {c:?}"));
        }
    }

    fn execute(&mut self, byte: u8) {
        if !(0x07..=0x0f).contains(&byte) {
            self.findings.push(format!("executed {byte:#x}"));
        }
    }

    fn hook(&mut self, _: &vte::Params, _: &[u8], _: bool, action: char) {
        self.findings.push(format!("DCS {action:?}"));
    }

    fn osc_dispatch(&mut self, params: &[&[u8]], _: bool) {
        self.findings.push(format!("OSC {:?}", params.first().map(|p| String::from_utf8_lossy(p))));
    }

    fn csi_dispatch(&mut self, params: &vte::Params, intermediates: &[u8], _: bool, action: char) {
        self.dispatched += 1;
        let nums: Vec<u16> = params.iter().map(|p| p[0]).collect();
        let (marker, inter): (Vec<u8>, Vec<u8>) = intermediates.iter().partition(|b| b"<=>?".contains(b));
        // Requests that make a terminal answer, whatever their marker.
        let answers = matches!(action, 'n' | 'c' | 't' | 'x' | 'q' | 'y' | 'i') && inter != b" " || inter.contains(&b'$') || (action == 'u' && !marker.is_empty());
        let allowed = match (marker.as_slice(), inter.as_slice(), action) {
            ([], [], 'h' | 'l') => nums.iter().all(|n| *n == 4 || *n == 20),
            ([], [], a) => "@ABCDEFGHIJKLMPSTXZ`abdefgmrsu".contains(a),
            (b"?", [], 'h' | 'l' | 'r' | 's') => !nums.contains(&2),
            (b"?", [], 'J' | 'K') | (b">", [], 'm') | ([], b" ", 'q') | ([], b"!", 'p') => true,
            _ => false,
        };
        if answers || !allowed {
            self.findings.push(format!("CSI {marker:?} {nums:?} {inter:?} {action:?}"));
        }
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], _: bool, byte: u8) {
        self.dispatched += 1;
        let ok = match intermediates {
            [] => b"78=>DEHMNOc".contains(&byte),
            [b'(' | b')' | b'*' | b'+' | b'-' | b'.' | b'/'] => true,
            [b'#'] => b"34568".contains(&byte),
            [b'%'] => byte == b'@' || byte == b'G',
            _ => false,
        };
        if !ok {
            self.findings.push(format!("ESC {intermediates:?} {:?}", byte as char));
        }
    }
}

/// The screen filter's output as a terminal reads it (differential against vte): only text, the
/// allowed controls and allowed sequences, each ESC the start of one of them (none split or
/// swallowed differently), the same output in any chunking, and a fixed point (filtered again,
/// nothing changes).
#[test]
fn fuzz_the_screen_filter_against_a_terminal_parser() {
    const SEEDS: &[&[u8]] = &[
        b"\x1b[?1049h\x1b[?1h\x1b=\x1b[1;24r\x1b[H\x1b[2J~\r\n\x1b[7mfile.txt\x1b[m\x1b[24;1H\x1b[?25h\x1b[?1049l",
        b"top - 10:00\x1b[K\r\n\x1b(B\x1b[m\x1b[39;49m\x1b[1m  PID\x1b[m\x1b[?1000;1006h\x1b[?2004h\x1b[>4;2m",
        b"\x1b]52;c;ZXZpbA==\x07\x1b]0;t\x1b\\\x1bP+q544e\x1b\\\x1b[6n\x1b[21t\x1b[c\x1bZ\x05\xc2\x9b6n\x9d",
    ];
    const FRAGMENTS: &[&[u8]] = &[b"\x1b", b"\x1b[", b"\x1b[?", b"\x1b]", b"\x1bP", b"\x1b\\", b"\x07", b"\x18", b"\x1b(", b"\x1b#", b"\x1b[>", b"\x1b[ ", b";", b"$", b"\xc2\x9b", b"\xe2\x82"];
    fn run(chunks: &[&[u8]]) -> Vec<u8> {
        let mut f = crate::text::ScreenFilter::new();
        let mut out = Vec::new();
        for c in chunks {
            f.push(c, &mut out);
        }
        f.finish(&mut out);
        out
    }
    let mut rng = Rng::new();
    for _ in 0..cases(20_000) {
        let seed = SEEDS[rng.below(SEEDS.len())];
        let mut b = rng.mutate(seed);
        for _ in 0..rng.below(4) {
            let at = rng.below(b.len() + 1);
            let piece = FRAGMENTS[rng.below(FRAGMENTS.len())];
            b.splice(at..at, piece.iter().copied());
        }
        let out = run(&[&b]);
        let cut = rng.below(b.len() + 1);
        let cut2 = rng.below(b.len() + 1).max(cut);
        assert_eq!(run(&[&b[..cut], &b[cut..cut2], &b[cut2..]]), out, "chunking changed the output of {b:x?}");
        assert!(std::str::from_utf8(&out).is_ok(), "{b:x?}");
        let mut oracle = ScreenOracle::default();
        vte::Parser::new().advance(&mut oracle, &out);
        assert!(oracle.findings.is_empty(), "{:?} in {:x?} from {b:x?}", oracle.findings, String::from_utf8_lossy(&out));
        assert_eq!(oracle.dispatched, out.iter().filter(|c| **c == 0x1b).count(), "a sequence split or swallowed: {:x?}", String::from_utf8_lossy(&out));
        assert_eq!(run(&[&out]), out, "not a fixed point: {b:x?}");
    }
}
