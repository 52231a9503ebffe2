//! The decision for one partition's fetched records, made without a broker: which batches are
//! written as they are, which are rebuilt, which source offsets are passed over, and where the
//! partition's next fetch starts (`docs/design.md` §3.2). The round applies it: it counts,
//! produces and records what this decided.

use bytes::Bytes;
use strait_kafka::fetch::AbortedTransaction;
use strait_wire::rebuild::RebuildError;
use strait_wire::{BatchScanner, RawBatch};

use super::classify::{AbortTracker, Action, SkipReason};

/// One step of a partition's decision, in source order.
#[derive(Debug)]
pub(super) enum Decision {
    /// Source offsets `from..to` are not mirrored: a transaction marker or a batch of an aborted
    /// transaction.
    Skip {
        from: i64,
        to: i64,
        reason: SkipReason,
    },
    /// Source offsets `from..to` held nothing left to write: a batch whose records are all
    /// before the position, or that compaction emptied. The map must still say they were
    /// passed over, or groups committed there would look unreplicated.
    PassOver {
        from: i64,
        to: i64,
        /// The batch's newest record time, for the partition's read lag.
        max_timestamp: i64,
    },
    /// Write `batch`, which carries the source runs `(offset, count)`, in order.
    Write {
        batch: RawBatch,
        runs: Vec<(i64, i64)>,
        /// How it was made from the source batch.
        kind: WriteKind,
        /// The source batch's newest record time, for the partition's read lag.
        max_timestamp: i64,
    },
}

/// How a written batch was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WriteKind {
    /// The source batch, unopened (its header is rewritten by the producer).
    Forwarded,
    /// Decoded and encoded again from the source batch at `source_base`: its offsets had holes
    /// (compaction, `holes`), or it started before the position.
    Rebuilt { source_base: i64, holes: bool },
}

/// Why a partition's decision ended before its fetched records did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Stop {
    /// A batch in message format v0 or v1 (`magic`) at `base_offset`: strait mirrors format v2
    /// only, and the same bytes would come back every round.
    OldFormat { magic: i8, base_offset: i64 },
    /// A batch that cannot be read (a bad CRC, a broken length): fetched again next round.
    Unreadable(String),
}

/// What a round does with one partition.
#[derive(Debug)]
pub(super) struct Decided {
    pub(super) steps: Vec<Decision>,
    /// Where the partition's next fetch starts.
    pub(super) position: i64,
    pub(super) stopped: Option<Stop>,
}

/// A batch that must be rebuilt and cannot be (its records cannot be decoded).
#[derive(Debug)]
pub(super) struct Unrebuildable {
    /// The batch's base offset.
    pub(super) base_offset: i64,
    pub(super) source: RebuildError,
}

