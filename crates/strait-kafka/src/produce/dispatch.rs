//! The producer's scheduler: each leader's partitions as lanes of up to five batches in flight
//! (`Lane`), and the loop that sends a partition's next batch as soon as a slot frees, reads
//! the answers, retries in order and splits a merged batch the target refuses as too large
//! (`Dispatch`). The producer's API, and what it guarantees, is in `produce.rs`.

use super::*;
fn classify_answer(
    p: &Pending,
    answer: kafka_protocol::messages::produce_response::PartitionProduceResponse,
) -> Outcome {
    let Some(code) = ResponseError::try_from_code(answer.error_code) else {
        return Outcome::Done(ProduceAck {
            base_offset: answer.base_offset,
            record_count: p.record_count,
            log_append_time: answer.log_append_time_ms,
            log_start_offset: answer.log_start_offset,
            merged: false,
            split: p.split,
        });
    };
    let message = answer.error_message.map(|m| m.to_string());
    match code {
        ResponseError::DuplicateSequenceNumber => Outcome::Fail(Error::DuplicateSequence {
            context: p.tp.context(),
        }),
        ResponseError::OutOfOrderSequenceNumber => {
            // Retriable only while an earlier batch of this partition is unresolved: then we
            // are simply ahead of its retry.
            let earlier_unresolved = p
                .state
                .seq
                .lock()
                .map(|s| {
                    s.unresolved
                        .front()
                        .is_some_and(|first| *first != p.sequence)
                })
                .unwrap_or(false);
            let err = Error::broker(code, message, p.tp.context());
            if earlier_unresolved {
                Outcome::Retry(err)
            } else {
                Outcome::Fail(err)
            }
        }
        _ => classify_request_error(Error::broker(code, message, p.tp.context())),
    }
}

fn classify_request_error(e: Error) -> Outcome {
    if e.is_retriable() {
        Outcome::Retry(e)
    } else {
        Outcome::Fail(e)
    }
}

/// Gives each batch `carries` its result.
fn deliver(
    results: &mut [Option<Result<ProduceAck>>],
    carries: &Carries,
    result: Result<ProduceAck>,
) {
    for (index, result) in carries.results(result) {
        if let Some(r) = results.get_mut(index) {
            *r = Some(result);
        }
    }
}

/// Waits, in the background, for one of the partition's in-flight permits when another caller
/// holds them all (our own answers will not free any while none of ours is in flight).
fn await_permit(
    lane: &mut Lane,
    permits: &mut FuturesUnordered<BoxFuture<'static, (usize, Option<OwnedSemaphorePermit>)>>,
    index: usize,
) {
    if lane.in_flight == 0 && !lane.awaiting_permit {
        lane.awaiting_permit = true;
        let semaphore = Arc::clone(&lane.state.permits);
        permits.push(Box::pin(async move {
            (index, semaphore.acquire_owned().await.ok())
        }));
    }
}

/// Half of a refused merged batch's members as batches to send: merged again, or the one
/// batch as it came (each as it came if they do not merge after all).
fn merge_again(members: &[(usize, RawBatch)]) -> Vec<(Carries, RawBatch)> {
    if let [(index, batch)] = members {
        return vec![(Carries::One(*index), batch.clone())];
    }
    let batches: Vec<RawBatch> = members.iter().map(|(_, b)| b.clone()).collect();
    let limit = strait_wire::records::DecompressLimit::default();
    match strait_wire::merge::merge(&batches, &limit) {
        Ok(merged) => vec![(Carries::Merged(members.to_vec()), merged)],
        Err(_) => members
            .iter()
            .map(|(index, batch)| (Carries::One(*index), batch.clone()))
            .collect(),
    }
}

/// How many of the call's batches `carries` carries.
fn members_of(carries: &Carries) -> usize {
    match carries {
        Carries::One(_) => 1,
        Carries::Merged(members) => members.len(),
    }
}

/// Marks a batch resolved; `broken` poisons its partition's sequence.
fn resolve(p: &Pending, broken: Option<Error>) {
    if let Ok(mut seq) = p.state.seq.lock() {
        seq.unresolved.retain(|s| *s != p.sequence);
        seq.acknowledged |= broken.is_none();
        if broken.is_some() && seq.broken.is_none() {
            seq.broken = broken;
        }
    }
}

