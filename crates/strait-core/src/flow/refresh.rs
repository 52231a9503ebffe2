//! The topic refresh (`refresh.topics.interval.seconds`): new source topics and partitions get
//! their remote topics and are placed, remote topics the target refused are tried again, a
//! deleted source topic is noticed (and, with `strait.sync.topic.deletions.enabled`, its remote
//! topic deleted), and a topic made again under an old name is told by its id.

use super::*;

impl Flow {
    /// Finds new source topics and partitions, makes their remote topics, and places new
    /// partitions; notices source topics deleted ([`Flow::sync_deletions`]).
    pub async fn refresh_topics(&mut self) -> Result<(), FlowError> {
        let found = topics::discover_all(&self.source, &self.config).await?;
        let topics = found.mirrored;
        self.check_topic_ids(topics.iter().map(|t| (t.source.as_str(), t.id)));
        let ids: BTreeMap<&str, [u8; 16]> =
            topics.iter().map(|t| (t.source.as_str(), t.id)).collect();
        self.sync_deletions(&found.present, &ids).await?;
        let remote =
            topics::ensure_remote_topics(&self.source, &self.target, &self.config, &topics).await?;
        self.tell_refused_topics(&remote.refused);
        let remote_counts = remote.counts;
        let mut new = Vec::new();
        for t in &topics {
            let usable = remote_counts
                .get(&t.remote)
                .copied()
                .unwrap_or(0)
                .min(t.partitions);
            for p in 0..usable {
                let tp = TopicPartition::new(&t.source, p);
                if self.mirrors(&tp) && !self.partitions.contains_key(&tp) {
                    new.push((tp, TopicPartition::new(&t.remote, p), None));
                }
            }
        }
        for (tp, remote, placed) in self.place_all(new, recover::PLACEMENT_PATIENCE).await? {
            let position = match placed {
                Placement::At(position) => position,
                _ => self
                    .map
                    .partition(&source_partition(&tp))
                    .and_then(|m| m.src_end())
                    .unwrap_or(0),
            };
            let metrics = self.events.metrics().partition(&tp, &remote);
            metrics.placed(position);
            self.partitions.insert(
                tp.clone(),
                PartitionState {
                    remote,
                    position,
                    source_end: position,
                    metrics,
                    waiting: None,
                    halted: None,
                    largest_batch: None,
                    gone: false,
                },
            );
            match placed {
                Placement::At(_) => {}
                Placement::Diverged(why) => self.halt(&tp, why),
                Placement::Waiting(e) => self.unplaced(&tp, None, &e),
            }
        }
        self.topics = topics;
        let mut every = self
            .config
            .refresh_topics
            .unwrap_or(Duration::from_secs(u64::from(u32::MAX)));
        if !self.refused_topics.is_empty() {
            // A refused remote topic is tried again sooner than the next refresh would.
            every = every.min(REFUSED_TOPIC_RETRY);
        }
        self.next_refresh = Instant::now() + every;
        Ok(())
    }

    /// Says which remote topics the target refuses to create (at warn when one is first
    /// refused or refused otherwise, at debug when again the same) and which it took at last.
    pub(super) fn tell_refused_topics(&mut self, refused: &BTreeMap<String, strait_kafka::Error>) {
        let flow = self.config.name();
        for (topic, e) in refused {
            let why = e.to_string();
            if self.refused_topics.get(topic) == Some(&why) {
                tracing::debug!(flow = %flow, remote_topic = %topic, error = %why,
                    "the target still refuses to create this remote topic");
                continue;
            }
            tracing::warn!(flow = %flow, remote_topic = %topic, error = %why,
                "the target refuses to create this remote topic (a create-topic policy, an ACL \
                 that does not cover the name, a name it does not accept): its source topic is \
                 not mirrored and is tried again in {} s; the other topics go on",
                REFUSED_TOPIC_RETRY.as_secs());
            self.refused_topics.insert(topic.clone(), why);
        }
        let taken: Vec<String> = self
            .refused_topics
            .keys()
            .filter(|t| !refused.contains_key(*t))
            .cloned()
            .collect();
        for topic in taken {
            self.refused_topics.remove(&topic);
            tracing::info!(flow = %flow, remote_topic = %topic,
                "the target no longer refuses this remote topic (or its source topic is gone)");
        }
    }

