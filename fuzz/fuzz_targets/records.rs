//! The rebuild path's record codec (`strait_wire::records`, `strait_wire::rebuild`) on the
//! batches the scanner finds in arbitrary bytes: decompress and parse their records under the
//! default limits, re-encode what parsed and check it parses to the same records, and rebuild
//! each batch from a position read from the input. The CRC check is off so that the fuzzer
//! reaches the codecs without forging CRCs (rebuild checks it itself, so it is given a batch
//! with a correct CRC).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use strait_wire::batch::batch_crc;
use strait_wire::rebuild::rebuild;
use strait_wire::records::{batch_records, encode_records, parse_records};
use strait_wire::BatchScanner;

fuzz_target!(|data: &[u8]| {
    let [pick, rest @ ..] = data else {
        return;
    };
    let buf = Bytes::copy_from_slice(rest);
    for batch in BatchScanner::new(buf).verify_crc(false).flatten() {
        if let Ok(records) = batch_records(&batch) {
            assert_eq!(records.len() as i32, batch.header.record_count);
            let mut out = Vec::new();
            if encode_records(&records, &mut out).is_ok() {
                let again = parse_records(&Bytes::from(out), batch.header.record_count)
                    .expect("encoded records parse");
                assert_eq!(again, records);
            }
        }
        // Give the batch a correct CRC so that rebuild gets past its check.
        let mut bytes = batch.bytes.to_vec();
        if let Some(crc) = batch_crc(&bytes) {
            bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        let fixed = Bytes::from(bytes);
        let Some(Ok(batch)) = BatchScanner::new(fixed).next() else {
            continue;
        };
        let keep_from = batch
            .header
            .base_offset
            .saturating_add(i64::from(*pick) - 1);
        if let Ok(Some(rebuilt)) = rebuild(&batch, keep_from) {
            let kept: i64 = rebuilt.runs.iter().map(|r| r.len).sum();
            assert_eq!(i64::from(rebuilt.batch.header.record_count), kept);
            assert!(rebuilt.runs.iter().all(|r| r.src_offset >= keep_from));
            let rescanned = BatchScanner::new(rebuilt.batch.bytes.clone())
                .next()
                .expect("a rebuilt batch is complete")
                .expect("a rebuilt batch scans, CRC included");
            assert_eq!(
                rescanned.header.record_count,
                rebuilt.batch.header.record_count
            );
        }
    }
});