/// A batch in a request: its lane (whose partition it goes to), its sequence, and the bytes
/// to send.
struct Part {
    lane: usize,
    sequence: i32,
    bytes: ForwardedBatch,
}

/// What came back for a request: the broker it went to, the batches it carried (lane and
/// sequence), and the answer.
type Answer = (BrokerId, Vec<(usize, i32)>, Result<ProduceResponse>);

/// A prepared batch: its sequence given and its header rewritten, until it is answered for
/// good. Its rewritten copy and its in-flight permit go with it.
struct Slot {
    pending: Pending,
    /// In a request not answered yet.
    sent: bool,
}

/// After a retriable failure a partition sends nothing more until its requests in flight are
/// answered, the backoff has passed and, if the failure was about routing, the metadata was
/// refreshed; then it sends again from its first unacknowledged batch, in order.
struct Hold {
    not_before: Instant,
    /// The number of metadata refreshes that must have finished (one started after the
    /// failure).
    refreshes: Option<u64>,
}

/// One partition's share of a `send_all` call.
struct Lane {
    tp: TopicPartition,
    state: Arc<PartitionState>,
    /// Batches not prepared yet, in call order (their index in the call).
    queue: VecDeque<(usize, RawBatch)>,
    /// Prepared batches, in sequence order: those sent come first, then those to (re)send.
    window: VecDeque<Slot>,
    /// Slots of `window` in a request not answered yet.
    in_flight: usize,
    hold: Option<Hold>,
    backoff: Backoff,
    /// Whether the partition's leader was unknown before (a first miss waits only for a
    /// metadata refresh, later ones back off too).
    missed_leader: bool,
    /// An in-flight permit that was waited for (another caller held them all), not used yet.
    spare: Option<OwnedSemaphorePermit>,
    awaiting_permit: bool,
}

impl Lane {
    fn is_done(&self) -> bool {
        self.queue.is_empty() && self.window.is_empty()
    }

    /// Takes the next batch from the queue, with the ones behind it that may follow it merged
    /// into it while the merged batch stays within `merge` bytes (no merging without a limit):
    /// as many as their own sizes allow, then half as many until the merged batch (whose record
    /// framing or compression may come out larger) fits. Batches that cannot be merged after
    /// all (their records do not decode) go as they came.
    fn take_next(&mut self, merge: Option<usize>) -> Option<(Carries, RawBatch)> {
        let (first_index, first) = self.queue.pop_front()?;
        let Some(max_bytes) = merge else {
            return Some((Carries::One(first_index), first));
        };
        let mut size = first.bytes.len();
        let mut members = vec![(first_index, first)];
        while let Some((_, next)) = self.queue.front() {
            let last = members.last().map(|(_, b)| &b.header);
            if !last.is_some_and(|l| strait_wire::merge::may_follow(l, &next.header))
                || size.saturating_add(next.bytes.len()) > max_bytes
            {
                break;
            }
            size += next.bytes.len();
            members.extend(self.queue.pop_front());
        }
        while members.len() > 1 {
            let batches: Vec<RawBatch> = members.iter().map(|(_, b)| b.clone()).collect();
            let limit = strait_wire::records::DecompressLimit::default();
            match strait_wire::merge::merge(&batches, &limit) {
                Ok(merged) if merged.bytes.len() <= max_bytes => {
                    return Some((Carries::Merged(members), merged));
                }
                Ok(_) => {
                    let keep = members.len() / 2;
                    for member in members.drain(keep..).rev() {
                        self.queue.push_front(member);
                    }
                }
                Err(e) => {
                    tracing::debug!(
                        partition = %self.tp,
                        error = %e,
                        "batches not merged; they go as they came"
                    );
                    for member in members.drain(1..).rev() {
                        self.queue.push_front(member);
                    }
                }
            }
        }
        let (index, batch) = members.pop()?;
        Some((Carries::One(index), batch))
    }

    /// The error that left a hole in the partition's sequence, if one did.
    fn hole(&self) -> Option<Error> {
        self.state.seq.lock().ok().and_then(|s| s.broken.clone())
    }

