//! Names no other test uses, for tests on the shared clusters ([`crate::Clusters::shared`]):
//! every test of a run writes to the same two brokers at once, so each names its topics,
//! consumer groups, transactional ids and cluster aliases with an id of its own. strait's and
//! MM2's internal topics are named by cluster alias (`<alias>.checkpoints.internal`,
//! `mm2-offset-syncs.<alias>.internal`, `strait-offset-map.<alias>.internal`, remote topics
//! `<alias>.<topic>`), so a test whose aliases are its own has internal topics of its own too.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A test's own names: each is the base name the test would use alone, with an id unique to
/// this value (the process id, the time and a counter) after it.
///
/// ```
/// let names = strait_testkit::Names::new();
/// let orders = names.topic("orders"); // e.g. "orders-3f9a1c07"
/// assert!(orders.starts_with("orders-"));
/// assert_ne!(orders, strait_testkit::Names::new().topic("orders"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    id: String,
}

impl Default for Names {
    fn default() -> Self {
        Names::new()
    }
}

impl Names {
    /// A new id: eight hexadecimal digits mixed from the process id, the clock and a counter.
    pub fn new() -> Names {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let n = u64::from(COUNTER.fetch_add(1, Ordering::Relaxed));
        let pid = u64::from(std::process::id());
        // A 64-bit mix (splitmix64's finaliser) of the three, folded to 32 bits.
        let mut x = nanos ^ (pid << 32) ^ (n << 48) ^ n;
        x ^= x >> 30;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x ^= x >> 27;
        x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        Names {
            id: format!("{:08x}", (x ^ (x >> 32)) as u32),
        }
    }

    /// The id itself (eight hexadecimal digits).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A topic name: `<base>-<id>`.
    pub fn topic(&self, base: &str) -> String {
        format!("{base}-{}", self.id)
    }

    /// A consumer group id: `<base>-<id>`.
    pub fn group(&self, base: &str) -> String {
        format!("{base}-{}", self.id)
    }

    /// A cluster alias for an MM2 file: `<base><id>` (letters and digits only, so it is a valid
    /// alias, property key part and topic name part).
    pub fn alias(&self, base: &str) -> String {
        format!("{base}{}", self.id)
    }

    /// A regular expression matching every topic or group named by [`Names::topic`] or
    /// [`Names::group`], for an MM2 `topics` or `groups` filter.
    pub fn pattern(&self) -> String {
        format!(".*-{}", self.id)
    }
}
