//! A request frame in pieces ([`Frame`]): written one after the other, so that record batches
//! go from the fetched buffer to the socket without being copied into a request buffer.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, Bytes};

/// A request frame as the buffers that make it up, in order: what the codec encoded, and
/// record batches as they are (slices of other buffers, not copied). It is a [`Buf`] whose
/// [`chunks_vectored`](Buf::chunks_vectored) names every piece, so a vectored write hands
/// them all to the socket in one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    pieces: VecDeque<Bytes>,
    remaining: usize,
}

impl Frame {
    /// An empty frame, to [`push`](Frame::push) pieces onto.
    pub fn with_capacity(pieces: usize) -> Self {
        Self {
            pieces: VecDeque::with_capacity(pieces),
            remaining: 0,
        }
    }

    /// Appends `piece` (an empty one is left out).
    pub fn push(&mut self, piece: Bytes) {
        if !piece.is_empty() {
            self.remaining += piece.len();
            self.pieces.push_back(piece);
        }
    }

    /// Appends the pieces of `other`.
    pub fn append(&mut self, mut other: Frame) {
        self.remaining += other.remaining;
        self.pieces.append(&mut other.pieces);
    }

    /// The frame's bytes in one buffer (a copy; for tests and diagnostics).
    pub fn to_bytes(&self) -> Bytes {
        let mut frame = self.clone();
        frame.copy_to_bytes(frame.remaining())
    }
}

impl From<Bytes> for Frame {
    fn from(bytes: Bytes) -> Self {
        let mut frame = Self::with_capacity(1);
        frame.push(bytes);
        frame
    }
}

impl Buf for Frame {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.pieces.front().map_or(&[], |p| p.as_ref())
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (slot, piece) in dst.iter_mut().zip(&self.pieces) {
            *slot = IoSlice::new(piece);
            n += 1;
        }
        n
    }

    fn advance(&mut self, mut cnt: usize) {
        cnt = cnt.min(self.remaining);
        self.remaining -= cnt;
        while cnt > 0 {
            let Some(front) = self.pieces.front_mut() else {
                return;
            };
            if cnt < front.len() {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.pieces.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_across_pieces_and_skips_empty_ones() {
        let mut frame = Frame::from(Bytes::from_static(b"ab"));
        frame.push(Bytes::new());
        frame.push(Bytes::from_static(b"cde"));
        assert_eq!(frame.remaining(), 5);
        let mut slices = [IoSlice::new(&[]); 4];
        assert_eq!(frame.chunks_vectored(&mut slices), 2);
        frame.advance(3);
        assert_eq!(frame.chunk(), b"de");
        assert_eq!(frame.to_bytes(), Bytes::from_static(b"de"));
        frame.advance(9);
        assert_eq!(frame.remaining(), 0);
        assert!(frame.chunk().is_empty());
    }
}