    fn acknowledged(&self) -> bool {
        self.state
            .seq
            .lock()
            .map(|s| s.acknowledged)
            .unwrap_or(false)
    }
}

enum Event {
    Deadline,
    Answer(Answer),
    Permit(usize, Option<OwnedSemaphorePermit>),
    Refreshed,
    Wake,
}

/// One `send_all` call: per partition a sliding window of up to `max_in_flight_per_partition`
/// requests in flight, refilled as soon as one of them is answered.
///
/// Each time something happens (an answer, the end of a backoff or of a metadata refresh, a
/// permit freed by another caller) it [`pumps`](Dispatch::pump): in rounds, every partition
/// that may send gives its next batch (first those to send again after a retriable failure,
/// then a newly prepared one while its window has room), and the batches of a round go to
/// their leaders, one request per leader (several when they exceed `max_request_size`), as
/// Kafka's Java producer drains the ready batches of each node. A partition's batches are
/// prepared (sequence, rewritten header) only when they are about to be sent.
///
/// Requests to one broker are submitted to its connection strictly in the order they were
/// made (each waits until the one before it is written), and Kafka handles a connection's
/// requests in order: a partition's batches reach its leader in sequence order.
pub(super) struct Dispatch<'a> {
    producer: &'a RawProducer,
    deadline: Instant,
    pub(super) results: Vec<Option<Result<ProduceAck>>>,
    lanes: Vec<Lane>,
    requests: FuturesUnordered<BoxFuture<'a, Answer>>,
    /// Per broker, dropped once the last request made for it has been submitted.
    submitted: HashMap<BrokerId, oneshot::Receiver<()>>,
    permits: FuturesUnordered<BoxFuture<'static, (usize, Option<OwnedSemaphorePermit>)>>,
    refresh: Option<BoxFuture<'a, ()>>,
    refreshes_started: u64,
    refreshes_done: u64,
    refresh_wanted: bool,
    /// Per leader, how many partitions the producer writes to it (`MergeMode::Auto` only;
    /// counted at the first pump).
    partitions_per_leader: HashMap<BrokerId, usize>,
}

impl<'a> Dispatch<'a> {
    pub(super) fn new(
        producer: &'a RawProducer,
        batches: Vec<(TopicPartition, RawBatch)>,
        deadline: Instant,
    ) -> Self {
        let mut results: Vec<Option<Result<ProduceAck>>> = batches.iter().map(|_| None).collect();
        let mut by_partition: BTreeMap<TopicPartition, VecDeque<(usize, RawBatch)>> =
            BTreeMap::new();
        for (index, (tp, batch)) in batches.into_iter().enumerate() {
            by_partition
                .entry(tp)
                .or_default()
                .push_back((index, batch));
        }
        let client = producer.client.config();
        let mut lanes = Vec::with_capacity(by_partition.len());
        for (tp, queue) in by_partition {
            match producer.partition(&tp) {
                Ok(state) => lanes.push(Lane {
                    tp,
                    state,
                    queue,
                    window: VecDeque::new(),
                    in_flight: 0,
                    hold: None,
                    backoff: Backoff::new(client.retry_backoff, client.retry_backoff_max),
                    missed_leader: false,
                    spare: None,
                    awaiting_permit: false,
                }),
                Err(e) => {
                    for (index, _) in queue {
                        results[index] = Some(Err(e.clone()));
                    }
                }
            }
        }
        Self {
            producer,
            deadline,
            results,
            lanes,
            requests: FuturesUnordered::new(),
            submitted: HashMap::new(),
            permits: FuturesUnordered::new(),
            refresh: None,
            refreshes_started: 0,
            refreshes_done: 0,
            refresh_wanted: false,
            partitions_per_leader: HashMap::new(),
        }
    }

