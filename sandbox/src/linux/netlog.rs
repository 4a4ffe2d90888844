//! The network decisions of one run (the proxy's, the captured connections', the DNS stub's):
//! each [`NetEvent`] goes to the run's list, which the result carries, and to the audit log.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::network::NetEvent;

/// Decisions kept per run (the rest are counted in a last event).
const MAX_EVENTS: usize = 10_000;

/// The decisions of one run, shared by the proxy's threads, and the audit log they also go to.
#[derive(Clone)]
pub(crate) struct Events {
    pub(crate) list: Arc<Mutex<Vec<NetEvent>>>,
    pub(crate) audit: Option<Arc<crate::audit::Audit>>,
    /// Connections of this run whose thread has not finished (and recorded) yet: the runner
    /// waits for them, bounded, before it reads `list` ([`Events::settle`]).
    pub(crate) inflight: Arc<std::sync::atomic::AtomicUsize>,
}

impl Events {
    /// The decisions of one run (`list`), going to `audit` too.
    pub(crate) fn new(list: &Arc<Mutex<Vec<NetEvent>>>, audit: Option<&Arc<crate::audit::Audit>>, inflight: &Arc<std::sync::atomic::AtomicUsize>) -> Events {
        Events { list: Arc::clone(list), audit: audit.cloned(), inflight: Arc::clone(inflight) }
    }

    /// Waits until every connection of the run has been recorded, at most `limit` (once the
    /// command's tree is gone its connections close, so their threads end at once; a decision
    /// still open after that is not in the result, as the field's documentation says).
    pub(crate) fn settle(inflight: &std::sync::atomic::AtomicUsize, limit: Duration) {
        let until = Instant::now() + limit;
        while inflight.load(std::sync::atomic::Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Records `ev`, decided since `start`.
pub(crate) fn record(events: &Events, mut ev: NetEvent, start: Instant) {
    ev.duration_ms = start.elapsed().as_millis() as u64;
    if let Some(a) = &events.audit {
        a.event("network", serde_json::to_value(&ev).unwrap_or_default());
    }
    let mut v = events.list.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if v.len() < MAX_EVENTS {
        v.push(ev);
    } else if v.len() == MAX_EVENTS {
        v.push(NetEvent { via: "-".into(), host: "-".into(), port: 0, address: None, allowed: false, rule: format!("more than {MAX_EVENTS} decisions: the rest are not listed"), refusal: None, bytes_up: 0, bytes_down: 0, duration_ms: 0 });
    }
}