    /// Source topics this flow mirrored that the source no longer has, at this refresh and the
    /// one before (`topics::confirm_deleted`; a topic the filter no longer matches is not
    /// deleted). With `strait.sync.topic.deletions.enabled`, each one's remote topic is deleted
    /// on the target and its partitions forgotten ([`Flow::delete_remote`]); without, its
    /// partitions stop and its remote topic stays, as MM2 does. A kept topic that is on the
    /// source again is fetched again, unless the topic id check halted it (made anew).
    pub(super) async fn sync_deletions(
        &mut self,
        present: &BTreeSet<String>,
        ids: &BTreeMap<&str, [u8; 16]>,
    ) -> Result<(), FlowError> {
        self.forget_deleted_remotes().await?;
        self.take_back(present, ids);
        let mirrored: BTreeSet<String> = self
            .partitions
            .keys()
            .map(|tp| tp.topic.clone())
            .chain(self.topics.iter().map(|t| t.source.clone()))
            .collect();
        let deleted = topics::confirm_deleted(&mirrored, present, &mut self.absent_topics);
        for topic in deleted {
            if self.kept_gone.contains(&topic) || self.source_topic_deleted(&topic).await? {
                continue;
            }
            self.kept_gone.insert(topic.clone());
            self.set_gone(&topic, true);
        }
        Ok(())
    }

    /// Source topics kept as deleted that the source lists again (`present`, with their ids):
    /// fetched again, unless made anew while their remote topic waits to be deleted by unit 0.
    pub(super) fn take_back(&mut self, present: &BTreeSet<String>, ids: &BTreeMap<&str, [u8; 16]>) {
        let back: Vec<String> = self
            .kept_gone
            .iter()
            .filter(|t| present.contains(*t))
            .cloned()
            .collect();
        for topic in back {
            if self.awaiting_remote.contains_key(&topic) {
                if ids.get(topic.as_str()) != self.topic_ids.get(&topic) {
                    // Made anew: it waits for unit 0 to delete the remote topic, then is
                    // mirrored afresh.
                    continue;
                }
                // The same topic: it was never deleted.
                self.awaiting_remote.remove(&topic);
            }
            self.kept_gone.remove(&topic);
            self.set_gone(&topic, false);
            tracing::info!(
                flow = %self.config.name(),
                source_topic = %topic,
                "source topic is on the source again; its partitions are fetched again unless \
                 it was made anew (then they are halted)"
            );
        }
    }

    /// Marks the partitions of source topic `topic` deleted on the source (not fetched), or no
    /// longer.
    pub(super) fn set_gone(&mut self, topic: &str, gone: bool) {
        for (_, p) in self
            .partitions
            .iter_mut()
            .filter(|(tp, _)| tp.topic == topic)
        {
            p.gone = gone;
        }
    }

    /// What source topic `topic`, confirmed deleted from listings, does to its remote topic
    /// ([`Flow::sync_deletions`]). Returns whether its partitions are forgotten (its remote topic
    /// is gone); if not, they stop and are kept.
    pub(super) async fn source_topic_deleted(&mut self, topic: &str) -> Result<bool, FlowError> {
        let remote = self
            .partitions
            .iter()
            .find(|(tp, _)| tp.topic == topic)
            .map_or_else(
                || self.config.remote_topic(topic),
                |(_, p)| p.remote.topic.clone(),
            );
        let flow = self.config.name();
        if !self.config.sync_topic_deletions {
            tracing::info!(%flow, source_topic = %topic, remote_topic = %remote,
                "source topic deleted; its partitions stop and its remote topic is kept, as MM2 \
                 does (strait.sync.topic.deletions.enabled is false)");
            return Ok(false);
        }
        // Missing from the listing twice; before anything is deleted, the source must say the
        // topic is unknown when asked by name. A topic this principal may no longer describe (an
        // ACL taken away) is missing from listings too, and its remote topic is the copy to keep.
        let unknown = self.source.unknown_topics(&[topic]).await?;
        if !unknown.contains(topic) {
            tracing::warn!(%flow, source_topic = %topic, remote_topic = %remote,
                "source topic is missing from the source's topic list, but the source does not \
                 answer that it is unknown (no Describe permission on it?); its remote topic is \
                 kept and its partitions stop");
            return Ok(false);
        }
        if self.leads() {
            return match topics::deletable_remote(&self.config, topic, &remote) {
                Ok(()) => self.delete_remote(topic, &remote).await,
                Err(why) => {
                    tracing::warn!(%flow, source_topic = %topic, remote_topic = %remote,
                        "source topic deleted; its remote topic is kept: {why}");
                    Ok(false)
                }
            };
        }
        tracing::info!(%flow, source_topic = %topic, remote_topic = %remote,
            "source topic deleted; this unit's partitions of it stop, and unit 0 of the flow \
             deletes its remote topic (strait.sync.topic.deletions.enabled); once it is gone \
             this unit forgets them, and a topic made again under the name is mirrored afresh");
        let metadata = self.target.refresh_metadata().await?;
        let Some(id) = metadata.topics.get(&remote).map(|t| t.id) else {
            // Unit 0 was quicker: the remote topic is gone already.
            self.forget_topic(topic, false).await?;
            return Ok(true);
        };
        self.awaiting_remote.insert(topic.to_owned(), (remote, id));
        Ok(false)
    }