    /// Until every batch has a result, or the deadline: then what is left (in flight or not
    /// yet sent) is a delivery timeout, and requests still in flight are abandoned.
    pub(super) async fn run(&mut self) {
        loop {
            // (A ready answer is taken before the deadline is looked at, hence this test.)
            if Instant::now() >= self.deadline {
                self.time_out();
                return;
            }
            self.pump();
            if self.lanes.iter().all(Lane::is_done) {
                return;
            }
            match self.next_event().await {
                Event::Deadline => {
                    self.time_out();
                    return;
                }
                Event::Answer(answer) => {
                    self.on_answer(answer);
                    // Everything answered meanwhile too, so the next requests carry as many
                    // partitions as are ready.
                    while let Some(Some(answer)) = self.requests.next().now_or_never() {
                        self.on_answer(answer);
                    }
                }
                Event::Permit(lane, permit) => {
                    let lane = &mut self.lanes[lane];
                    lane.awaiting_permit = false;
                    lane.spare = permit;
                }
                Event::Refreshed => {
                    self.refresh = None;
                    self.refreshes_done = self.refreshes_started;
                }
                Event::Wake => {}
            }
        }
    }

    async fn next_event(&mut self) -> Event {
        let now = Instant::now();
        let wake = self
            .lanes
            .iter()
            .filter(|l| l.in_flight == 0)
            .filter_map(|l| l.hold.as_ref().map(|h| h.not_before))
            .filter(|at| *at > now)
            .min();
        let deadline = self.deadline;
        let (requests, permits, refresh) =
            (&mut self.requests, &mut self.permits, &mut self.refresh);
        let (any_request, any_permit, refreshing) =
            (!requests.is_empty(), !permits.is_empty(), refresh.is_some());
        tokio::select! {
            biased;
            Some(answer) = requests.next(), if any_request => Event::Answer(answer),
            Some((lane, permit)) = permits.next(), if any_permit => Event::Permit(lane, permit),
            () = async { if let Some(r) = refresh.as_mut() { r.await } }, if refreshing => {
                Event::Refreshed
            }
            () = tokio::time::sleep_until(wake.unwrap_or(deadline)), if wake.is_some() => {
                Event::Wake
            }
            () = tokio::time::sleep_until(deadline) => Event::Deadline,
        }
    }

    /// Sends what may be sent now, in rounds of at most one batch per partition.
    fn pump(&mut self) {
        let now = Instant::now();
        for lane in &mut self.lanes {
            if let Some(hold) = &lane.hold {
                let refreshed = hold.refreshes.is_none_or(|r| self.refreshes_done >= r);
                if lane.in_flight == 0 && now >= hold.not_before && refreshed {
                    lane.hold = None;
                }
            }
        }
        let metadata = self.producer.client.cached_metadata();
        self.count_partitions_per_leader(&metadata);
        let limit = self.producer.config.max_request_size.max(1);
        loop {
            let mut round: BTreeMap<BrokerId, Vec<Part>> = BTreeMap::new();
            for lane in 0..self.lanes.len() {
                if let Some((leader, part)) = self.next_part(lane, &metadata, now) {
                    round.entry(leader).or_default().push(part);
                }
            }
            if round.is_empty() {
                break;
            }
            // Each request within `max.request.size` (at least one batch): a round larger
            // than that goes as several requests, in order.
            for (leader, parts) in round {
                let mut chunk = Vec::new();
                let mut size = 0;
                for part in parts {
                    if !chunk.is_empty() && size + part.bytes.len() > limit {
                        self.request(leader, std::mem::take(&mut chunk));
                        size = 0;
                    }
                    size += part.bytes.len();
                    chunk.push(part);
                }
                self.request(leader, chunk);
            }
        }
        if self.refresh_wanted && self.refresh.is_none() {
            self.refresh_wanted = false;
            self.refreshes_started += 1;
            let (client, deadline) = (&self.producer.client, self.deadline);
            self.refresh = Some(Box::pin(async move {
                match tokio::time::timeout_at(deadline, client.refresh_metadata()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::debug!(error = %e, "metadata refresh failed"),
                    Err(_) => tracing::debug!("metadata refresh cut by the delivery timeout"),
                }
            }));
        }
    }

