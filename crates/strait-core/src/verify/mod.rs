//! `strait verify`: a flow's source and target compared record by record through the exact
//! offset map (`docs/offset-map.md`), per partition.
//!
//! For each partition the map accounts for ([`PartitionJob::from_map`]), the source is read from
//! the map's start to its end and the remote partition from the map's first target offset to its
//! end now, both as a consumer reading committed data (aborted transactions and markers passed
//! over, `digest.rs`), by two readers that run ahead of the comparison (`compare.rs`). Records
//! are compared by digests of their key, value, headers and create time, so batches strait
//! rebuilt, or that a broker merged or recompressed, compare equal. A comparison can stop at any
//! point and resume from its [`Tally`] (`next_source`, `next_target`).
//!
//! Reading goes through strait's own client (`strait_kafka::Client::fetch`) and batch scanner;
//! a rate limit over both sides' fetched bytes ([`Limiter`]) keeps a verify of a live cluster
//! gentle.

pub mod compare;
pub mod digest;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use strait_kafka::admin::{IsolationLevel, OffsetSpec};
use strait_kafka::fetch::{FetchOptions, FetchPosition};
use strait_kafka::{Client, TopicPartition};
use strait_wire::offset_map::{PartitionMap, Segment};
use tokio::sync::mpsc;

pub use compare::{Example, Tally, Walk};
pub use digest::{Entry, RecordDigest};

/// Why a partition could not be verified.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// A cluster refused or did not answer.
    #[error("{side} {tp}: {what}: {source}")]
    Kafka {
        /// `source` or `target`.
        side: &'static str,
        /// The partition read.
        tp: TopicPartition,
        /// What was asked.
        what: &'static str,
        /// Its error.
        source: strait_kafka::Error,
    },
    /// Fetched bytes that are not record batches, or records that do not decode.
    #[error("{side} {tp}: {message}")]
    Unreadable {
        /// `source` or `target`.
        side: &'static str,
        /// The partition read.
        tp: TopicPartition,
        /// What is wrong with them.
        message: String,
    },
}

/// One partition to compare: what the map accounts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionJob {
    /// The source partition.
    pub source: TopicPartition,
    /// Its remote partition on the target.
    pub target: TopicPartition,
    /// The map's segments, in source order.
    pub segments: Vec<Segment>,
    /// The first source offset the map accounts for (above a compacted map's floor).
    pub source_from: i64,
    /// The source offset the map accounts for up to.
    pub source_to: i64,
    /// The first target offset the map maps to; `None` when it maps none (every record it saw
    /// was aborted or a marker): the target is then not read.
    pub target_from: Option<i64>,
}

impl PartitionJob {
    /// The comparison of `source` (remote partition `target`) that `map` accounts for; `None`
    /// for a map that accounts for nothing yet.
    pub fn from_map(
        source: TopicPartition,
        target: TopicPartition,
        map: &PartitionMap,
    ) -> Option<Self> {
        let extent = map.extent()?;
        let source_from = map
            .floor()
            .map_or(extent.src_start, |f| f.src_end.max(extent.src_start));
        Some(PartitionJob {
            source,
            target,
            segments: map.segments().to_vec(),
            source_from,
            source_to: extent.src_end,
            target_from: map.segments().first().map(|s| s.dst_start),
        })
    }
}

/// A byte budget per second over every read of a verify, and the count of bytes read.
#[derive(Debug)]
pub struct Limiter {
    bytes_per_sec: Option<f64>,
    since: Mutex<(Instant, u64)>,
    read: AtomicU64,
}

impl Limiter {
    /// At most `bytes_per_sec` on average (none: as fast as the clusters answer).
    pub fn new(bytes_per_sec: Option<f64>) -> Self {
        Limiter {
            bytes_per_sec: bytes_per_sec.filter(|r| r.is_finite() && *r > 0.0),
            since: Mutex::new((Instant::now(), 0)),
            read: AtomicU64::new(0),
        }
    }

    /// Bytes fetched so far, both sides.
    pub fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    /// Counts `n` bytes read, then waits until the average since the start is within the
    /// budget again.
    async fn take(&self, n: u64) {
        self.read.fetch_add(n, Ordering::Relaxed);
        let Some(rate) = self.bytes_per_sec else {
            return;
        };
        let wait = {
            let mut since = self
                .since
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            since.1 += n;
            let due = since.0 + Duration::from_secs_f64(since.1 as f64 / rate);
            due.saturating_duration_since(Instant::now())
        };
        tokio::time::sleep(wait).await;
    }
}

