//! The offset map's persisted form (`strait_wire::offset_map::MapLoader`): a sequence of map
//! topic records (key, value or tombstone) cut from arbitrary bytes is applied, the map built,
//! and every offset near its segments translated both ways. A map that loads must persist and
//! load again to the same translations.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use strait_wire::offset_map::{MapLoader, OffsetMap};

fn load(u: &mut Unstructured<'_>) -> Result<Option<OffsetMap>> {
    let mut loader = MapLoader::new();
    while !u.is_empty() {
        let key_len = u.int_in_range(0..=40)?;
        let key = u.bytes(key_len)?;
        let value = if u.ratio(1, 8)? {
            None
        } else {
            let value_len = u.int_in_range(0..=24)?;
            Some(u.bytes(value_len)?)
        };
        let _ = loader.apply(key, value);
    }
    Ok(loader.finish().ok())
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(Some(map)) = load(&mut u) else {
        return;
    };
    let mut again = MapLoader::new();
    for (partition, pmap) in map.iter() {
        for record in pmap.to_records(partition, 0) {
            let key = record.encode_key().expect("a decoded topic re-encodes");
            again
                .apply(&key, Some(&record.encode_value()))
                .expect("an encoded record decodes");
        }
    }
    let again = again.finish().expect("a valid map persists and loads");
    for (partition, pmap) in map.iter() {
        let mut probes = vec![i64::MIN, -1, 0, i64::MAX];
        for s in pmap.segments() {
            for p in [s.src_start, s.src_end()] {
                probes.extend([p.saturating_sub(1), p, p.saturating_add(1)]);
            }
        }
        for r in pmap.lost_ranges() {
            probes.extend([r.src_from, r.src_to]);
        }
        for p in probes {
            let t = map.translate(partition, p);
            assert_eq!(t, again.translate(partition, p));
            if let Some(q) = t.target() {
                let _ = map.translate_back(partition, q);
            }
            let _ = map.translate_back(partition, p);
        }
    }
});