    /// Counts, per leader, the partitions it leads that this producer writes (those of earlier
    /// calls too), for [`MergeMode::Auto`] ([`FEW_PARTITIONS`]); once per call. A flow of many
    /// partitions whose last few still have data (the others caught up, or a call of few) is
    /// no reason to merge near the target: merging there cost 30% more CPU per GB
    /// (`bench/cpu-per-gb`, 64 partitions).
    fn count_partitions_per_leader(&mut self, metadata: &Metadata) {
        if self.producer.config.merge.mode != MergeMode::Auto
            || !self.partitions_per_leader.is_empty()
        {
            return;
        }
        let Ok(partitions) = self.producer.partitions.lock() else {
            return;
        };
        for tp in partitions.keys() {
            if let Some(leader) = metadata.leader(tp) {
                *self.partitions_per_leader.entry(leader).or_default() += 1;
            }
        }
    }

    /// The partition's next batch to send, and its leader, if it may send one now: it is not
    /// held after a failure, has a free slot, and (until a batch of this epoch is acknowledged)
    /// nothing in flight.
    fn next_part(
        &mut self,
        index: usize,
        metadata: &Metadata,
        now: Instant,
    ) -> Option<(BrokerId, Part)> {
        let limit = self.producer.config.max_in_flight_per_partition;
        let lane = &self.lanes[index];
        if lane.hold.is_some() || lane.is_done() {
            return None;
        }
        // Until a batch of this epoch is acknowledged, only the first goes.
        let acknowledged = lane.acknowledged();
        if !acknowledged && lane.in_flight > 0 {
            return None;
        }
        let resend = lane.window.iter().position(|s| !s.sent);
        if resend.is_none() && (lane.queue.is_empty() || lane.window.len() >= limit) {
            return None;
        }
        let Some(leader) = metadata.leader(&lane.tp) else {
            self.leader_unknown(index, metadata, now);
            return None;
        };
        let position = match resend {
            Some(position) if self.permit_for(index, position) => position,
            Some(_) => return None,
            None => self.prepare_next(index, leader)?,
        };
        let lane = &mut self.lanes[index];
        let slot = &mut lane.window[position];
        slot.sent = true;
        lane.in_flight += 1;
        Some((
            leader,
            Part {
                lane: index,
                sequence: slot.pending.sequence,
                bytes: slot.pending.bytes.clone(),
            },
        ))
    }

    /// Prepares the partition's next batch into its window, if an in-flight permit is free;
    /// returns its position there. The batches waiting behind it are merged into it when the
    /// producer merges now ([`RawProducer::merge_limit`]).
    fn prepare_next(&mut self, index: usize, leader: BrokerId) -> Option<usize> {
        let producer = self.producer;
        let window = producer.config.max_in_flight_per_partition;
        let partitions = self
            .partitions_per_leader
            .get(&leader)
            .copied()
            .unwrap_or(usize::MAX);
        let lane = &mut self.lanes[index];
        loop {
            let free = lane
                .spare
                .take()
                .or_else(|| Arc::clone(&lane.state.permits).try_acquire_owned().ok());
            // Slots are taken one at a time and never waited for while this call holds some
            // of the partition's (its own answers free them), so concurrent callers cannot
            // hold each other's slots.
            let Some(permit) = free else {
                await_permit(lane, &mut self.permits, index);
                return None;
            };
            let free = window.saturating_sub(lane.window.len());
            let (_, next) = lane.queue.front()?;
            let merge =
                producer.merge_limit(&lane.tp, next, leader, lane.queue.len(), free, partitions);
            let (carries, batch) = lane.take_next(merge)?;
            match producer.prepare(carries, &lane.tp, &batch, &lane.state, permit) {
                Ok(pending) => {
                    lane.window.push_back(Slot {
                        pending,
                        sent: false,
                    });
                    return Some(lane.window.len() - 1);
                }
                Err((carries, e)) => {
                    deliver(&mut self.results, &carries, Err(e));
                    if lane.queue.is_empty() {
                        return None;
                    }
                }
            }
        }
    }

