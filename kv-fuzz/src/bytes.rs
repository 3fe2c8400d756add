//! Mutations of raw bytes: what a damaged download or a hostile file is.

use crate::interesting::U64S;
use crate::rng::Rng;

/// Applies 1 to 4 byte mutations to `data`.
pub fn mutate(data: &mut Vec<u8>, rng: &mut Rng) {
    for _ in 0..=rng.below(4) {
        mutate_once(data, rng);
    }
}

fn mutate_once(data: &mut Vec<u8>, rng: &mut Rng) {
    let len = data.len();
    match rng.below(8) {
        // One bit.
        0 if len > 0 => {
            let at = rng.index(len);
            data[at] ^= 1 << rng.below(8);
        }
        // One byte, any value.
        1 if len > 0 => {
            let at = rng.index(len);
            data[at] = rng.next_u64() as u8;
        }
        // A boundary value over 4 or 8 bytes, either byte order.
        2 | 3 if len >= 8 => {
            let value = *rng.pick(U64S);
            let at = rng.index(len - 7);
            let bytes = if rng.one_in(4) {
                value.to_be_bytes()
            } else {
                value.to_le_bytes()
            };
            let width = if rng.one_in(2) { 4 } else { 8 };
            data[at..at + width].copy_from_slice(&bytes[..width]);
        }
        // A range removed.
        4 if len > 0 => {
            let at = rng.index(len);
            let end = (at + 1 + rng.index(16)).min(len);
            data.drain(at..end);
        }
        // A range repeated.
        5 if len > 0 => {
            let at = rng.index(len);
            let end = (at + 1 + rng.index(64)).min(len);
            let copy = data[at..end].to_vec();
            let to = rng.index(len + 1);
            data.splice(to..to, copy);
        }
        // Cut short.
        6 if len > 0 => data.truncate(rng.index(len)),
        // Random bytes inserted.
        _ => {
            let to = rng.index(len + 1);
            let extra: Vec<u8> = (0..=rng.below(8)).map(|_| rng.next_u64() as u8).collect();
            data.splice(to..to, extra);
        }
    }
}
