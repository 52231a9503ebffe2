//! The benchmark records: a value of a fixed size that compresses about as well as typical
//! event data (field names and small numbers repeat, identifiers do not), a key, one header,
//! and a timestamp. Deterministic: record `i` of a workload is always the same bytes.

/// xorshift64*: fast, deterministic, good enough for payloads.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is replaced, xorshift cannot leave it).
    pub fn new(seed: u64) -> Self {
        Self(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

const FIELDS: [&str; 16] = [
    "user",
    "session",
    "event",
    "page",
    "referrer",
    "country",
    "device",
    "amount",
    "currency",
    "status",
    "latency_ms",
    "region",
    "item",
    "quantity",
    "campaign",
    "trace",
];
const WORDS: [&str; 24] = [
    "click",
    "view",
    "purchase",
    "login",
    "logout",
    "search",
    "add_to_cart",
    "checkout",
    "ok",
    "error",
    "retry",
    "mobile",
    "desktop",
    "tablet",
    "eu-west",
    "us-east",
    "ap-south",
    "EUR",
    "USD",
    "GBP",
    "home",
    "product",
    "cart",
    "account",
];
const HEX: &[u8; 16] = b"0123456789abcdef";

/// A value of exactly `size` bytes: `id=<index>;` then `field=value;` pairs, values being
/// words from a small vocabulary, numbers, or random hex identifiers (a third of the fields),
/// then padded. Compresses by about 2x with lz4 and 3x with zstd.
pub fn value(rng: &mut Rng, index: u64, size: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(size + 64);
    v.extend_from_slice(format!("id={index:012};").as_bytes());
    while v.len() < size {
        let field = FIELDS[rng.below(FIELDS.len() as u64) as usize];
        v.extend_from_slice(field.as_bytes());
        v.push(b'=');
        match rng.below(3) {
            0 => v.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes()),
            1 => v.extend_from_slice(rng.below(100_000).to_string().as_bytes()),
            _ => {
                for _ in 0..12 {
                    v.push(HEX[rng.below(16) as usize]);
                }
            }
        }
        v.push(b';');
    }
    v.truncate(size);
    v
}

/// The key of record `index`: one of a million users.
pub fn key(rng: &mut Rng) -> Vec<u8> {
    format!("user-{:07}", rng.below(1_000_000)).into_bytes()
}

/// The one header every record carries.
pub const HEADER_NAME: &str = "producer";
/// Its value.
pub const HEADER_VALUE: &[u8] = b"strait-bench";

/// A pool of pre-made values, so producing is not limited by making payloads. Each value is
/// distinct (it starts with its index), so a batch never holds two equal values even when
/// the pool is smaller than the data.
#[derive(Debug)]
pub struct Pool {
    values: Vec<Vec<u8>>,
    keys: Vec<Vec<u8>>,
}

impl Pool {
    /// `count` values of `size` bytes and as many keys, from `seed`.
    pub fn new(seed: u64, size: usize, count: usize) -> Self {
        let mut rng = Rng::new(seed);
        let values = (0..count as u64)
            .map(|i| value(&mut rng, i, size))
            .collect();
        let keys = (0..count).map(|_| key(&mut rng)).collect();
        Self { values, keys }
    }

    /// How many values the pool holds for records of `size` bytes: about 8 MiB of them.
    pub fn count_for(size: usize) -> usize {
        (8 << 20) / size.max(1)
    }

    /// The value of record `index`, with its id written into it (so every record is unique).
    pub fn value(&self, index: u64) -> Vec<u8> {
        let mut v = self.values[(index % self.values.len() as u64) as usize].clone();
        let id = format!("id={index:012};");
        let n = id.len().min(v.len());
        v[..n].copy_from_slice(&id.as_bytes()[..n]);
        v
    }

    /// The key of record `index`.
    pub fn key(&self, index: u64) -> &[u8] {
        &self.keys[(index % self.keys.len() as u64) as usize]
    }
}
