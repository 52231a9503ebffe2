//! Scans arbitrary bytes as a Fetch response's `records`, rewrites every batch that comes out
//! for forwarding, and checks that the rewritten batch scans again as one batch with the same
//! records. Nothing may panic on any input.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use strait_wire::batch::batch_crc;
use strait_wire::{rewrite_for_forward, BatchScanner, ForwardHeader};

fuzz_target!(|data: &[u8]| {
    let buf = Bytes::copy_from_slice(data);
    // The CRC check off lets the fuzzer reach the rest of the scanner without forging CRCs.
    for verify_crc in [true, false] {
        let mut scanner = BatchScanner::new(buf.clone()).verify_crc(verify_crc);
        let mut failed = false;
        for item in scanner.by_ref() {
            let Ok(batch) = item else {
                failed = true;
                continue;
            };
            assert_eq!(batch.bytes.len(), batch.header.total_size());
            // Sequences near i32::MAX, so that both sides of the overflow check get exercised.
            let fwd = ForwardHeader {
                producer_id: 4242,
                producer_epoch: 7,
                base_sequence: i32::MAX - (data.len() % 128) as i32,
                transactional: data.len().is_multiple_of(2),
            };
            let Ok(out) = rewrite_for_forward(&batch, &fwd) else {
                continue;
            };
            // The new CRC follows from the old one: right where the batch's was right (always,
            // once scanned with the check on), wrong where it was wrong.
            let crc_right = |b: &[u8]| batch_crc(b) == b.get(17..21).and_then(|c| c.try_into().ok()).map(u32::from_be_bytes);
            assert_eq!(crc_right(&out), crc_right(&batch.bytes));
            let mut rescan = BatchScanner::new(out).verify_crc(verify_crc);
            let again = rescan
                .next()
                .expect("a rewritten batch is complete")
                .expect("a rewritten batch scans (CRC included, if it was checked)");
            assert!(rescan.next().is_none(), "a rewritten batch is one batch");
            assert_eq!(rescan.trailing_partial_bytes(), 0);
            assert_eq!(again.header.record_count, batch.header.record_count);
            assert_eq!(
                again.header.last_offset_delta,
                batch.header.last_offset_delta
            );
            assert_eq!(again.header.base_offset, 0);
            assert_eq!(again.header.producer_id, fwd.producer_id);
            assert_eq!(again.header.base_sequence, fwd.base_sequence);
            assert_eq!(again.bytes[61..], batch.bytes[61..]);
        }
        if !failed {
            assert_eq!(
                scanner.consumed_bytes() + scanner.trailing_partial_bytes(),
                data.len()
            );
        }
    }
});
