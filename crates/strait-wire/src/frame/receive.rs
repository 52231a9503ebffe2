//! The receive side of a connection ([`ReceiveBuffer`]): response frames split off one buffer
//! without copying, and the memory of frames already dropped used again for later ones.
//!
//! Why it matters: a source broker's fetch responses are megabytes each, and the batches in them
//! are forwarded from the response's own memory, so that memory lives until the target has
//! acknowledged them. A new allocation for every response made the allocator hand the old ones
//! back to the kernel and ask for fresh pages, which the kernel zeroes on first touch: measured on
//! a 64-partition flow, a third of strait's CPU went to zeroing pages (`docs/benchmarks.md`,
//! "CPU per GB against the machine's floor").

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use super::{frame_len, split_frame, FrameError};

/// Large buffers kept per connection for reuse. When a fetch response arrives, the data path may
/// still hold the two before it (the one whose batches it writes, and the one before whose last
/// batches await the target's acknowledgement): a third spare is then free.
const SPARE_BUFFERS: usize = 3;

/// The smallest buffer allocated, enough for most responses that are not fetches.
const MIN_CAPACITY: usize = 64 * 1024;

/// Where a connection reads its responses into, and splits them off from.
///
/// Each frame returned shares the memory it was read into. A response's first bytes are read
/// into a small buffer; once its size is known, and it needs more room than the buffer has, the
/// bytes move to a large buffer whose earlier frames have all been dropped, if one is kept, or
/// else to a new one. At most [`SPARE_BUFFERS`] large buffers are kept: the memory a connection
/// holds beyond the frames in use is at most that many of its largest responses.
#[derive(Debug)]
pub struct ReceiveBuffer {
    buf: BytesMut,
    /// The size of the memory `buf` reads into (its capacity when it was made or reclaimed).
    buf_memory: usize,
    /// Large buffers set aside, emptied: their memory is used again once the frames split off
    /// it are all dropped.
    spare: VecDeque<(BytesMut, usize)>,
    max_frame: usize,
}

impl ReceiveBuffer {
    /// An empty buffer for frames of at most `max_frame` bytes (a larger size announced by the
    /// peer is [`FrameError::BadSize`]).
    pub fn new(max_frame: usize) -> Self {
        Self {
            buf: BytesMut::with_capacity(MIN_CAPACITY),
            buf_memory: MIN_CAPACITY,
            spare: VecDeque::with_capacity(SPARE_BUFFERS),
            max_frame,
        }
    }

    /// The next whole frame's body (without its size), if the buffer holds one. When it does
    /// not, the buffer has room for the rest of the frame (or some room, when even the size is
    /// not in yet), and [`buf_mut`](Self::buf_mut) is where to read more bytes.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if let Some(frame) = split_frame(&mut self.buf, self.max_frame)? {
            return Ok(Some(frame));
        }
        let len = frame_len(&self.buf, self.max_frame)?;
        let wanted = len.unwrap_or(MIN_CAPACITY);
        let additional = wanted.saturating_sub(self.buf.len()).max(1);
        if self.buf.capacity() - self.buf.len() >= additional || self.buf.try_reclaim(additional) {
            return Ok(None);
        }
        // Only a frame whose size is known goes to a large buffer: while the next response is
        // awaited, the frames of earlier ones are still in use and their memory is not free.
        let reusable = match len {
            Some(len) => self.spare.iter_mut().position(|(s, _)| s.try_reclaim(len)),
            None => None,
        };
        let (mut next, memory) = reusable
            .and_then(|i| self.spare.remove(i))
            .unwrap_or_else(|| {
                let memory = wanted.max(MIN_CAPACITY);
                (BytesMut::with_capacity(memory), memory)
            });
        next.extend_from_slice(&self.buf);
        let mut old = std::mem::replace(&mut self.buf, next);
        let old_memory = std::mem::replace(&mut self.buf_memory, memory);
        if old_memory > MIN_CAPACITY {
            old.clear();
            if self.spare.len() == SPARE_BUFFERS {
                self.spare.pop_front();
            }
            self.spare.push_back((old, old_memory));
        }
        Ok(None)
    }

    /// The buffer to read the socket's bytes into (after [`next_frame`](Self::next_frame)
    /// returned `None`).
    pub fn buf_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }
}

#[cfg(test)]
mod tests {
    use bytes::BufMut;

    use super::*;

    fn frame_of(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    /// Feeds `bytes` to `rb` as a socket would (at most `chunk` at a time, only when asked),
    /// returning the frames in order.
    fn feed(rb: &mut ReceiveBuffer, bytes: &[u8], chunk: usize) -> Vec<Bytes> {
        let mut frames = Vec::new();
        let mut rest = bytes;
        loop {
            match rb.next_frame().unwrap() {
                Some(f) => frames.push(f),
                None if rest.is_empty() => return frames,
                None => {
                    let buf = rb.buf_mut();
                    assert!(
                        buf.capacity() > buf.len(),
                        "next_frame left no room to read into"
                    );
                    let n = chunk.min(rest.len()).min(buf.capacity() - buf.len());
                    buf.put_slice(&rest[..n]);
                    rest = &rest[n..];
                }
            }
        }
    }

    #[test]
    fn frames_come_out_whole_and_in_order_however_the_bytes_arrive() {
        let bodies: Vec<Vec<u8>> = (0..20u8)
            .map(|i| vec![i; (i as usize * 37_911) % 300_000 + 1])
            .collect();
        let wire: Vec<u8> = bodies.iter().flat_map(|b| frame_of(b)).collect();
        for chunk in [1, 3, 4096, 65_536, 1 << 20] {
            let mut rb = ReceiveBuffer::new(1 << 20);
            let frames = feed(&mut rb, &wire, chunk);
            assert_eq!(frames.len(), bodies.len(), "chunk {chunk}");
            for (f, b) in frames.iter().zip(&bodies) {
                assert_eq!(&f[..], &b[..], "chunk {chunk}");
            }
        }
    }

    #[test]
    fn the_memory_of_dropped_frames_is_used_again() {
        let body = vec![7u8; 1 << 20];
        let wire = frame_of(&body);
        let mut rb = ReceiveBuffer::new(2 << 20);
        // Frames kept alive for two more frames (as the data path keeps a response until its
        // batches are acknowledged): after the first few, no new memory.
        let mut alive: VecDeque<Bytes> = VecDeque::new();
        let mut seen = Vec::new();
        for _ in 0..10 {
            let frame = feed(&mut rb, &wire, 1 << 16).pop().unwrap();
            assert_eq!(&frame[..], &body[..]);
            seen.push(frame.as_ptr());
            alive.push_back(frame);
            if alive.len() > 2 {
                alive.pop_front();
            }
        }
        let distinct: std::collections::HashSet<_> = seen.iter().collect();
        assert!(
            distinct.len() <= 4,
            "{} allocations for 10 frames",
            distinct.len()
        );
        // Frames still alive keep their bytes: nothing was written over them.
        for f in &alive {
            assert!(f.iter().all(|b| *b == 7));
        }
    }

    #[test]
    fn a_frame_over_the_maximum_is_refused_before_room_is_made() {
        let mut rb = ReceiveBuffer::new(100);
        rb.buf_mut().put_i32(101);
        assert!(matches!(
            rb.next_frame(),
            Err(FrameError::BadSize {
                size: 101,
                max: 100
            })
        ));
        assert!(rb.buf_mut().capacity() < 1 << 20);
    }
}
