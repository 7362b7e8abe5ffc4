//! The read-only configuration user space sets before load (see `c1m_common::Config`).

use c1m_common::{Config, OFFSET_UNKNOWN};

/// Patched by the loader with `EbpfLoader::set_global`; lives in `.rodata`, which the
/// loader freezes, so the verifier treats every field as a constant.
#[unsafe(no_mangle)]
pub static CONFIG: Config = Config::DEFAULT;

/// Reads one field of [`CONFIG`]. Volatile, or the compiler would fold in the
/// defaults it sees at build time.
macro_rules! config_value {
    ($($field:tt)+) => {
        // SAFETY: CONFIG is a plain static; reading it can't fault.
        unsafe { core::ptr::read_volatile(&raw const $crate::config::CONFIG.$($field)+) }
    };
}
pub(crate) use config_value as cfg;

/// `Some(offset)` when the loader could resolve it on this kernel.
#[inline(always)]
pub fn known(offset: u32) -> Option<usize> {
    if offset == OFFSET_UNKNOWN {
        None
    } else {
        Some(offset as usize)
    }
}
