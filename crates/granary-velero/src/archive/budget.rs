//! The total budget for what reading an archive keeps in memory from one entry to the
//! next: the entry-path fingerprints of the duplicate check, pending extension headers,
//! and whatever the consumer collects (items, manifest entries, notes). The per-entry
//! limits bound one entry; without a total, their product (millions of entries times
//! kilobytes of path) was the only bound, and a 1.7 MB archive of 100k long paths took
//! 897 MB. The reader and its consumer charge one [`RetainedBudget`]; passing its limit
//! fails the read with [`ArchiveError::RetainedBudgetExceeded`].
//!
//! What one entry needs while it is read (its body, at most
//! [`ArchiveLimits::max_entry_bytes`], and the JSON parsed from it) is given back before
//! the next and is not counted here.

use std::cell::Cell;

use super::error::ArchiveError;
use super::limits::ArchiveLimits;

/// Bytes counted per retained thing on top of its own bytes: the allocation and the
/// slot of the map or set holding it (an estimate on the high side).
pub const PER_ITEM_OVERHEAD: u64 = 64;

/// Bytes kept in memory across entries, against a limit. Shared by reference between
/// the reader and the closure consuming its entries (single-threaded, like the read).
#[derive(Debug)]
pub struct RetainedBudget {
    limit: u64,
    used: Cell<u64>,
    peak: Cell<u64>,
}

impl RetainedBudget {
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            used: Cell::new(0),
            peak: Cell::new(0),
        }
    }

    /// A budget of [`ArchiveLimits::max_retained_bytes`].
    pub fn for_limits(limits: &ArchiveLimits) -> Self {
        Self::new(limits.max_retained_bytes)
    }

    /// Counts `bytes` as kept; refuses once the total would pass the limit.
    pub fn charge(&self, bytes: u64) -> Result<(), ArchiveError> {
        let used = self.used.get().saturating_add(bytes);
        if used > self.limit {
            return Err(ArchiveError::RetainedBudgetExceeded { limit: self.limit });
        }
        self.used.set(used);
        self.peak.set(self.peak.get().max(used));
        Ok(())
    }

    /// Counts `bytes` (charged before) as given back.
    pub fn release(&self, bytes: u64) {
        self.used.set(self.used.get().saturating_sub(bytes));
    }

    /// Bytes counted as kept now.
    pub fn used(&self) -> u64 {
        self.used.get()
    }

    /// The most bytes counted as kept at once.
    pub fn peak(&self) -> u64 {
        self.peak.get()
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_up_to_the_limit_and_remembers_the_peak() {
        let budget = RetainedBudget::new(100);
        budget.charge(60).unwrap();
        budget.charge(40).unwrap();
        assert!(matches!(
            budget.charge(1),
            Err(ArchiveError::RetainedBudgetExceeded { limit: 100 })
        ));
        budget.release(70);
        assert_eq!((budget.used(), budget.peak()), (30, 100));
        budget.release(1000);
        assert_eq!(budget.used(), 0);
    }
}
