//! Without `CountingAlloc` as the global allocator the census cannot count:
//! it says so, rather than report zeros.

use kv_candle::census::{Census, Enlistment};

#[test]
fn a_census_without_its_allocator_is_an_error_saying_how_to_install_it() {
    let error = Census::new()
        .run(|| Ok(()), |()| Ok(()), |()| Ok(()))
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(
            "kv-candle: the census counts through its global allocator; install it in the test \
             binary: #[global_allocator] static ALLOC: kv_candle::census::CountingAlloc = \
             kv_candle::census::CountingAlloc::new();"
        ),
        "{error}"
    );
    assert_eq!(Enlistment::current(), None);
}
