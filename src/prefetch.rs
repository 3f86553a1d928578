//! Software prefetch for loops that walk one array in order and another at random (rows in
//! payment order and their statement lines, pairs in line order and their payments): asking
//! for an item a dozen iterations ahead hides most of the memory latency. Measured on the 1M
//! benchmark: writing results.csv took ~30 % less time.

/// How many iterations ahead the loops ask for their random item: far enough for the memory
/// access to finish, near enough for the line to still be in cache when it is used.
pub const AHEAD: usize = 12;

/// Hints the CPU to load `value`'s memory (its first three cache lines) into cache.
#[inline]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = (value as *const T).cast::<i8>();
        for off in [0, 64, 128] {
            // SAFETY: a prefetch is only a hint: it never faults and changes no memory, even
            // for an address past the value.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