    /// Whether the slot at `position` of the partition's window holds an in-flight permit, as a
    /// batch must to be sent: the part of a split batch takes a free one, or one from a slot
    /// behind it that is not sent (it cannot go before this one anyway).
    fn permit_for(&mut self, index: usize, position: usize) -> bool {
        let lane = &mut self.lanes[index];
        if lane.window[position].pending.permit.is_some() {
            return true;
        }
        let permit = lane
            .spare
            .take()
            .or_else(|| Arc::clone(&lane.state.permits).try_acquire_owned().ok())
            .or_else(|| {
                lane.window
                    .iter_mut()
                    .skip(position + 1)
                    .rev()
                    .filter(|s| !s.sent)
                    .find_map(|s| s.pending.permit.take())
            });
        match permit {
            Some(permit) => {
                lane.window[position].pending.permit = Some(permit);
                true
            }
            None => {
                await_permit(lane, &mut self.permits, index);
                false
            }
        }
    }

    /// Splits the merged batch at `position` of the partition's window, which the target
    /// refused as too large (its topic's `max.message.bytes` is below it, which the producer
    /// cannot know), into two halves in its place, each merged again (or one batch as it came),
    /// to be sent at once. The halves take the refused batch's sequence range in order, as
    /// Kafka's own producer gives the batches it splits after MESSAGE_TOO_LARGE: nothing of
    /// the range was written, so the partition's sequence has no hole, and its batches sent
    /// behind the refused one come back OUT_OF_ORDER_SEQUENCE_NUMBER and are sent again after
    /// the halves. From then on the partition's merged batches stay within half the size
    /// refused. Returns false, leaving the window as it was, if the batch was not merged or
    /// cannot be split.
    fn split(&mut self, index: usize, position: usize, refusal: &Error) -> bool {
        let producer = self.producer;
        let lane = &mut self.lanes[index];
        let Some(slot) = lane.window.get(position) else {
            return false;
        };
        let Carries::Merged(members) = &slot.pending.carries else {
            return false;
        };
        let (front, back) = members.split_at(members.len() / 2);
        let mut parts = Vec::with_capacity(2);
        let mut sequence = slot.pending.sequence;
        for (carries, batch) in [front, back].into_iter().flat_map(merge_again) {
            let Ok(bytes) = strait_wire::forward(&batch, &producer.forward_header(sequence)) else {
                return false;
            };
            let record_count = batch.header.record_count;
            parts.push(Pending {
                carries,
                tp: lane.tp.clone(),
                bytes,
                sequence,
                record_count,
                state: Arc::clone(&lane.state),
                permit: None,
                split: true,
            });
            sequence = increment_sequence(sequence, record_count);
        }
        let Some(mut refused) = lane.window.remove(position) else {
            return false;
        };
        let refused_bytes = refused.pending.bytes.len();
        let cap = refused_bytes / 2;
        if let Ok(mut caps) = producer.merge_caps.lock() {
            let was = caps.entry(lane.tp.clone()).or_insert(cap);
            *was = cap.min(*was);
        }
        tracing::info!(
            partition = %lane.tp,
            bytes = refused_bytes,
            batches = members_of(&refused.pending.carries),
            parts = parts.len(),
            error = %refusal,
            "the target refused a merged batch as too large; it goes again split, and this \
             partition's merged batches stay within {cap} bytes from now on"
        );
        if let Some(first) = parts.first_mut() {
            first.permit = refused.pending.permit.take();
        }
        // The parts' sequences take the refused batch's place among those unresolved (the
        // first part keeps its sequence).
        if let Ok(mut seq) = lane.state.seq.lock() {
            if let Some(at) = seq
                .unresolved
                .iter()
                .position(|s| *s == refused.pending.sequence)
            {
                for (k, part) in parts.iter().enumerate().skip(1) {
                    seq.unresolved.insert(at + k, part.sequence);
                }
            }
        }
        for (k, pending) in parts.into_iter().enumerate() {
            lane.window.insert(
                position + k,
                Slot {
                    pending,
                    sent: false,
                },
            );
        }
        true
    }

    /// The partition's leader is not in the metadata: it waits for a refresh (and, after the
    /// first miss, a backoff), as after a retriable error.
    fn leader_unknown(&mut self, index: usize, metadata: &Metadata, now: Instant) {
        let refreshes = self.want_refresh();
        let lane = &mut self.lanes[index];
        let known = metadata
            .topics
            .get(&lane.tp.topic)
            .is_some_and(|t| t.partitions.contains_key(&lane.tp.partition));
        tracing::debug!(
            partition = %lane.tp,
            known,
            "partition leader unknown; waiting for the metadata"
        );
        let wait = if lane.missed_leader {
            lane.backoff.next_wait()
        } else {
            Duration::ZERO
        };
        lane.missed_leader = true;
        lane.hold = Some(Hold {
            not_before: now + wait,
            refreshes: Some(refreshes),
        });
    }

