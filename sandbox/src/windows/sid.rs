//! Security identifiers the Windows plan names (pure): the per-workspace capability SID and the
//! well-known SIDs, as SDDL strings.
//!
//! A capability SID (`S-1-15-3-…`) is a SID no account and no group has: it is present in a token
//! only when the token is made with it (here, as a *restricting* SID of the command's restricted
//! token). An ACE for it therefore grants or denies nothing to any other process. Ours is
//! `S-1-15-3-1024-` followed by the SHA-256 of `localgpt-sandbox:` + the workspace's canonical
//! path (upper-cased, as Windows compares paths), read as eight little-endian 32-bit
//! sub-authorities: the same shape as the SIDs `DeriveCapabilitySidsFromName` makes, distinct for
//! every workspace, and the same for every run of one (so its ACEs can be shared by concurrent
//! runs).

/// Everyone (`S-1-1-0`).
pub const EVERYONE: &str = "S-1-1-0";
/// The Low mandatory level (`S-1-16-4096`; SDDL `LW`).
pub const LOW_INTEGRITY: &str = "S-1-16-4096";
/// The Medium mandatory level (`S-1-16-8192`; SDDL `ME`).
pub const MEDIUM_INTEGRITY: &str = "S-1-16-8192";

/// The capability SID of `workspace` (see the module docs).
#[must_use]
pub fn capability_sid(workspace: &str) -> String {
    let name: String = format!("localgpt-sandbox:{workspace}").to_uppercase();
    let digest = sha256(name.as_bytes());
    let mut s = String::from("S-1-15-3-1024");
    for chunk in digest.chunks_exact(4) {
        let v = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        s.push_str(&format!("-{v}"));
    }
    s
}

/// Whether `s` is a well-formed SID string (`S-1-<authority>-<sub>…`, at most 15
/// sub-authorities, each a 32-bit number).
#[must_use]
pub fn is_sid(s: &str) -> bool {
    let mut parts = s.split('-');
    if parts.next() != Some("S") || parts.next() != Some("1") {
        return false;
    }
    let rest: Vec<&str> = parts.collect();
    !rest.is_empty()
        && rest.len() <= 16
        && rest[0].parse::<u64>().is_ok_and(|a| a < 1 << 48)
        && rest[1..].iter().all(|p| !p.is_empty() && p.parse::<u32>().is_ok())
}

/// SHA-256 (FIPS 180-4) of `data`.
#[must_use]
pub fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5, 0xd807_aa98, 0x1283_5b01,
        0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174, 0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc,
        0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da, 0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147,
        0x06ca_6351, 0x1429_2967, 0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070, 0x19a4_c116, 0x1e37_6c08,
        0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3, 0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208,
        0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ];
    let mut h: [u32; 8] = [0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19];
    let mut msg = data.to_vec();
    let bits = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bits.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh.wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, v) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(v);
        }
    }
    let mut out = [0u8; 32];
    for (i, v) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&v.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn sha256_matches_the_fips_vectors() {
        assert_eq!(hex(&sha256(b"")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(hex(&sha256(b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            hex(&sha256(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        assert_eq!(hex(&sha256(&[b'a'; 1000])), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
    }

    #[test]
    fn capability_sids_are_per_workspace_and_case_blind() {
        let a = capability_sid(r"C:\Users\me\project");
        assert!(is_sid(&a) && a.starts_with("S-1-15-3-1024-"), "{a}");
        assert_eq!(a.split('-').count(), 13, "{a}");
        assert_eq!(a, capability_sid(r"c:\users\ME\Project"));
        assert_ne!(a, capability_sid(r"C:\Users\me\other"));
        assert!(!is_sid("S-1-") && !is_sid("X-1-5") && !is_sid("S-1-5-x") && is_sid(EVERYONE));
    }
}
