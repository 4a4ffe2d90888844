//! Random bytes from the kernel, for names that must not be guessable (staging and scratch
//! directories, pending-change ids).

/// Fills `buf` with random bytes; `false` when the kernel could not.
pub fn fill(buf: &mut [u8]) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getrandom writes at most `buf.len()` bytes into it.
        unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) == buf.len() as isize }
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        // SAFETY: arc4random_buf fills the buffer; it cannot fail.
        unsafe { libc::arc4random_buf(buf.as_mut_ptr().cast(), buf.len()) };
        true
    }
    #[cfg(windows)]
    {
        use windows_sys::Win32::Security::Cryptography::{BCryptGenRandom, BCRYPT_USE_SYSTEM_PREFERRED_RNG};
        // The system's generator fills at most u32::MAX bytes a call; the ids here are a few.
        let Ok(len) = u32::try_from(buf.len()) else { return false };
        // SAFETY: the system generator (no algorithm handle) writes `len` bytes into `buf`.
        unsafe { BCryptGenRandom(std::ptr::null_mut(), buf.as_mut_ptr(), len, BCRYPT_USE_SYSTEM_PREFERRED_RNG) == 0 }
    }
}