    /// Deletes `remote` on the target, the remote topic of `source`, deleted on the source, then
    /// forgets `source`'s partitions: out of the offset map (tombstones written and waited
    /// for), the topic id check, the offset syncs; so a topic made again under the name is
    /// mirrored afresh, from the start `consumer.auto.offset.reset` gives. The remote topic
    /// goes first: a crash in between leaves the map naming records the target no longer has,
    /// which a restart halts on with what to do, rather than a map without the remote topic's
    /// old records, which a new topic's records would be written after. `false` when the
    /// target refuses the deletion for good (logged; the caller keeps the topic); an error
    /// time can fix stalls the flow, and the next refresh tries again.
    pub(super) async fn delete_remote(
        &mut self,
        source: &str,
        remote: &str,
    ) -> Result<bool, FlowError> {
        let flow = self.config.name();
        let refused = |e: &strait_kafka::Error| {
            tracing::error!(
                flow = %flow,
                source_topic = %source,
                remote_topic = %remote,
                error = %e,
                "source topic deleted; cannot delete its remote topic, which is kept and its \
                 partitions stop (strait.sync.topic.deletions.enabled)"
            );
        };
        let answer = match self.target.delete_topics(&[remote]).await {
            Ok(answer) => answer,
            Err(e) if e.is_retriable() => return Err(e.into()),
            Err(e) => {
                refused(&e);
                return Ok(false);
            }
        };
        let mut already_gone = false;
        for (_, result) in answer {
            match result {
                Ok(()) => {}
                Err(e)
                    if e.code()
                        == Some(kafka_protocol::error::ResponseError::UnknownTopicOrPartition) =>
                {
                    already_gone = true;
                }
                Err(e) if e.is_retriable() => return Err(e.into()),
                Err(e) => {
                    refused(&e);
                    return Ok(false);
                }
            }
        }
        let parts = self.forget_topic(source, true).await?;
        self.events.tell_flow(FlowEvent::RemoteTopicDeleted {
            source_topic: source,
            remote_topic: remote,
            partitions: parts.len(),
            already_gone,
        });
        Ok(true)
    }

