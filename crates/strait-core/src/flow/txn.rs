//! A unit's transaction (`docs/design.md` §7.3): with exactly-once, a round's data and the map
//! records that describe it are committed together, what the round tells of its partitions
//! waits for the commit, and the ids of units of an earlier `tasks.max` are fenced first.

use super::*;

impl Flow {
    /// Whether the flow writes through a transactional producer (a unit of a worker,
    /// `docs/design.md` §7.3): data and map records go in one transaction, committed by
    /// [`Flow::commit`].
    pub(super) fn transactional(&self) -> bool {
        self.options.producer.transactional_id.is_some()
    }

    /// Tells what was recorded of `tp` this round: now, or in a transactional flow once the
    /// round commits (an aborted round wrote nothing a reader sees, and its batches are
    /// fetched and counted again when the round is made again).
    pub(super) fn tell_recorded(&mut self, tp: &TopicPartition, recorded: Recorded) {
        if self.transactional() {
            self.uncommitted_told.push((tp.clone(), recorded));
            return;
        }
        self.tell_now(tp, &recorded);
    }

    pub(super) fn tell_now(&mut self, tp: &TopicPartition, recorded: &Recorded) {
        let Some(state) = self.partitions.get(tp) else {
            return;
        };
        let event = match *recorded {
            Recorded::Written {
                records,
                bytes,
                max_timestamp,
            } => Event::Written {
                records,
                bytes,
                max_timestamp,
            },
            Recorded::Forwarded => Event::Forwarded,
            Recorded::Rebuilt {
                source_base,
                ref runs,
                holes,
            } => Event::Rebuilt {
                source_base,
                runs,
                holes,
            },
            Recorded::Skipped(reason) => Event::Skipped(reason),
            Recorded::Merged => Event::Merged,
            Recorded::Split => Event::Split,
        };
        self.events.tell(tp, &state.metrics, event);
    }

    /// A transactional flow's commit: the map's changes go into the open transaction beside
    /// the data it records, the transaction is committed, and the map published. So the map
    /// never points at data that was aborted, and a fenced owner commits neither.
    pub(super) async fn commit(&mut self) -> Result<(), FlowError> {
        self.compact_map().await;
        let taken = self
            .store
            .take_write(&self.map)
            .map_err(FlowError::internal("offset map"))?;
        let mut result = Ok(());
        let write = match taken {
            Some((write, batches)) => {
                let tp = TopicPartition::new(self.store.topic(), 0);
                let sends = batches.into_iter().map(|b| (tp.clone(), b)).collect();
                if let Some(e) = self
                    .producer
                    .send_all(sends)
                    .await
                    .into_iter()
                    .find_map(Result::err)
                {
                    result = Err(e);
                }
                Some(write)
            }
            None => None,
        };
        if result.is_ok() {
            result = self.producer.commit().await;
        }
        // A failure puts the notes back (unless newer ones replaced them); the error is the
        // producer's, returned below.
        let published = write.and_then(|write| {
            let outcome = result
                .clone()
                .map_err(crate::internal::InternalError::Kafka);
            self.store.taken_written(write, outcome).ok().flatten()
        });
        result.map_err(|e| self.transaction_error(e))?;
        self.publish(published);
        for (tp, recorded) in std::mem::take(&mut self.uncommitted_told) {
            self.tell_now(&tp, &recorded);
        }
        let committed = std::mem::take(&mut self.uncommitted_syncs);
        if let Some(w) = &mut self.offset_syncs {
            for (topic, partition, runs) in committed {
                w.on_batch(&topic, partition, &runs);
            }
        }
        Ok(())
    }

    /// A new epoch of the producer, so that its sequences start afresh. A transactional one is
    /// initialised again with its current epoch, which aborts what is open and, if another
    /// owner initialised the id since, is refused: [`FlowError::Fenced`]. Never initialised
    /// without it, which would fence that owner in turn.
    pub(super) async fn new_epoch(&mut self) -> Result<(), FlowError> {
        let bumped = self.producer.bump_epoch().await;
        match bumped {
            Err(e) if self.transactional() => Err(self.transaction_error(e)),
            other => Ok(other?),
        }
    }

    /// A transactional producer's failure as the flow's: PRODUCER_FENCED is final
    /// ([`FlowError::Fenced`]); the rest is mended by a new epoch ([`FlowError::Transaction`]).
    pub(super) fn transaction_error(&self, e: strait_kafka::Error) -> FlowError {
        let transactional_id = self
            .options
            .producer
            .transactional_id
            .clone()
            .unwrap_or_default();
        if e.code() == Some(kafka_protocol::error::ResponseError::ProducerFenced) {
            FlowError::Fenced {
                transactional_id,
                source: e,
            }
        } else {
            FlowError::Transaction {
                transactional_id,
                source: e,
            }
        }
    }
}

/// Fences the transactional ids of units of another `tasks.max` (`<group id>-<index>` with an
/// index this count does not have) that still hold a transaction open: a worker of the earlier
/// count killed mid-round, or one stopped and about to go on. Its transaction is aborted, and a
/// late commit of it refused, before this unit writes the same partitions (KIP-618 fences the
/// tasks of an earlier count the same way). Ids whose index this count has are fenced by their
/// own unit's start. A broker that refuses the listing (older than Kafka 3.0) is logged and the
/// unit goes on: such a transaction ends at its timeout.
pub(super) async fn fence_other_counts(
    target: &Client,
    id: &str,
    unit: crate::scale::UnitFilter,
    config: &strait_kafka::produce::ProducerConfig,
) -> Result<(), FlowError> {
    let Some(group) = id.strip_suffix(&format!("-{}", unit.index)) else {
        return Ok(());
    };
    let prefix = format!("{group}-");
    let stale = |candidate: &str| {
        candidate
            .strip_prefix(&prefix)
            .and_then(|index| index.parse::<u32>().ok())
            .is_some_and(|index| index >= unit.units)
    };
    let ids = match strait_kafka::produce::ongoing_transactions(target, stale).await {
        Ok(ids) => ids,
        Err(e) if e.is_fenced() => return Err(FlowError::Kafka(e)),
        Err(e) => {
            tracing::warn!(transactional_id = %id, error = %e,
                "cannot list the target's transactions to fence units of another tasks.max; \
                 a transaction one of them left open is aborted by its timeout instead");
            return Ok(());
        }
    };
    for stale in ids {
        strait_kafka::produce::fence(target, &stale, config).await?;
        tracing::warn!(transactional_id = %stale, units = unit.units,
            "fenced the transactional id of a unit of another tasks.max: its open transaction \
             is aborted, and its writes refused from now on");
    }
    Ok(())
}
