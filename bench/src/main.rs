//! `localgpt-latency`: the p99 latency tool of the Linux backend (see [`latency`]'s docs). On
//! other systems it says so and exits 2.

#[cfg(target_os = "linux")]
mod latency;

fn main() {
    #[cfg(target_os = "linux")]
    latency::main();
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("localgpt-latency measures the Linux backend; there is nothing to measure on {}", std::env::consts::OS);
        std::process::exit(2);
    }
}