    /// Forgets source topic `source`: its partitions, its offset map entries, its id, its
    /// offset syncs, so that a topic made again under the name is new to the flow. The map's
    /// entries are removed on the map topic too (tombstones, waited for) for this flow's own
    /// partitions, and for every partition of the topic if `all` (unit 0, or a flow without
    /// units, right after it deleted the remote topic); a unit but unit 0 leaves the others'
    /// entries alone, since by now unit 0 may be writing a new topic's entries under them.
    /// Returns the partitions forgotten.
    pub(super) async fn forget_topic(
        &mut self,
        source: &str,
        all: bool,
    ) -> Result<Vec<TopicPartition>, FlowError> {
        let parts: Vec<TopicPartition> = self
            .partitions
            .keys()
            .filter(|tp| tp.topic == source)
            .cloned()
            .collect();
        for tp in &parts {
            self.partitions.remove(tp);
            self.orphan_ends.remove(tp);
            self.events.metrics().forget_partition(tp);
        }
        let mapped: Vec<SourcePartition> = self
            .map
            .iter()
            .map(|(sp, _)| sp)
            .filter(|sp| sp.topic == source)
            .cloned()
            .collect();
        for sp in mapped {
            let old = self.map.remove(&sp);
            if all || self.mirrors(&TopicPartition::new(&sp.topic, sp.partition)) {
                self.store.note_partition_removed(&sp, old.as_ref());
            }
        }
        self.topic_ids.remove(source);
        self.absent_topics.remove(source);
        self.kept_gone.remove(source);
        self.prefetched = None;
        if let Some(w) = &mut self.offset_syncs {
            w.forget_topic(source);
        }
        self.persist_map().await?;
        Ok(parts)
    }

    /// In a unit but unit 0: forgets its partitions of each source topic whose deletion it saw,
    /// once unit 0 has deleted the remote topic (gone from the target, or made again under
    /// another id): see `awaiting_remote`.
    pub(super) async fn forget_deleted_remotes(&mut self) -> Result<(), FlowError> {
        if self.awaiting_remote.is_empty() {
            return Ok(());
        }
        let metadata = self.target.refresh_metadata().await?;
        let done: Vec<String> = self
            .awaiting_remote
            .iter()
            .filter(|(_, (remote, id))| metadata.topics.get(remote).is_none_or(|t| t.id != *id))
            .map(|(source, _)| source.clone())
            .collect();
        for source in done {
            let Some((remote, _)) = self.awaiting_remote.remove(&source) else {
                continue;
            };
            let parts = self.forget_topic(&source, false).await?;
            tracing::info!(
                flow = %self.config.name(),
                source_topic = %source,
                remote_topic = %remote,
                partitions = parts.len(),
                "unit 0 deleted the remote topic of a deleted source topic; this unit forgot its \
                 partitions of it, and mirrors a topic made again under the name afresh"
            );
        }
        Ok(())
    }

    /// Compares the source topics' ids (from the source's metadata, zero where the broker gives
    /// none) with those seen before: a topic whose id changed was deleted and created again,
    /// and its partitions are halted, since its offsets start over below what the map records.
    pub(super) fn check_topic_ids<'a>(&mut self, ids: impl Iterator<Item = (&'a str, [u8; 16])>) {
        let mut recreated = Vec::new();
        for (topic, id) in ids {
            // A topic waiting for unit 0 to delete its remote topic is checked when it is back
            // (`sync_deletions`): made anew, it is mirrored afresh once the remote topic is gone.
            if id == [0; 16] || self.awaiting_remote.contains_key(topic) {
                continue;
            }
            match self.topic_ids.insert(topic.to_owned(), id) {
                Some(before) if before != id => recreated.push((topic.to_owned(), before, id)),
                _ => {}
            }
        }
        for (topic, before, now) in recreated {
            let parts: Vec<TopicPartition> = self
                .partitions
                .keys()
                .filter(|tp| tp.topic == topic)
                .cloned()
                .collect();
            for tp in parts {
                let why = format!(
                    "source topic {topic} was deleted and created again (its topic id was {}, \
                     now {}): its offsets start over, and the offset map of the old topic \
                     cannot describe its records. {}",
                    topic_id(&before),
                    topic_id(&now),
                    self.diverged_advice()
                );
                self.halt(&tp, why);
            }
        }
    }

    /// What to do about a partition that no longer matches its map.
    pub(super) fn diverged_advice(&self) -> String {
        format!(
            "The partition is not mirrored until someone acts; the others go on. To mirror it \
             as the source is now, delete the map topic {} on the target and restart strait: \
             it lines each remote topic up with its source again by matching records (what \
             matches is not copied again), keeps the target's copies of records the source no \
             longer has, and copies the source's records after them",
            MapStore::topic_name(self.config.source_alias.as_str())
        )
    }
}

/// A topic id as Kafka prints it (`kafka-topics.sh --describe`): its 16 bytes in URL-safe
/// base64 without padding.
pub(super) fn topic_id(id: &[u8; 16]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id)
}