/// Decides, batch by batch in offset order, for fetched `records` (with the fetch's `aborted`
/// transactions) of a partition whose next source offset to mirror is `position`, checking each
/// batch's CRC if `check_crcs`. An error is a batch that must be rebuilt and cannot be (its
/// records cannot be decoded): the round fails.
pub(super) fn partition(
    position: i64,
    records: Bytes,
    aborted: &[AbortedTransaction],
    check_crcs: bool,
) -> Result<Decided, Unrebuildable> {
    let mut position = position;
    let mut steps = Vec::new();
    let mut stopped = None;
    let mut tracker = AbortTracker::new(aborted);
    for batch in BatchScanner::new(records).verify_crc(check_crcs) {
        let batch = match batch {
            Ok(b) => b,
            Err(strait_wire::ScanError::UnsupportedMagic {
                magic, base_offset, ..
            }) if (0..2).contains(&magic) && base_offset >= position => {
                stopped = Some(Stop::OldFormat { magic, base_offset });
                break;
            }
            Err(e) => {
                stopped = Some(Stop::Unreadable(e.to_string()));
                break;
            }
        };
        if batch.header.next_offset() <= position {
            continue;
        }
        let straddles = batch.header.base_offset < position;
        let action = tracker.classify(batch);
        let holes = matches!(action, Action::Rebuild(_));
        match action {
            Action::Skip { from, to, reason } => {
                steps.push(Decision::Skip {
                    from: from.max(position),
                    to,
                    reason,
                });
                position = to;
            }
            Action::Forward(b) if !straddles => {
                let n = i64::from(b.header.record_count);
                position = b.header.next_offset();
                steps.push(Decision::Write {
                    runs: vec![(b.header.base_offset, n)],
                    kind: WriteKind::Forwarded,
                    max_timestamp: b.header.max_timestamp,
                    batch: b,
                });
            }
            Action::Forward(b) | Action::Rebuild(b) => {
                let next = b.header.next_offset();
                let max_timestamp = b.header.max_timestamp;
                match strait_wire::rebuild::rebuild(&b, position) {
                    Ok(Some(rebuilt)) => steps.push(Decision::Write {
                        runs: rebuilt.runs.iter().map(|r| (r.src_offset, r.len)).collect(),
                        batch: rebuilt.batch,
                        kind: WriteKind::Rebuilt {
                            source_base: b.header.base_offset,
                            holes,
                        },
                        max_timestamp,
                    }),
                    Ok(None) => steps.push(Decision::PassOver {
                        from: position,
                        to: next,
                        max_timestamp,
                    }),
                    Err(source) => {
                        return Err(Unrebuildable {
                            base_offset: b.header.base_offset,
                            source,
                        })
                    }
                }
                position = next;
            }
        }
    }
    Ok(Decided {
        steps,
        position,
        stopped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    /// A batch of the records at `offsets` (holes where they skip), by `producer` (-1: none),
    /// transactional or not, or a control batch (a marker) when `control`.
    fn batch(offsets: &[i64], producer: i64, transactional: bool, control: bool) -> Bytes {
        let base = offsets[0];
        let records: Vec<Record> = offsets
            .iter()
            .map(|&offset| Record {
                transactional,
                control,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: producer,
                producer_epoch: if producer < 0 { -1 } else { 0 },
                timestamp_type: TimestampType::Creation,
                offset,
                // offset - sequence constant, or the encoder starts a new batch.
                sequence: (offset - base) as i32,
                timestamp: 1_000 + offset,
                key: if control {
                    Some(Bytes::from_static(&[0, 0, 0, 0]))
                } else {
                    Some(Bytes::from(format!("k{offset}")))
                },
                value: if control {
                    Some(Bytes::from_static(&[0, 0, 0, 0, 0, 0]))
                } else {
                    Some(Bytes::from(format!("v{offset}")))
                },
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &records,
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .unwrap();
        buf.freeze()
    }

    fn log(batches: &[Bytes]) -> Bytes {
        Bytes::from(batches.concat())
    }

    /// `(kind, from, to)` per step: "write", "rebuild", "skip-marker", "skip-aborted",
    /// "pass"; for writes, the runs' extent.
    fn shape(d: &Decided) -> Vec<(&'static str, i64, i64)> {
        d.steps
            .iter()
            .map(|s| match s {
                Decision::Skip { from, to, reason } => (
                    match reason {
                        SkipReason::ControlBatch => "skip-marker",
                        SkipReason::Aborted => "skip-aborted",
                    },
                    *from,
                    *to,
                ),
                Decision::PassOver { from, to, .. } => ("pass", *from, *to),
                Decision::Write { runs, kind, .. } => {
                    let from = runs[0].0;
                    let (last, n) = runs[runs.len() - 1];
                    let kind = match kind {
                        WriteKind::Forwarded => "write",
                        WriteKind::Rebuilt { .. } => "rebuild",
                    };
                    (kind, from, last + n)
                }
            })
            .collect()
    }

    #[test]
    fn whole_batches_are_forwarded_and_those_before_the_position_passed() {
        let records = log(&[
            batch(&[0, 1, 2], -1, false, false),
            batch(&[3, 4], -1, false, false),
        ]);
        let d = partition(3, records.clone(), &[], true).unwrap();
        assert_eq!(shape(&d), [("write", 3, 5)]);
        assert_eq!((d.position, d.stopped), (5, None));
        let Decision::Write { batch, .. } = &d.steps[0] else {
            unreachable!()
        };
        assert_eq!(
            batch.bytes,
            records.slice(records.len() - batch.bytes.len()..),
            "unopened"
        );
        let d = partition(0, records, &[], true).unwrap();
        assert_eq!(shape(&d), [("write", 0, 3), ("write", 3, 5)]);
    }

    #[test]
    fn a_batch_cut_by_the_position_is_rebuilt_from_it() {
        let d = partition(1, batch(&[0, 1, 2], -1, false, false), &[], true).unwrap();
        assert_eq!(shape(&d), [("rebuild", 1, 3)]);
        let Decision::Write { kind, .. } = &d.steps[0] else {
            unreachable!()
        };
        assert_eq!(
            *kind,
            WriteKind::Rebuilt {
                source_base: 0,
                holes: false
            }
        );
        assert_eq!(d.position, 3);
    }

    #[test]
    fn compaction_holes_are_rebuilt_densely_with_their_runs() {
        let d = partition(0, batch(&[0, 2, 3, 7], -1, false, false), &[], true).unwrap();
        let Decision::Write { runs, kind, .. } = &d.steps[0] else {
            panic!("{d:?}")
        };
        assert_eq!(runs, &[(0, 1), (2, 2), (7, 1)]);
        assert!(matches!(kind, WriteKind::Rebuilt { holes: true, .. }));
        assert_eq!(d.position, 8);
    }

    #[test]
    fn markers_and_aborted_transactions_are_skipped_in_order() {
        let aborted = [AbortedTransaction {
            producer_id: 7,
            first_offset: 0,
        }];
        let records = log(&[
            batch(&[0, 1], 7, true, false),
            batch(&[2], 7, true, true),
            batch(&[3, 4], 8, true, false),
            batch(&[5], 8, true, true),
        ]);
        let d = partition(0, records, &aborted, true).unwrap();
        assert_eq!(
            shape(&d),
            [
                ("skip-aborted", 0, 2),
                ("skip-marker", 2, 3),
                ("write", 3, 5),
                ("skip-marker", 5, 6)
            ]
        );
        assert_eq!(d.position, 6);
    }

    /// Offsets 0 and 1 in a good batch, then 2 and 3 in one whose last byte is corrupted (its
    /// CRC no longer matches).
    fn good_then_corrupted() -> Bytes {
        let good = batch(&[0, 1], -1, false, false);
        let mut bad = batch(&[2, 3], -1, false, false).to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        log(&[good, Bytes::from(bad)])
    }

    #[test]
    fn a_broken_batch_stops_the_decision_after_what_came_before() {
        let d = partition(0, good_then_corrupted(), &[], true).unwrap();
        assert_eq!(shape(&d), [("write", 0, 2)]);
        assert_eq!(d.position, 2);
        assert!(
            matches!(d.stopped, Some(Stop::Unreadable(_))),
            "{:?}",
            d.stopped
        );
    }

    #[test]
    fn with_check_crcs_off_a_corrupted_batch_is_written_as_it_came() {
        let d = partition(0, good_then_corrupted(), &[], false).unwrap();
        assert_eq!(shape(&d), [("write", 0, 2), ("write", 2, 4)]);
        assert_eq!((d.position, d.stopped), (4, None));
    }

    #[test]
    fn nothing_fetched_decides_nothing() {
        let d = partition(42, Bytes::new(), &[], true).unwrap();
        assert!(d.steps.is_empty());
        assert_eq!((d.position, d.stopped), (42, None));
    }
}