/// How a verify reads.
#[derive(Debug, Clone, Copy)]
pub struct ReadOptions {
    /// Most bytes fetched per partition and request (KIP-74: a larger first batch still comes).
    pub partition_bytes: i32,
    /// Fetches of the same offset that return no complete batch before the partition counts
    /// as unreadable.
    pub empty_fetches: u32,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            partition_bytes: 8 << 20,
            empty_fetches: 50,
        }
    }
}

/// What a reader hands over: the records of one fetch, or its end.
#[derive(Debug)]
struct Chunk {
    entries: Vec<Entry>,
    aborted: u64,
    done: bool,
}

/// One side of a comparison: reads `tp` from `from` to `end`, records digested, ahead of the
/// comparison by a few fetches.
struct Reader {
    side: &'static str,
    client: Client,
    tp: TopicPartition,
    from: i64,
    end: i64,
    limiter: Arc<Limiter>,
    options: ReadOptions,
}

impl Reader {
    fn kafka(&self, what: &'static str) -> impl FnOnce(strait_kafka::Error) -> VerifyError + '_ {
        move |source| VerifyError::Kafka {
            side: self.side,
            tp: self.tp.clone(),
            what,
            source,
        }
    }

    async fn run(mut self, tx: mpsc::Sender<Result<Chunk, VerifyError>>) {
        let mut empty = 0;
        let mut failures = 0;
        loop {
            let chunk = match self.next().await {
                Ok(Some(chunk)) => {
                    failures = 0;
                    empty = if chunk.entries.is_empty() && chunk.aborted == 0 && !chunk.done {
                        empty + 1
                    } else {
                        0
                    };
                    if empty > self.options.empty_fetches {
                        Err(VerifyError::Unreadable {
                            side: self.side,
                            tp: self.tp.clone(),
                            message: format!(
                                "no complete batch at offset {} in {} fetches, though the \
                                 partition ends at {}",
                                self.from, empty, self.end
                            ),
                        })
                    } else {
                        Ok(chunk)
                    }
                }
                Ok(None) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(VerifyError::Kafka { source, .. })
                    if source.is_retriable() && failures < 10 =>
                {
                    failures += 1;
                    tokio::time::sleep(Duration::from_millis(200 * failures)).await;
                    continue;
                }
                Err(e) => Err(e),
            };
            let stop = !matches!(chunk, Ok(Chunk { done: false, .. }));
            if tx.send(chunk).await.is_err() || stop {
                return;
            }
        }
    }

    /// The next fetch's records; `None` when it returned nothing new yet.
    async fn next(&mut self) -> Result<Option<Chunk>, VerifyError> {
        if self.from >= self.end {
            return Ok(Some(Chunk {
                entries: Vec::new(),
                aborted: 0,
                done: true,
            }));
        }
        let options = FetchOptions {
            max_wait: Duration::from_millis(100),
            min_bytes: 1,
            max_bytes: self.options.partition_bytes,
            isolation: IsolationLevel::ReadCommitted,
        };
        let position = FetchPosition {
            max_bytes: self.options.partition_bytes,
            ..FetchPosition::new(self.tp.clone(), self.from)
        };
        let answer = self
            .client
            .fetch(&[position], &options)
            .await
            .remove(&self.tp)
            .unwrap_or(Err(strait_kafka::Error::Closed));
        let data = match answer {
            Ok(data) => data,
            Err(e) if e.code() == Some(kafka_protocol::error::ResponseError::OffsetOutOfRange) => {
                // Deleted since the map was read, or the log ends before it: go on from the
                // log's start (what lies before is reported as missing or gone), or end.
                let start = self
                    .client
                    .list_offset(
                        &self.tp,
                        OffsetSpec::Earliest,
                        IsolationLevel::ReadCommitted,
                    )
                    .await
                    .map_err(self.kafka("list its log start"))?
                    .offset;
                let end = self
                    .client
                    .list_offset(&self.tp, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
                    .await
                    .map_err(self.kafka("list its end"))?
                    .offset;
                if start > self.from {
                    self.from = start;
                } else if end <= self.from {
                    self.end = self.from;
                } else {
                    return Err(self.kafka("fetch")(e));
                }
                return Ok(None);
            }
            Err(e) => return Err(self.kafka("fetch")(e)),
        };
        self.limiter.take(data.records.len() as u64).await;
        let (from, end) = (self.from, self.end);
        let digested = tokio::task::spawn_blocking(move || {
            digest::digest_fetched(data.records, &data.aborted, from, end)
        })
        .await
        .map_err(|e| VerifyError::Unreadable {
            side: self.side,
            tp: self.tp.clone(),
            message: format!("the digest task failed: {e}"),
        })?
        .map_err(|e| VerifyError::Unreadable {
            side: self.side,
            tp: self.tp.clone(),
            message: e.0,
        })?;
        self.from = digested.next;
        Ok(Some(Chunk {
            entries: digested.entries,
            aborted: digested.aborted,
            done: self.from >= self.end,
        }))
    }
}

/// One side's reader, started: its chunks come on the receiver.
fn start_reader(reader: Reader) -> mpsc::Receiver<Result<Chunk, VerifyError>> {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(reader.run(tx));
    rx
}

/// Where the comparison of a partition reads to: the ends listed when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ends {
    /// The source is read to here: the map's end, or the source's end when lower.
    pub source: i64,
    /// The target is read to here: the remote partition's end (its last stable offset) when
    /// the comparison started.
    pub target: i64,
}

/// Compares one partition, resuming from `tally` (a fresh `Tally::default()` starts at the
/// beginning). `progress` sees the tally after each step. Returns the whole tally.
pub async fn verify_partition(
    source: &Client,
    target: &Client,
    job: &PartitionJob,
    tally: Tally,
    limiter: &Arc<Limiter>,
    options: ReadOptions,
    mut progress: impl FnMut(&Tally, Ends) + Send,
) -> Result<Tally, VerifyError> {
    let latest = |client: &Client, side: &'static str, tp: &TopicPartition| {
        let (client, tp) = (client.clone(), tp.clone());
        async move {
            client
                .list_offset(&tp, OffsetSpec::Latest, IsolationLevel::ReadCommitted)
                .await
                .map(|l| l.offset)
                .map_err(|source| VerifyError::Kafka {
                    side,
                    tp,
                    what: "list its end",
                    source,
                })
        }
    };
    let source_end = job
        .source_to
        .min(latest(source, "source", &job.source).await?);
    let target_from = job.target_from.map(|from| from.max(tally.next_target));
    let target_end = match target_from {
        Some(_) => latest(target, "target", &job.target).await?,
        None => 0,
    };
    let ends = Ends {
        source: source_end,
        target: target_end,
    };
    let mut walk = Walk::new(&job.segments, tally);
    let source_from = job.source_from.max(walk.tally.next_source);
    walk.tally.next_source = source_from;
    walk.tally.next_target = target_from.unwrap_or(walk.tally.next_target);
    let reader = |side, client: &Client, tp: &TopicPartition, from, end| Reader {
        side,
        client: client.clone(),
        tp: tp.clone(),
        from,
        end,
        limiter: Arc::clone(limiter),
        options,
    };
    let mut source_rx = start_reader(reader(
        "source",
        source,
        &job.source,
        source_from,
        source_end,
    ));
    let mut target_rx = start_reader(reader(
        "target",
        target,
        &job.target,
        target_from.unwrap_or(0),
        target_from.map_or(0, |_| target_end),
    ));
    let (mut src, mut dst) = (VecDeque::new(), VecDeque::new());
    let (mut src_done, mut dst_done) = (false, false);
    loop {
        if walk.advance(&mut src, src_done, &mut dst, dst_done) {
            progress(&walk.tally, ends);
            return Ok(walk.tally);
        }
        progress(&walk.tally, ends);
        // The comparison waits for the side it has nothing of.
        let (rx, queue, done, aborted) = if src.is_empty() && !src_done {
            (
                &mut source_rx,
                &mut src,
                &mut src_done,
                &mut walk.tally.aborted_on_source,
            )
        } else {
            (
                &mut target_rx,
                &mut dst,
                &mut dst_done,
                &mut walk.tally.aborted_on_target,
            )
        };
        match rx.recv().await {
            Some(Ok(chunk)) => {
                queue.extend(chunk.entries);
                *aborted += chunk.aborted;
                *done = chunk.done;
            }
            Some(Err(e)) => return Err(e),
            None => {
                return Err(VerifyError::Unreadable {
                    side: "verify",
                    tp: job.source.clone(),
                    message: "a reader stopped before its end".to_owned(),
                })
            }
        }
    }
}

/// Now, as (RFC 3339 UTC, ms since the epoch): when a report was made.
pub fn now_utc() -> (String, i64) {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    (crate::offsets::plan::rfc3339_utc(ms), ms)
}