    /// Asks for a metadata refresh; returns how many must have finished for one to have
    /// started after now.
    fn want_refresh(&mut self) -> u64 {
        self.refresh_wanted = true;
        self.refreshes_started + 1
    }

    /// Makes a request to `leader`, submitted after the one made before it for that broker.
    fn request(&mut self, leader: BrokerId, parts: Vec<Part>) {
        let producer = self.producer;
        let lanes = &self.lanes;
        let request = producer.produce_request(parts.iter().map(|p| (&lanes[p.lane].tp, &p.bytes)));
        let carried: Vec<(usize, i32)> = parts.iter().map(|p| (p.lane, p.sequence)).collect();
        drop(parts);
        let (submitted, now_submitted) = oneshot::channel::<()>();
        let previous = self.submitted.insert(leader, now_submitted);
        self.requests.push(Box::pin(async move {
            if let Some(previous) = previous {
                // Dropped (never sent) once that request is submitted, or failed to be.
                let _ = previous.await;
            }
            // The lease is looked at last, when the request is about to be written: a process
            // stopped and resumed past its session timeout sends nothing.
            let queued = match producer.client.connection(leader).await {
                Ok(conn) => match producer.config.may_write() {
                    Ok(()) => conn.submit_produce(&request).await.map(|s| (conn, s)),
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            };
            drop(submitted);
            drop(request);
            let answer = match queued {
                Ok((conn, submitted)) => conn.answer(submitted).await,
                Err(e) => Err(e),
            };
            (leader, carried, answer)
        }));
    }

    fn on_answer(&mut self, (leader, carried, answer): Answer) {
        match answer {
            Ok(mut response) => {
                // Keyed by names borrowed from the answer: no copy per partition.
                let mut answers: HashMap<_, _, foldhash::fast::RandomState> = HashMap::default();
                for t in &mut response.responses {
                    let topic = t.name.0.as_str();
                    for p in t.partition_responses.drain(..) {
                        answers.insert((topic, p.index), p);
                    }
                }
                // Each batch's outcome first (a request carries one batch per partition, so
                // settling one cannot change another's), then each is settled.
                let lanes = &self.lanes;
                let outcomes: Vec<(usize, i32, Option<Outcome>)> = carried
                    .into_iter()
                    .map(|(index, sequence)| {
                        let lane = &lanes[index];
                        let key = (lane.tp.topic.as_str(), lane.tp.partition);
                        let outcome = lane
                            .window
                            .iter()
                            .find(|s| s.pending.sequence == sequence)
                            .map(|slot| match answers.remove(&key) {
                                None => Outcome::Fail(Error::Unexpected {
                                    broker: leader.to_string(),
                                    what: format!("Produce answer does not mention {}", lane.tp),
                                }),
                                Some(answer) => classify_answer(&slot.pending, answer),
                            });
                        (index, sequence, outcome)
                    })
                    .collect();
                for (index, sequence, outcome) in outcomes {
                    match outcome {
                        Some(outcome) => self.settle(index, sequence, outcome),
                        // Settled already (the deadline passed): only its request is over.
                        None => self.lanes[index].in_flight -= 1,
                    }
                }
            }
            Err(e) => {
                for (index, sequence) in carried {
                    self.settle(index, sequence, classify_request_error(e.clone()));
                }
            }
        }
    }

    /// Takes the outcome of one batch's request.
    fn settle(&mut self, index: usize, sequence: i32, outcome: Outcome) {
        let now = Instant::now();
        let refresh = match &outcome {
            Outcome::Retry(e) if e.needs_metadata_refresh() => Some(self.want_refresh()),
            _ => None,
        };
        let lane = &mut self.lanes[index];
        lane.in_flight -= 1;
        let Some(position) = lane
            .window
            .iter()
            .position(|s| s.pending.sequence == sequence)
        else {
            return;
        };
        let hole = lane.hole();
        let whole = hole.is_none();
        let behind_hole = hole.is_some()
            && match &outcome {
                Outcome::Done(_) => false,
                Outcome::Retry(_) => true,
                Outcome::Fail(e) => e.code() == Some(ResponseError::OutOfOrderSequenceNumber),
            };
        let e = match outcome {
            Outcome::Done(ack) => {
                if let Some(slot) = lane.window.remove(position) {
                    resolve(&slot.pending, None);
                    deliver(&mut self.results, &slot.pending.carries, Ok(ack));
                }
                let client = self.producer.client.config();
                lane.backoff = Backoff::new(client.retry_backoff, client.retry_backoff_max);
                return;
            }
            Outcome::Retry(e) if now < self.deadline && hole.is_none() => {
                tracing::debug!(partition = %lane.tp, sequence, error = %e, "retrying batch");
                lane.window[position].sent = false;
                let hold = lane.hold.get_or_insert_with(|| Hold {
                    not_before: now + lane.backoff.next_wait(),
                    refreshes: None,
                });
                hold.refreshes = hold.refreshes.max(refresh);
                return;
            }
            Outcome::Retry(e) | Outcome::Fail(e) => match hole {
                // Behind a hole in the sequence: it could not be written.
                Some(hole) if behind_hole => Error::Invalid(format!(
                    "{}: not sent, an earlier batch failed ({hole})",
                    lane.tp
                )),
                _ => e,
            },
        };
        let too_large = matches!(
            e.code(),
            Some(ResponseError::MessageTooLarge | ResponseError::RecordListTooLarge)
        );
        if too_large && whole && self.split(index, position, &e) {
            return;
        }
        let lane = &mut self.lanes[index];
        tracing::warn!(partition = %lane.tp, sequence, error = %e, "batch failed");
        let Some(slot) = lane.window.remove(position) else {
            return;
        };
        let fatal = !matches!(e, Error::DuplicateSequence { .. });
        resolve(&slot.pending, fatal.then(|| e.clone()));
        deliver(&mut self.results, &slot.pending.carries, Err(e));
        if fatal {
            self.fail_unsent(index);
        }
    }

    /// The partition's sequence has a hole: its batches not in flight are never sent, so
    /// nothing can land out of order. (Past the deadline they are delivery timeouts.)
    fn fail_unsent(&mut self, index: usize) {
        let past = Instant::now() >= self.deadline;
        let producer = self.producer;
        let lane = &mut self.lanes[index];
        let Some(hole) = lane.hole() else { return };
        let why = |tp: &TopicPartition| {
            if past {
                producer.delivery_timeout(tp)
            } else {
                Error::Invalid(format!("{tp}: not sent, an earlier batch failed ({hole})"))
            }
        };
        let mut sent = VecDeque::new();
        for slot in lane.window.drain(..) {
            if slot.sent {
                sent.push_back(slot);
            } else {
                let e = why(&lane.tp);
                resolve(&slot.pending, Some(e.clone()));
                deliver(&mut self.results, &slot.pending.carries, Err(e));
            }
        }
        lane.window = sent;
        for (batch_index, _) in lane.queue.drain(..) {
            self.results[batch_index] = Some(Err(why(&lane.tp)));
        }
        lane.spare = None;
    }

    /// The deadline passed: whatever has no result yet is a delivery timeout. A batch in
    /// flight may still be written, so its partition's sequence has a hole from here.
    fn time_out(&mut self) {
        for lane in &mut self.lanes {
            let e = self.producer.delivery_timeout(&lane.tp);
            if !lane.is_done() {
                tracing::warn!(
                    partition = %lane.tp,
                    batches = lane.window.len() + lane.queue.len(),
                    error = %e,
                    "batches failed"
                );
            }
            for slot in lane.window.drain(..) {
                resolve(&slot.pending, Some(e.clone()));
                deliver(&mut self.results, &slot.pending.carries, Err(e.clone()));
            }
            for (batch_index, _) in lane.queue.drain(..) {
                self.results[batch_index] = Some(Err(e.clone()));
            }
        }
    }
}
